// Package leases is the daemon's lease feature (docs/leases.md): the
// Machine RPC through which an operator's command holds a scope
// (acquire, renew, release and list_leases) in the replicated leases
// table. This Machine is the entry: it serializes its own grants and,
// after writing one, waits for a concurrent grant through another entry
// to settle (Settle) before it re-reads who won. The jobs Scheduler
// settles its claims the same way.
//
// It reaches the daemon through feature.StoreHost only.
package leases
