// Package leasehold holds a lease scope (docs/leases.md) through an
// Entry Machine's acquire_lease, renew_lease and release_lease: it is
// what the operator library's Session.Hold and ployzd's scheduled
// Volume Runs share, so a run an operator starts and one a Machine
// starts take the same lease the same way and never interleave.
package leasehold
