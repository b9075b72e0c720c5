package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/ployz/ployz/internal/fsutil"
)

// TrustedFileName is the trust list's file in ployzd's run directory
// (/run/ployz/trusted-machines.json); the specs of Internal DNS and the
// Ingress Proxy name it (trusted_machines_file).
const TrustedFileName = "trusted-machines.json"

// TrustedMachines is ployzd's verdict on the machines table, handed to
// the plugins on the Machine: plugins cannot check the rows' signatures
// (core/machine/trust), so ployzd lists, per Machine whose row it acts
// on, what serving bounds Container addresses with from that accepted
// row (the last accepted one while a newer row is refused). A Machine
// absent here has no row ployzd accepted. A stable format: fields are
// only added, readers ignore unknown ones.
type TrustedMachines struct {
	Machines map[string]TrustedMachine `json:"machines"`
}

// TrustedMachine is one accepted machines row, as serving uses it.
type TrustedMachine struct {
	// Subnet is the Machine's container subnet, e.g. "10.210.3.0/24".
	Subnet string `json:"subnet,omitempty"`
	// Phase is the row's phase; only Participating Machines vouch.
	Phase string `json:"phase,omitempty"`
}

// Subnets are the subnets of the participating Machines the list trusts
// (lowercase ids), the Machines.Trusted of a reader given this list.
func (t TrustedMachines) Subnets() map[string]netip.Prefix {
	out := make(map[string]netip.Prefix, len(t.Machines))
	for id, m := range t.Machines {
		if m.Phase != Participating {
			continue
		}
		if p, err := netip.ParsePrefix(m.Subnet); err == nil && p.Addr().Is4() {
			out[strings.ToLower(id)] = p.Masked()
		}
	}
	return out
}

// ReadTrusted reads the trust list at path; nil (not checked) when path
// is empty or no file is there: an older ployzd writes none, and until
// ployzd first writes it serving behaves as before the list existed. A
// file that does not parse is an error: its reader keeps what it serves.
func ReadTrusted(path string) (*TrustedMachines, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trusted machines: %w", err)
	}
	var t TrustedMachines
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("trusted machines %s: %w", path, err)
	}
	if t.Machines == nil {
		t.Machines = map[string]TrustedMachine{}
	}
	return &t, nil
}

// WriteTrusted replaces the trust list at path in one rename, mode 0600:
// only root (ployzd and the plugins) reads it.
func WriteTrusted(path string, t TrustedMachines) error {
	if t.Machines == nil {
		t.Machines = map[string]TrustedMachine{}
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("trusted machines: %w", err)
	}
	return nil
}

// TrustedPoll is how often a Watch looks at the trust list's file (one
// stat): a Machine ployzd has just accepted is served within it.
const TrustedPoll = 200 * time.Millisecond

// trustedFollower notices the trust list's file appearing, changing or
// going. ployzd replaces the file by rename, so its identity changes
// with every write.
type trustedFollower struct {
	path string
	last os.FileInfo
}

// followTrusted takes the file as it is now; run wakes on what differs.
func followTrusted(path string) *trustedFollower {
	f := &trustedFollower{path: path}
	f.last, _ = os.Stat(path)
	return f
}

// run calls wake whenever the file differs from when last seen, until
// ctx ends; a follower of no path does nothing. Where the kernel tells
// of changes to the file's directory (inotify) it sleeps until one comes
// (Internal DNS and the Ingress Proxy each woke five times a second at
// rest); otherwise, or once the directory is gone, it looks every
// TrustedPoll.
func (f *trustedFollower) run(ctx context.Context, wake func()) {
	if f.path == "" {
		return
	}
	if fsutil.FollowFile(ctx, f.path, func() { f.check(wake) }) {
		return
	}
	t := time.NewTicker(TrustedPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.check(wake)
	}
}

// check wakes when the file differs from when last seen.
func (f *trustedFollower) check(wake func()) {
	fi, _ := os.Stat(f.path)
	if !sameFile(f.last, fi) {
		f.last = fi
		wake()
	}
}

func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
