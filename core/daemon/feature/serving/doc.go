// Package serving is the daemon's serving feature: the data-plane
// plugins whose configuration ployzd derives from the Machine record
// (Internal DNS, the Ingress Proxy, and the Observe and volume plugins
// whose specs other features write), and the Serving Pointers that say
// which Containers serve each Service.
//
// It keeps each serving plugin configured while this Machine
// participates (Keep), withdraws one the Machine does not accept, stops
// them on reset (Stop) and retires the runtime units earlier ployzd
// versions wrote for DNS and ingress. Its Machine RPC is ingress_status,
// move_serving_pointer and read_serving_status. Like every feature it
// reaches the daemon only through its Host interface and never imports
// core/daemon.
package serving
