package dockernet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// The membership last committed is saved so the rules come back at boot
// before dockerd restarts the Containers it kept (restart policies): a
// rebooted kernel holds no chains, and without them a Container meets an
// open network until ployzd has started and read the store.

// SavedFile is the saved membership's name in ployzd's data dir.
const SavedFile = "isolation.json"

// savedIsolation is the saved file's format. Subnet was added later (the
// boot restore needs it for the forwarding chain); a file without it
// restores only when ployzd starts.
type savedIsolation struct {
	Cluster  string              `json:"cluster"`
	Subnet   string              `json:"subnet,omitempty"`
	Networks map[string][]string `json:"networks"`
	Open     []string            `json:"open,omitempty"`
}

// SaveIsolation writes iso, enforced on a Machine of subnet, to path
// (0600, replaced atomically).
func SaveIsolation(path string, subnet netip.Prefix, iso Isolation) error {
	s := savedIsolation{Cluster: iso.Cluster.String(), Networks: map[string][]string{}}
	if subnet.IsValid() {
		s.Subnet = subnet.String()
	}
	for n, as := range iso.Networks {
		for _, a := range as {
			s.Networks[n] = append(s.Networks[n], a.String())
		}
	}
	for _, a := range iso.Open {
		s.Open = append(s.Open, a.String())
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadIsolation reads what SaveIsolation wrote; subnet is invalid when the
// file predates it. An error names the field at fault.
func LoadIsolation(path string) (iso Isolation, subnet netip.Prefix, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return iso, subnet, err
	}
	var s savedIsolation
	if err := json.Unmarshal(b, &s); err != nil {
		return iso, subnet, fmt.Errorf("%s: %w", path, err)
	}
	if iso.Cluster, err = netip.ParsePrefix(s.Cluster); err != nil {
		return iso, subnet, fmt.Errorf("%s: field \"cluster\": %w", path, err)
	}
	if s.Subnet != "" {
		if subnet, err = netip.ParsePrefix(s.Subnet); err != nil {
			return iso, subnet, fmt.Errorf("%s: field \"subnet\": %w", path, err)
		}
	}
	if iso.Open, err = parseAddrs(s.Open); err != nil {
		return iso, subnet, fmt.Errorf("%s: field \"open\": %w", path, err)
	}
	iso.Networks = map[string][]netip.Addr{}
	for n, as := range s.Networks {
		if iso.Networks[n], err = parseAddrs(as); err != nil {
			return iso, subnet, fmt.Errorf("%s: field \"networks.%s\": %w", path, n, err)
		}
	}
	return iso, subnet, nil
}

func parseAddrs(ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// ErrNoSavedSubnet is returned when the saved file predates the boot restore.
var ErrNoSavedSubnet = errors.New("the saved isolation names no subnet (written by an older ployzd): ployzd restores it when it starts")

// RestoreSaved puts the forwarding and isolation chains back from the file
// at path, before dockerd has started (the Docker unit's drop-in runs it;
// BootDropIn). cfg gives the names (chain prefix, interfaces; defaults
// otherwise) and logger; the subnet and the Cluster network come from the
// file. It creates DOCKER-USER and FORWARD's jump to it itself, as dockerd
// would, so the rules sit where dockerd's own FORWARD rules send every
// packet first; dockerd keeps an existing DOCKER-USER as it is.
func RestoreSaved(cfg Config, path string) error {
	iso, subnet, err := LoadIsolation(path)
	if err != nil {
		return err
	}
	if !subnet.IsValid() {
		return ErrNoSavedSubnet
	}
	cfg.Subnet, cfg.ClusterNetwork = subnet, iso.Cluster
	if _, err := iptables("-t", "filter", "-S", "DOCKER-USER"); err != nil {
		if _, err := iptables("-t", "filter", "-N", "DOCKER-USER"); err != nil {
			return fmt.Errorf("iptables filter DOCKER-USER: create: %w", err)
		}
	}
	// And jump to it first from FORWARD, as dockerd does (it replaces this
	// jump with its own at start), so a dockerd that manages no iptables
	// leaves the chains reachable rather than orphaned.
	if err := jumpFirst("filter", "FORWARD", "DOCKER-USER"); err != nil {
		return fmt.Errorf("iptables filter FORWARD: jump to DOCKER-USER: %w", err)
	}
	if err := EnsureForwarding(cfg); err != nil {
		return fmt.Errorf("forwarding: %w", err)
	}
	if err := EnsureIsolation(cfg, iso); err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	return nil
}

// BootDropIn is the Docker unit's drop-in (under DropInPath) that runs the
// restore before every dockerd start. "-": a failure (no saved file yet,
// ployzd uninstalled) lets Docker start as before, and ployzd restores
// the rules again when it starts.
const BootDropIn = `# Written by ployzd (docs/security.md, "Namespace isolation"): before
# dockerd restarts the Containers it kept, put back the namespace isolation
# ployzd last committed, so no Container meets an open network at boot.
[Service]
ExecStartPre=-/usr/local/bin/ployzd isolation restore
`

// DropInPath is BootDropIn's path under a systemd unit directory.
const DropInPath = "docker.service.d/ployz-isolation.conf"

// EnsureBootDropIn writes BootDropIn under unitDir unless it is there
// already; changed says systemd must reload to see it.
func EnsureBootDropIn(unitDir string) (changed bool, err error) {
	p := filepath.Join(unitDir, DropInPath)
	if b, err := os.ReadFile(p); err == nil && string(b) == BootDropIn {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(BootDropIn), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, p)
}
