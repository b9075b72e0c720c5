package release

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ployz/ployz/core/rpc"
)

// Signed bundles (docs/releases.md). A bundle read from a file (`--bundle`,
// the bundle beside the CLI) or uploaded to a Machine is installed only
// when a release key the binary was built with signed it, either way:
//
//   - its detached signature <bundle>.sig beside it: a Signature file over
//     BundleStatement(the bundle's sha256). `make release` writes one
//     beside each bundle; `releasekey sign` signs a bundle by hand;
//   - the signed index of its release (release.json and release.json.sig
//     in the bundle's directory, as in a release source) listing the
//     bundle's sha256 and size.
//
// The proof travels with the upload (rpc.BundleProof) and the Machine
// checks it against its own keys: it does not take the CLI's word.

// BundleStatement is what a bundle's detached signature signs. The prefix
// keeps it from ever being the bytes of an index (JSON) or another
// signed message.
func BundleStatement(sha256hex string) []byte {
	return []byte("ployz release bundle sha256:" + sha256hex + "\n")
}

// SignBundle writes the detached signature of the bundle at p by key to
// p.sig.
func SignBundle(p string, key ed25519.PrivateKey) error {
	sum, _, err := Digest(p)
	if err != nil {
		return fmt.Errorf("sign bundle: %w", err)
	}
	return os.WriteFile(p+SigSuffix, Sign(BundleStatement(sum), key), 0o644)
}

// FindProof reads what signs the bundle file at p: p.sig, else the
// release.json (and its .sig) in p's directory. A bundle with neither
// gets nil; VerifyBundle then refuses it naming both.
func FindProof(p string) (*rpc.BundleProof, error) {
	sig, err := readSmall(p + SigSuffix)
	if err == nil {
		return &rpc.BundleProof{Signature: sig}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	index := filepath.Join(filepath.Dir(p), IndexName)
	ix, err := readSmall(index)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ixSig, err := readSmall(index + SigSuffix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &rpc.BundleProof{Index: ix, IndexSignature: ixSig}, nil
}

// readSmall reads a proof file, refusing one larger than an upload may
// carry.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, rpc.MaxProofBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(b) > rpc.MaxProofBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, rpc.MaxProofBytes)
	}
	return b, nil
}

// VerifyBundle checks that proof signs the bundle of digest sum and size
// by one of keys and returns that key's id. name (the bundle's file, or
// what the upload says it is) is named in every refusal, with the keys
// this build trusts.
func VerifyBundle(name, sum string, size int64, proof *rpc.BundleProof, keys []ed25519.PublicKey) (string, error) {
	refuse := func(reason string) (string, error) {
		return "", untrustedBundle(fmt.Sprintf("bundle %s: not signed by a trusted release key (trusted: %s): %s", name, keyIDs(keys), reason))
	}
	switch {
	case len(keys) == 0:
		_, reason := checkSignature("", nil, nil, keys)
		return refuse(reason)
	case proof != nil && proof.Signature != nil:
		sigName := filepath.Base(name) + SigSuffix
		id, reason := checkSignature(sigName, BundleStatement(sum), proof.Signature, keys)
		if reason != "" {
			return refuse(sigName + ": " + reason)
		}
		return id, nil
	case proof != nil && proof.Index != nil:
		return verifyListed(name, sum, size, proof, keys, refuse)
	}
	return refuse(fmt.Sprintf("no %s%s beside it, and no signed %s in its directory listing it", filepath.Base(name), SigSuffix, IndexName))
}

// untrustedBundle is a refused bundle: its message leads with the bundle
// and it matches ErrUntrusted.
type untrustedBundle string

func (e untrustedBundle) Error() string { return string(e) }
func (e untrustedBundle) Unwrap() error { return ErrUntrusted }

// verifyListed accepts a bundle its release's signed index lists by
// digest and size.
func verifyListed(name, sum string, size int64, proof *rpc.BundleProof, keys []ed25519.PublicKey, refuse func(string) (string, error)) (string, error) {
	id, reason := checkSignature(IndexName+SigSuffix, proof.Index, proof.IndexSignature, keys)
	if reason != "" {
		return refuse(IndexName + ": " + reason)
	}
	ix, err := ParseIndex(IndexName, proof.Index)
	if err != nil {
		return refuse(err.Error())
	}
	for _, a := range ix.Artifacts {
		if a.Kind == KindBundle && a.SHA256 == sum && a.Size == size {
			return id, nil
		}
	}
	return refuse(fmt.Sprintf("the signed %s of release %s does not list a bundle of sha256 %s and %d bytes (tampered, or another release's)", IndexName, ix.Version, sum, size))
}

// VerifyBundleFile checks the bundle file at p against the keys this
// build trusts, with the proof found beside it (FindProof). It returns
// that proof, for the Machines it is pushed to, and the signing key's id.
func VerifyBundleFile(p string) (*rpc.BundleProof, string, error) {
	keys, err := TrustedKeys()
	if err != nil {
		return nil, "", err
	}
	proof, err := FindProof(p)
	if err != nil {
		return nil, "", fmt.Errorf("bundle %s: %w", p, err)
	}
	sum, size, err := Digest(p)
	if err != nil {
		return nil, "", err
	}
	id, err := VerifyBundle(p, sum, size, proof, keys)
	return proof, id, err
}
