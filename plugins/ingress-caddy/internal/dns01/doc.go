// Package dns01 changes DNS for ACME DNS-01 challenges through the
// libdns interfaces (github.com/libdns/libdns: RecordAppender and
// RecordDeleter), so a provider package that implements them can be
// added beside the one built in: RFC 2136 dynamic updates signed with
// TSIG (BIND, Knot, PowerDNS, Windows DNS...), over github.com/miekg/dns.
// It also waits until the zone's authoritative server answers the
// record, so the CA is not asked to validate before it can.
package dns01
