// Command ployz-dns is Ployz's Internal DNS plugin. ployzd installs it into
// the plugin store by digest and runs it long-lived under
// ployz-plugin@dns.service (`ployz-dns serve`): it takes its spec through
// the SDK's Configure (contract: package sdk/dns), keeps it so a restart
// serves without ployzd, and parks its port-53 sockets in systemd's fd
// store. `--probe` exits 0 only when the binary can serve.
package main

import (
	"os"

	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/plugins/dns/internal/dns"
)

func main() { os.Exit(dns.Main(version.Version, os.Args[1:], os.Stdout, os.Stderr)) }
