// Package fdstore keeps listening sockets in systemd's file descriptor
// store, so a serving process can restart (a crash, an upgrade onto new
// software) while the kernel queues what arrives instead of refusing it,
// and no other local user can bind the port in between. Internal DNS and
// the Ingress Proxy park their sockets here and hand them to a successor
// (sdk.DataPlane.Sockets); ployzd's Machine RPC and volume transport, the
// store's gossip and the metrics endpoint take theirs with ListenTCP and
// ListenUDP.
//
// A unit that uses it needs NotifyAccess=main (or notify's implicit main)
// and a FileDescriptorStoreMax= large enough for its sockets. Outside
// systemd (no NOTIFY_SOCKET) parking is a no-op and ListenTCP and
// ListenUDP listen plainly.
package fdstore
