// Package dns is the contract of a Ployz Internal DNS plugin: the spec
// the daemon hands it (Spec, a frozen format: fields are only added and
// readers ignore unknown ones) and its validation (ParseSpec), shared by
// the daemon that derives the spec and any plugin that serves it.
//
// What such a plugin must do is described in docs/plugins.md: answer A
// queries for Service names under .internal from the Containers table of
// the replicated store, forward everything else to the upstreams, answer
// nothing before its first load from the store, and keep its last answers
// while the store is unreachable. Ployz's own implementation lives in
// plugins/dns.
package dns
