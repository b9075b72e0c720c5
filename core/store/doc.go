// Package store holds the replicated tables that only ployzd and the
// operator library use — the Cluster facts, Volumes, history, leases,
// Volume Runs, allocations, removals, Saved State revisions and deploy
// records — as typed tables on the SDK's store client (sdk/store, which
// also holds the tables a plugin reads), the Cluster secret's file on a
// Machine, and the sealing of a row's field.
//
// Below it: core/store/schema (the schema files), core/store/server (a
// store node), core/store/crdt and core/store/gossip (its engine and
// membership), core/store/storetest (a real node for tests).
package store
