// Package placeholder is the entry point of plugin binaries whose issue has
// not landed: they answer --version and say plainly that they serve nothing.
package placeholder

import (
	"fmt"
	"os"

	"github.com/ployz/ployz/core/version"
)

// Main runs a placeholder plugin named name and exits.
func Main(name string) {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Printf("ployz-%s %s\n", name, version.Version)
		return
	}
	fmt.Fprintf(os.Stderr, "ployz-%s %s: not implemented yet; this plugin serves no capability\n", name, version.Version)
	os.Exit(2)
}
