// Command releasekey makes and reads Ployz release keys (docs/releases.md):
//
//	go run ./internal/releasekey gen FILE   write a new private key to FILE (0600), print its public key
//	go run ./internal/releasekey pub [FILE] print the public key of FILE, else of $PLOYZ_RELEASE_KEY
//	go run ./internal/releasekey sign FILE BUNDLE...  write BUNDLE.sig, the bundle's signature by FILE's key
//
// `make release` signs with the private key and links the public key
// into the binaries it builds, so they trust what it signs.
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/ployz/ployz/core/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "releasekey:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: releasekey gen FILE | pub [FILE] | sign FILE BUNDLE...")
	}
	switch {
	case args[0] == "gen" && len(args) == 2:
		priv, pub, err := release.GenerateKey()
		if err != nil {
			return err
		}
		// O_EXCL: never overwrite a release key.
		f, err := os.OpenFile(args[1], os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(priv); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Println(pub)
		return nil
	case args[0] == "pub" && len(args) <= 2:
		file := ""
		if len(args) == 2 {
			file = args[1]
		}
		k, err := release.LoadPrivateKey(file)
		if err != nil {
			return err
		}
		fmt.Println(base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)))
		return nil
	case args[0] == "sign" && len(args) >= 3:
		// A bundle built by hand (a development build's, signed with the
		// key `make build` made in bin/) for `--bundle`.
		k, err := release.LoadPrivateKey(args[1])
		if err != nil {
			return err
		}
		for _, b := range args[2:] {
			if err := release.SignBundle(b, k); err != nil {
				return err
			}
			fmt.Printf("%s%s signed by key %s\n", b, release.SigSuffix, release.KeyID(k.Public().(ed25519.PublicKey)))
		}
		return nil
	}
	return fmt.Errorf("usage: releasekey gen FILE | pub [FILE] | sign FILE BUNDLE...")
}
