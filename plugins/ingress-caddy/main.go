// Command ployz-ingress-caddy is Ployz's Ingress Proxy plugin: `serve-ingress`
// runs an embedded Caddy on /run/ployz/ingress.json under the runtime unit
// the daemon writes (see packages sdk/ingress and internal/proxy);
// `status` prints what it loaded; the SDK's plugin modes answer Info.
package main

import (
	"os"

	"github.com/ployz/ployz/core/version"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/proxy"
)

func main() { os.Exit(proxy.Main(version.Version, os.Args[1:], os.Stdout, os.Stderr)) }
