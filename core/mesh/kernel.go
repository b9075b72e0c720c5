package mesh

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// probeLink is the name of the throwaway link KernelAvailable creates.
const probeLink = "ployz-wgprobe"

// KernelAvailable reports whether this kernel runs WireGuard itself, so the
// daemon can own the interface (it outlives any process) instead of
// starting wireguard-go under its own unit: true when a kernel WireGuard
// link named name already exists, or a probe link can be created. An
// interface of another type under that name (a wireguard-go TUN) answers
// false, so a running userspace device is kept.
func KernelAvailable(name string) bool {
	nl, err := netlink.NewHandle()
	if err != nil {
		return false
	}
	defer nl.Close()
	if l, err := nl.LinkByName(name); err == nil {
		return l.Type() == "wireguard"
	}
	probe := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: probeLink}}
	if err := nl.LinkAdd(probe); err != nil {
		return false
	}
	nl.LinkDel(probe) // best effort: a leftover probe is harmless and replaced next time
	return true
}

// RemoveKernelLink deletes the kernel WireGuard interface name (a reset:
// unlike a wireguard-go device, it has no process whose end removes it).
// Any other link, or none, is left alone.
func RemoveKernelLink(name string) error {
	nl, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	defer nl.Close()
	l, err := nl.LinkByName(name)
	if err != nil || l.Type() != "wireguard" {
		return nil
	}
	if err := nl.LinkDel(l); err != nil {
		return fmt.Errorf("interface %s: delete: %w", name, err)
	}
	return nil
}
