// Package mesh runs the Machine's WireGuard mesh: the `ployz-wg` interface, its
// peers (one per other Machine), the routes to their subnets and management
// addresses, and endpoint rotation with a locally remembered choice per peer.
//
// Kernel WireGuard is used when the kernel can create a `wireguard` link;
// otherwise the package runs wireguard-go on a TUN device inside the calling
// process and exposes its UAPI socket under /var/run/wireguard/<iface>.sock,
// so `wg show` and wgctrl work the same on both paths.
//
// Daemon restart: a kernel device outlives the daemon and Up adopts it
// (reconfiguring key, port and addresses in place). A userspace device lives
// inside the daemon process: when the process exits, the TUN device, its
// addresses and routes vanish and the mesh is down until the next Up, which
// recreates it from scratch (a stale UAPI socket file is replaced). Peers must
// then be set again with SetPeers; remembered endpoints make the first
// handshake go to the last endpoint that worked.
//
// The package is Machine-local (docs/architecture.md bet 6): it configures only this
// Machine's interface from the peer list it is given and never decides
// anything about another Machine.
package mesh
