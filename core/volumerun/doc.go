// Package volumerun is the library of Provisioned Volumes and Volume
// Runs, shared by the operator library (client/, the ployz CLI) and
// ployzd's scheduled Sync (core/daemon/feature/volumes), so both take
// the same steps under the same lease and safety rules (the design: Volume Runs, Volume handover): Mirror, Sync,
// Move, Release, Restore and Delete Mirror, and the plain volume commands
// a run is built from (create, inspect, send, receive, locate).
//
// A Runner is given everything it uses: the Entry Machine's RPC client,
// through which the Cluster numbers runs (their gen, above every gen of
// the volume and every floor a Machine reports) and records each step
// (book.go), the operator store that does so against an older entry, the
// operator context, and the registry credentials a Move's pulls need.
// It never prints and never prompts: each run returns the recorded run (or why none was needed) and
// a typed error (*rpc.Error naming the field at fault), and streams its
// progress as Events to a callback. A data-loss step is taken only when
// the caller says so (Force in the options): a CLI asks its user, a CI
// job passes it.
//
// Error texts name the ployz CLI's arguments (NAME, --to, --force) and
// commands: they are the messages `ployz volume` prints.
package volumerun
