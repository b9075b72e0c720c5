// Package dns is Ployz's Internal DNS implementation (the dns plugin): it
// answers A queries for Service names under .internal from the Containers
// table of the replicated store and forwards everything else to the
// Machine's upstream resolvers. It serves the spec defined by package
// sdk/dns, answers nothing before its first load from the store, and keeps
// its last answers while the store is unreachable (docs/architecture.md,
// "Serving outlives the daemon").
package dns
