// Command releasekey makes and reads Ployz release keys (docs/releases.md):
//
//	go run ./internal/releasekey gen FILE   write a new private key to FILE (0600), print its public key
//	go run ./internal/releasekey pub [FILE] print the public key of FILE, else of $PLOYZ_RELEASE_KEY
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
		return fmt.Errorf("usage: releasekey gen FILE | pub [FILE]")
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
	}
	return fmt.Errorf("usage: releasekey gen FILE | pub [FILE]")
}
