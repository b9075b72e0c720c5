// Package observe is the client side of the Observe Store: it asks every
// Machine (through an Entry Machine) for its stored log lines or metrics
// and merges the answers, naming each Machine that could not answer. The
// CLI's `ployz logs`, `ployz metrics` and `ployz top` use it, and so can
// any other view (the dashboard). A Machine whose ployzd predates the Log
// Store, or whose logstore plugin is not serving, is named with the
// capability it lacks (ployzd's Docker-direct log routes are retired).
//
// The plugins' own contract is sdk/observe; this package only speaks
// Machine RPC (core/rpc).
package observe
