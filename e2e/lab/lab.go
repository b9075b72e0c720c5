// Package lab runs several real Machines on one host for tests and demos.
//
// A lab is a private Docker network plus N containers built from the lab
// Machine image (Debian 13 by default, or Debian 12 — see OS — with systemd
// as PID 1, its own dockerd and sshd, and the project's binaries). Everything a lab creates carries the
// Docker label ployz.lab=<name>, which is the lab's only state besides its
// SSH key: Open finds a lab again from Docker alone, and Down removes
// exactly what the label names.
package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Docker labels that mark what belongs to a lab.
const (
	labelLab     = "ployz.lab"
	labelMachine = "ployz.lab.machine"
)

// Lab is a running set of lab Machines on one Docker network.
type Lab struct {
	Name     string     `json:"name"`      // lab name; prefixes every container and the network
	Network  string     `json:"network"`   // Docker network name
	Machines []*Machine `json:"machines"`  // in name order: m1, m2, ...
	StateDir string     `json:"state_dir"` // holds the lab's SSH key
	// VM is set when the Machines are QEMU virtual machines (see vm.go)
	// rather than containers; every method works the same on both.
	VM bool `json:"vm,omitempty"`
}

// Machine is one lab Machine container.
type Machine struct {
	Name      string     `json:"name"`      // short name: m1, m2, ...
	Container string     `json:"container"` // Docker container name: <lab>-<name>
	IP        netip.Addr `json:"ip"`        // address on the lab network
	State     string     `json:"state"`     // Docker's container state when the lab was opened
}

// Options configures Up.
type Options struct {
	Name     string // lab name; default "ployz-lab"
	Machines int    // number of Machines; default 3
	BinDir   string // directory holding freshly built binaries (make build)
	// OS is the Machines' Debian release; default DefaultOS.
	OS OS
	// StateDir holds the lab's SSH key; default $XDG_STATE_HOME/ployz/lab/<name>.
	StateDir string
	// Logf receives progress lines; default discards them.
	Logf func(format string, args ...any)
	// VM runs each Machine as a QEMU virtual machine with its own kernel
	// (kernel WireGuard, ZFS) instead of a container; OS must be VMOS.
	VM bool
	// Bare starts Machines without Ployz (no binaries, no units): the
	// Debian base with Docker, for tests that install Ployz as a user
	// would. BinDir is not read.
	Bare bool
}

// DefaultName is the lab `ployz lab` uses when none is named.
const DefaultName = "ployz-lab"

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if !validName(o.Name) {
		return fmt.Errorf("lab name %q: use lowercase letters, digits and '-', starting with a letter", o.Name)
	}
	if o.Machines == 0 {
		o.Machines = 3
	}
	if o.Machines < 1 || o.Machines > 50 {
		return fmt.Errorf("machines: %d is outside 1..50", o.Machines)
	}
	if o.OS == "" {
		o.OS = DefaultOS
		if o.VM {
			o.OS = VMOS
		}
	}
	if o.VM && o.OS != VMOS {
		return fmt.Errorf("os %q: VM Machines run %s only (its kernel and zfs-dkms)", o.OS, VMOS)
	}
	if _, err := o.OS.suite(); err != nil {
		return err
	}
	if o.BinDir == "" {
		return errors.New("bin dir: not set (the directory `make build` writes, usually ./bin)")
	}
	if o.StateDir == "" {
		o.StateDir = stateDir(o.Name)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 40 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func stateDir(name string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "ployz", "lab", name)
}

// Up builds the Machine image when needed, then creates the lab's network
// and starts its Machines, and waits until each has booted: systemd
// running and its dockerd answering. A lab of that name must not exist.
// On failure everything created so far is removed.
func Up(ctx context.Context, o Options) (l *Lab, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if existing, _ := Open(ctx, o.Name); existing != nil {
		return nil, fmt.Errorf("lab %q already exists with %d Machines; run `ployz lab down --name %s` first", o.Name, len(existing.Machines), o.Name)
	}
	if o.VM {
		return upVM(ctx, o)
	}
	build := func() (string, error) { return BuildMachineImageFor(ctx, o.OS, o.BinDir, o.Logf) }
	if o.Bare {
		build = func() (string, error) { return BuildBareImageFor(ctx, o.OS, o.Logf) }
	}
	image, err := build()
	if err != nil {
		return nil, err
	}
	key, err := ensureKey(o.StateDir)
	if err != nil {
		return nil, err
	}
	l = &Lab{Name: o.Name, Network: o.Name + "-net", StateDir: o.StateDir}
	defer func() {
		if err != nil {
			l.Down(context.WithoutCancel(ctx)) // the first error is the one to report
		}
	}()
	subnet, err := createNetwork(ctx, l.Name, l.Network)
	if err != nil {
		return l, err
	}
	o.Logf("lab: starting %d %s Machines on %s (%s)", o.Machines, o.OS, l.Network, subnet)
	for i := 1; i <= o.Machines; i++ {
		m := &Machine{
			Name:      "m" + strconv.Itoa(i),
			Container: fmt.Sprintf("%s-m%d", l.Name, i),
			IP:        nthAddr(subnet, 10+i),
		}
		if err := runMachine(ctx, l, m, image, key); err != nil {
			return l, err
		}
		l.Machines = append(l.Machines, m)
	}
	for _, m := range l.Machines {
		if err := l.WaitBooted(ctx, m.Name, 3*time.Minute); err != nil {
			return l, err
		}
		o.Logf("lab: %s is up at %s", m.Name, m.IP)
	}
	return l, nil
}

