// Command ployz-logstore is Ployz's Log Store plugin. ployzd installs it
// into the plugin store by digest and runs it long-lived under
// ployz-plugin@logstore.service (`ployz-logstore serve`): it copies the
// output of this Machine's Service Containers from Docker's local log
// driver files into its own store, keeps it after the Containers are
// removed, and answers TailLogs and LogHistory (contract: sdk/observe).
package main

import (
	"os"

	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/plugins/logstore/internal/logstore"
)

func main() { os.Exit(logstore.Main(version.Version, os.Args[1:], os.Stderr)) }
