// Command ployz-launch is the socket-activation launcher on its own
// (core/launcher). Machines run it as ployzd itself, mounted under the
// name "launch"; this command builds the same code small, for tests.
package main

import (
	"os"

	"github.com/ployz/ployz/core/launcher"
)

func main() { os.Exit(launcher.Main()) }