func runMachine(ctx context.Context, l *Lab, m *Machine, image, pubKeyPath string) error {
	_, err := docker(ctx, "run", "-d",
		"--name", m.Container, "--hostname", m.Name,
		"--label", labelLab+"="+l.Name, "--label", labelMachine+"="+m.Name,
		"--network", l.Network, "--ip", m.IP.String(),
		// The flags docs/architecture.md ("The lab") lists for systemd + dockerd
		// inside a container on these hosts; --privileged is refused here.
		"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--device", "/dev/net/tun",
		// /proc/sys is read-only in a container: what a real server's
		// daemon would set itself (IPv6 on new links for the management
		// address, forwarding for the mesh) is set at creation instead.
		"--sysctl", "net.ipv6.conf.all.disable_ipv6=0",
		"--sysctl", "net.ipv6.conf.default.disable_ipv6=0",
		"--sysctl", "net.ipv4.ip_forward=1",
		"--sysctl", "net.ipv6.conf.all.forwarding=1",
		"-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
		"--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
		"-e", "container=docker", "--stop-signal", "SIGRTMIN+3",
		// The inner dockerd needs a real filesystem under overlay2.
		"-v", "/var/lib/docker",
		"-v", pubKeyPath+":/root/.ssh/authorized_keys:ro",
		image)
	if err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return nil
}

// Open finds a running or stopped lab by name from its Docker labels.
func Open(ctx context.Context, name string) (*Lab, error) {
	if name == "" {
		name = DefaultName
	}
	if v, err := openVM(name); v != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return v.Lab, nil
	}
	out, err := docker(ctx, "ps", "-a", "--filter", "label="+labelLab+"="+name,
		"--format", `{{.Names}} {{.Label "`+labelMachine+`"}} {{.State}}`)
	if err != nil {
		return nil, err
	}
	l := &Lab{Name: name, Network: name + "-net", StateDir: stateDir(name)}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		ip, _ := docker(ctx, "inspect", "--format", `{{(index .NetworkSettings.Networks "`+l.Network+`").IPAddress}}`, f[0])
		if ip == "" || ip == "<no value>" {
			// A stopped container keeps its static address in its config.
			ip, _ = docker(ctx, "inspect", "--format", `{{(index .NetworkSettings.Networks "`+l.Network+`").IPAMConfig.IPv4Address}}`, f[0])
		}
		addr, _ := netip.ParseAddr(ip)
		l.Machines = append(l.Machines, &Machine{Name: f[1], Container: f[0], IP: addr, State: f[2]})
	}
	if len(l.Machines) == 0 {
		return nil, fmt.Errorf("lab %q: no Machines found (start one with `ployz lab up`)", name)
	}
	slices.SortFunc(l.Machines, func(a, b *Machine) int {
		ai, _ := strconv.Atoi(strings.TrimPrefix(a.Name, "m"))
		bi, _ := strconv.Atoi(strings.TrimPrefix(b.Name, "m"))
		return ai - bi
	})
	return l, nil
}

// Machine returns the Machine named name, or an error listing valid names.
func (l *Lab) Machine(name string) (*Machine, error) {
	names := make([]string, 0, len(l.Machines))
	for _, m := range l.Machines {
		if m.Name == name || m.Container == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return nil, fmt.Errorf("machine %q is not in lab %q (valid: %s)", name, l.Name, strings.Join(names, ", "))
}

// Down removes the lab's containers (with their Docker volumes) and its
// network. It removes by label, so it also clears what a crashed run left.
func (l *Lab) Down(ctx context.Context) error {
	return Remove(ctx, l.Name)
}

// Remove deletes every container and network labelled with lab name.
func Remove(ctx context.Context, name string) error {
	var errs []error
	if err := removeVM(ctx, name); err != nil {
		errs = append(errs, err)
	}
	ids, err := docker(ctx, "ps", "-aq", "--filter", "label="+labelLab+"="+name)
	if err != nil {
		errs = append(errs, err)
	}
	if ids := strings.Fields(ids); len(ids) > 0 {
		if _, err := docker(ctx, append([]string{"rm", "-f", "-v"}, ids...)...); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	nets, err := docker(ctx, "network", "ls", "-q", "--filter", "label="+labelLab+"="+name)
	if err != nil {
		errs = append(errs, err)
	}
	if nets := strings.Fields(nets); len(nets) > 0 {
		if _, err := docker(ctx, append([]string{"network", "rm"}, nets...)...); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gone reports whether a removal failed only because another cleanup of
// the same lab (its own test's, a concurrent sweep) got there first.
func gone(err error) bool {
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.Contains(l, "No such") || strings.Contains(l, "already in progress") || strings.Contains(l, "exit status 1") && !strings.Contains(l, "Error") {
			continue
		}
		if !strings.Contains(l, "No such") && !strings.Contains(l, "already in progress") {
			return false
		}
	}
	return true
}

// Names lists the labs that have containers on this host.
func Names(ctx context.Context) ([]string, error) {
	out, err := docker(ctx, "ps", "-a", "--filter", "label="+labelLab, "--format", `{{.Label "`+labelLab+`"}}`)
	if err != nil {
		return nil, err
	}
	names := vmNames()
	for _, n := range strings.Fields(out) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}
