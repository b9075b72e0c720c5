// Package fakehost is a host for tests of the footprint's uninstall: it
// answers each footprint item's probe and removal as a host over SSH
// would, from a map of what is present.
package fakehost

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/ployz/ployz/core/footprint"
)

// Host is a fake host. Present maps an item's name to what its probe
// prints; Refuse makes an item's removal fail and leave it; Down fails
// every command, as a lost SSH connection does.
type Host struct {
	mu      sync.Mutex
	Present map[string][]string
	Refuse  map[string]bool
	Down    bool
	// Ran lists the items whose removal ran, in order.
	Ran []string
}

// Installed is a host with every footprint item present.
func Installed() *Host {
	h := Bare()
	for _, it := range footprint.Items() {
		h.Present[it.Name] = []string{"x-" + it.Name}
	}
	return h
}

// Bare is a host without Ployz.
func Bare() *Host { return &Host{Present: map[string][]string{}, Refuse: map[string]bool{}} }

// Shell runs cmd, which must be one of the footprint's probes or removals.
func (h *Host) Shell(_ context.Context, cmd string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Down {
		return "", errors.New("ssh: connection lost")
	}
	for _, it := range footprint.Items() {
		switch cmd {
		case it.Probe:
			return strings.Join(h.Present[it.Name], "\n"), nil
		case it.Remove:
			h.Ran = append(h.Ran, it.Name)
			if h.Refuse[it.Name] {
				return "permission denied", errors.New("exit status 1")
			}
			delete(h.Present, it.Name)
			return "", nil
		}
	}
	return "", errors.New("not a footprint command: " + cmd)
}
