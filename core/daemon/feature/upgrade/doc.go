// Package upgrade is the daemon's upgrade feature (docs/upgrades.md):
// upgrade_machine and upgrade_plugin receive a release bundle, check its
// digest and its signature by a release key this ployzd was built with,
// unpack it under DataDir/releases and start the swap in a transient
// unit of its own (it restarts ployzd, so it cannot run inside it);
// upgrade_status reads what the last swap did. The swap itself (Apply,
// `ployzd upgrade apply`) moves one unit at a time onto the new release,
// health-checking each step, and puts the Machine back on a failed one;
// a one-plugin upgrade swaps only that plugin's binary through an
// override link (plugin.go, BundledSources).
//
// It reaches the daemon through Host: its data directory and its Machine
// RPC socket, which the swap checks ployzd on.
package upgrade
