//go:build linux

package main

import (
	"context"
	"fmt"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// operatorHostKeys is the operator's pin file, the one `ployz` checks.
func operatorHostKeys() rpc.HostKeys { return rpc.HostKeys{Path: operator.KnownHostsPath()} }

// pinHostKeys pins each new lab Machine's host keys, read through Docker,
// in the operator's known_hosts. A lab re-created at the same addresses
// gets new keys; without this the operator's first `machine init` would
// be refused as a possible attacker (the refusal stays for real servers).
func pinHostKeys(ctx context.Context, l *lab.Lab, logf func(string, ...any)) error {
	hk := operatorHostKeys()
	for _, m := range l.Machines {
		keys, err := l.HostKeys(ctx, m.Name)
		if err != nil {
			return err
		}
		if err := hk.Pin(m.IP.String(), keys...); err != nil {
			return fmt.Errorf("pin the host keys of %s: %w", m.Name, err)
		}
	}
	logf("lab: pinned the SSH host keys of %d Machines in %s", len(l.Machines), hk.Path)
	return nil
}

// forgetHostKeys drops the pins of the lab Machines being removed, and
// only those.
func forgetHostKeys(l *lab.Lab) error {
	hk := operatorHostKeys()
	if err := hk.Forget(l.Addrs()...); err != nil {
		return fmt.Errorf("forget the host keys of lab %s: %w", l.Name, err)
	}
	return nil
}
