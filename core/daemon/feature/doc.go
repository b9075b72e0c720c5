// Package feature holds what the daemon's features share; each feature
// is a package below it (feature/images, ...), in the manner of
// Tailscale's feature/* packages.
//
// A feature owns one area of ployzd's Machine RPC: it declares the
// routes it serves (Routes, Streams) and the code behind them, and it
// reaches the rest of the daemon only through a small Host interface of
// its own, which core/daemon implements with an adapter over *Daemon.
// core/daemon registers each feature's routes at start-up; a feature
// never imports core/daemon, so the daemon type keeps lifecycle and
// wiring while the features keep their behaviour, and their tests, next
// to their routes.
package feature
