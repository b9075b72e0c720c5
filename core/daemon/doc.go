// Package daemon is ployzd's Machine daemon: it owns the local Machine
// record and phase, brings up the mesh, keeps the store's own systemd unit
// running, publishes this Machine's observations and serves Machine RPC.
// It decides only from this Machine's own facts (docs/architecture.md bet 6); every
// multi-Machine sequence is driven by the CLI.
//
// Layout: the Daemon type keeps lifecycle and wiring. An area of Machine
// RPC that needs little of it lives in a feature package under
// core/daemon/feature/<name> (feature/images, feature/history,
// feature/savedstate, feature/allocations), in the manner of Tailscale's
// feature/* packages: the feature declares a small Host interface,
// returns its routes and owns its tests; features.go implements every
// Host with one adapter over *Daemon (featureHost, so the hosts' methods
// do not pile onto Daemon) and registers the routes. A feature never
// imports this package.
package daemon
