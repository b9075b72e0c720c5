// Package volumes is the client side of Provisioned Volumes: it asks every
// Machine (through an Entry Machine) for its volumes, naming each Machine
// that did not answer or has no ZFS pool, and finds the Containers that
// bind-mount a volume. `ployz volume` and the dashboard's Volumes page read
// one list here, so both say the same thing.
//
// The volume plugins' contract is sdk/volume; this package only speaks
// Machine RPC (core/rpc).
package volumes
