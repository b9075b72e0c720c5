// Command ployz-ingress-caddy is Ployz's Ingress Proxy plugin, an embedded
// Caddy. ployzd installs it into the plugin store by digest and runs it
// long-lived under ployz-plugin@ingress-caddy.service (`serve`): it takes
// its spec through the SDK's Configure (contract: package sdk/ingress),
// keeps it so a restart serves without ployzd, and parks its listening
// sockets in systemd's fd store. `status` prints what it loaded.
package main

import (
	"os"

	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/proxy"
)

func main() { os.Exit(proxy.Main(version.Version, os.Args[1:], os.Stdout, os.Stderr)) }
