// Command ployz-dns is Ployz's Internal DNS plugin: `ployz-dns serve-dns`
// serves /run/ployz/dns.json under the runtime unit the daemon writes (see
// packages sdk/dns and internal/dns), `--probe` exits 0 only when the binary can serve, and
// the SDK's plugin modes answer Info.
package main

import (
	"os"

	"github.com/ployz/ployz/core/version"
	"github.com/ployz/ployz/plugins/dns/internal/dns"
)

func main() { os.Exit(dns.Main(version.Version, os.Args[1:], os.Stdout, os.Stderr)) }
