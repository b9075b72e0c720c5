// Package acme obtains the Ingress Proxy's certificates from an ACME CA
// (HTTP-01) once for the whole Cluster and shares them through the
// replicated certificates table (docs/architecture.md bet 9: Caddy serves the
// material; the coordination around it is ours).
//
// Every Machine's proxy runs a Manager. For each hostname the proxy routes
// it reads the hostname's certificates row. A hostname without valid
// material, or past two thirds of its lifetime, needs issuance. The
// participating Machines are ranked by id; rank k waits k × the rank delay
// after it first saw the need, and every Machine waits while another
// Machine's challenge is fresh in the row or the row's next attempt lies
// ahead. The Machine whose turn comes checks that the hostname reaches
// this Cluster (/.ployz-verify), orders, writes the HTTP-01 challenge into
// the row (every Machine's Caddy answers it, whichever one the CA
// reaches), and writes the material, or the failure with a backoff of 60 s
// doubling to 1 h, keeping the old material.
package acme
