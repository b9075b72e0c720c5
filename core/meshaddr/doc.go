// Package meshaddr is the mesh's address plan as pure functions: the
// Cluster network, one subnet per Machine, its gateway, and the management
// address derived from a WireGuard key. It imports nothing platform
// specific, so the CLI (which allocates subnets) builds on any OS while
// package mesh, which runs the WireGuard device, stays Linux-only.
package meshaddr
