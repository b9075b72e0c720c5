// Package dnsv1 is the Go code generated from dns.proto: the service a "dns" kind plugin serves (Internal DNS).
// Regenerate it with `make proto`; `make lint` checks it is current.
package dnsv1
