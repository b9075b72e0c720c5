// Package certificates is the daemon's certificates feature
// (docs/ingress.md): the operator's commands over the replicated
// certificates table, user certificates (add/list/remove_certificate,
// the private key sealed) and the DNS providers ACME's DNS-01 answers
// with (set/list/remove_dns_provider, the secrets sealed). Both kinds of
// row share one table, one Cluster-secret sealing and one remove shape
// (table.go); the ingress plugin reads the rows and opens what is sealed.
//
// It reaches the daemon through Host: the store, this Machine's ID (the
// rows' owner) and its data directory (the Cluster secret's home).
package certificates
