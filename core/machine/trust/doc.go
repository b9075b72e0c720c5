// Package trust decides which machines rows a Machine acts on.
//
// The store replicates whatever a member writes, and a changeset's origin
// is only claimed, so the check is made on the rows themselves: every
// Machine signs its own row with its RPC identity key (rpc_key), the entry
// Machine endorses a joiner's keys when it enrolls it, and each Machine
// keeps the keys it trusts in a local pin file. A row whose signature does
// not verify against the key already trusted for its Machine is refused:
// consumers (WireGuard peers, RPC authentication) keep acting on the last
// row they accepted for it. docs/security.md describes the design.
package trust
