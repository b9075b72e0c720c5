// Command ployz-ingress-caddy is the Ployz ingress-caddy plugin. It is not implemented yet: it
// builds, answers --version, and serves no capability.
package main

import "github.com/ployz/ployz/plugins/internal/placeholder"

func main() { placeholder.Main("ingress-caddy") }
