// Package caddyconfig renders the routes an ingress computes (package
// sdk/ingress) into the Caddy JSON config the ingress-caddy plugin loads:
// HTTP by hostname, HTTPS from loaded certificates, HTTP-01 challenge
// answers and plain TCP through caddy-l4. Output is deterministic for
// equal input, so comparing bytes tells whether a reload is needed.
package caddyconfig
