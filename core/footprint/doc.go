// Package footprint is the one list of what Ployz puts on a host: systemd
// units and unit files, binaries, its state, config and runtime
// directories, the WireGuard link, the iptables chains, the Docker bridge
// network, the Containers it manages and (user data) their volumes.
//
// `ployz machine uninstall` removes the list and the lab's leftover check
// probes the same list, so the two cannot drift apart: anything Ployz
// starts installing belongs here, with a probe that names it when present.
package footprint
