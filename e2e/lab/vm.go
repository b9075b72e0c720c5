package lab

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// VM labs: each Machine is a QEMU TCG virtual machine (nested KVM does not
// run on the hosts this targets) with its own Debian kernel, so kernel
// WireGuard and ZFS are real. The VMs sit on a host bridge through tap
// devices; the lab's state is a directory under vmRoot()/labs/<name>.

// Lab networks for VMs come from 10.252.0.0/16, one /24 each, the bridge
// holding .1 and Machine i .10+i.
const vmPool = "10.252.%d.0/24"

// vmLab is what a VM lab records in its directory (lab.json).
type vmLab struct {
	Lab    *Lab         `json:"lab"`
	Image  vmImage      `json:"image"`
	Bridge string       `json:"bridge"`
	Subnet netip.Prefix `json:"subnet"`
	Key    string       `json:"key"` // authorized_keys line, passed on the kernel command line
}

func vmLabDir(name string) string { return filepath.Join(vmRoot(), "labs", name) }

// upVM is Up for VM Machines.
func upVM(ctx context.Context, o Options) (l *Lab, err error) {
	img, err := BuildVMImage(ctx, o.BinDir, o.Logf)
	if err != nil {
		return nil, err
	}
	pub, err := ensureKey(o.StateDir)
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(pub)
	if err != nil {
		return nil, err
	}
	l = &Lab{Name: o.Name, StateDir: o.StateDir, VM: true}
	defer func() {
		if err != nil {
			Remove(context.WithoutCancel(ctx), l.Name) // the first error is the one to report
		}
	}()
	v := &vmLab{Lab: l, Image: img, Key: strings.TrimSpace(string(key))}
	if err := os.MkdirAll(vmLabDir(l.Name), 0o700); err != nil {
		return l, err
	}
	err = v.createNetwork(ctx)
	if serr := v.save(); err == nil {
		err = serr
	}
	if err != nil {
		return l, err
	}
	l.Network = v.Bridge
	for i := 1; i <= o.Machines; i++ {
		m := &Machine{Name: "m" + strconv.Itoa(i), Container: fmt.Sprintf("%s-m%d", l.Name, i), IP: nthAddr(v.Subnet, 10+i)}
		l.Machines = append(l.Machines, m)
		err = v.createDisks(ctx, m)
		if serr := v.save(); err == nil {
			err = serr
		}
		if err != nil {
			return l, err
		}
	}
	o.Logf("lab: booting %d VM Machines on %s (%s)", o.Machines, v.Bridge, v.Subnet)
	for _, m := range l.Machines {
		if err := v.boot(ctx, m); err != nil {
			return l, err
		}
	}
	for _, m := range l.Machines {
		if err := l.WaitBooted(ctx, m.Name, 15*time.Minute); err != nil {
			return l, err
		}
		// The Machine's ZFS pool, on its second disk; it is imported again
		// at every boot from the cache file. The module is loaded first: on
		// a loaded host the boot's own load may not have happened yet (a
		// run once failed here with "The ZFS modules are not loaded").
		if out, err := l.Exec(ctx, m.Name, "modprobe", "zfs"); err != nil {
			return l, fmt.Errorf("%s: modprobe zfs: %w: %s", m.Name, err, out)
		}
		if _, err := l.Exec(ctx, m.Name, "zpool", "create", "-f", "-m", "none", "ployz", "/dev/vdb"); err != nil {
			return l, err
		}
		o.Logf("lab: %s is up at %s", m.Name, m.IP)
	}
	return l, nil
}

func (v *vmLab) save() error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(vmLabDir(v.Lab.Name), "lab.json"), b, 0o600)
}

// openVM reads a VM lab's record; nil when name is no VM lab.
func openVM(name string) (*vmLab, error) {
	b, err := os.ReadFile(filepath.Join(vmLabDir(name), "lab.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v vmLab
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("lab %s record: %w", name, err)
	}
	for _, m := range v.Lab.Machines {
		m.State = "exited"
		if v.pid(m) > 0 {
			m.State = "running"
		}
	}
	return &v, nil
}

// createNetwork makes the lab's bridge on the first free /24 (starting at
// one derived from the name) and lets bridged traffic through the host's
// FORWARD chain, whose policy Docker sets to DROP.
func (v *vmLab) createNetwork(ctx context.Context) error {
	h := fnv.New32a()
	h.Write([]byte(v.Lab.Name))
	v.Bridge = fmt.Sprintf("plzb%08x", h.Sum32())[:12]
	routes, _ := exec.CommandContext(ctx, "ip", "-4", "route").Output()
	start := int(h.Sum32() % 250)
	for i := range 250 {
		p := netip.MustParsePrefix(fmt.Sprintf(vmPool, 1+(start+i)%250))
		if !strings.Contains(string(routes), p.String()) {
			v.Subnet = p
			break
		}
	}
	if !v.Subnet.IsValid() {
		return errors.New("lab network: no free /24 in 10.252.0.0/16")
	}
	gw := netip.PrefixFrom(nthAddr(v.Subnet, 1), 24).String()
	for _, c := range [][]string{
		{"ip", "link", "add", v.Bridge, "type", "bridge"},
		{"ip", "addr", "add", gw, "dev", v.Bridge},
		{"ip", "link", "set", v.Bridge, "up"},
		{"iptables", "-w", "-I", "FORWARD", "-i", v.Bridge, "-o", v.Bridge, "-m", "comment", "--comment", "ployz-labvm-" + v.Lab.Name, "-j", "ACCEPT"},
	} {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("lab network: %w", err)
		}
	}
	return nil
}

func (v *vmLab) tap(m *Machine) string { return v.Bridge + m.Name }

func (v *vmLab) file(m *Machine, suffix string) string {
	return filepath.Join(vmLabDir(v.Lab.Name), m.Name+suffix)
}

// createDisks gives m a copy-on-write root disk over the image and an
// empty disk for its ZFS pool, and its tap device on the bridge.
func (v *vmLab) createDisks(ctx context.Context, m *Machine) error {
	if err := run(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", v.Image.Rootfs, v.file(m, ".qcow2")); err != nil {
		return fmt.Errorf("machine %s disk: %w", m.Name, err)
	}
	if err := run(ctx, "truncate", "-s", "2G", v.file(m, "-zfs.img")); err != nil {
		return fmt.Errorf("machine %s zfs disk: %w", m.Name, err)
	}
	for _, c := range [][]string{
		{"ip", "tuntap", "add", "dev", v.tap(m), "mode", "tap"},
		{"ip", "link", "set", v.tap(m), "master", v.Bridge, "up"},
	} {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("machine %s network: %w", m.Name, err)
		}
	}
	return nil
}

// boot starts m's QEMU process (daemonized, niced: TCG is CPU-heavy).
func (v *vmLab) boot(ctx context.Context, m *Machine) error {
	n, _ := strconv.Atoi(strings.TrimPrefix(m.Name, "m"))
	cmdline := strings.Join([]string{
		"root=/dev/vda", "rw", "console=ttyS0", "net.ifnames=0", "panic=-1",
		"ployz.addr=" + netip.PrefixFrom(m.IP, v.Subnet.Bits()).String(), "ployz.gw=" + nthAddr(v.Subnet, 1).String(),
		"systemd.hostname=" + m.Name,
		"ployz.authkey=" + base64.StdEncoding.EncodeToString([]byte(v.Key)),
	}, " ")
	args := []string{"-n", "5", "qemu-system-x86_64",
		"-name", m.Container, "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "1024",
		"-display", "none", "-nodefaults", "-no-reboot",
		"-serial", "file:" + v.file(m, "-console.log"),
		"-kernel", v.Image.Kernel, "-initrd", v.Image.Initrd, "-append", cmdline,
		"-drive", "file=" + v.file(m, ".qcow2") + ",if=virtio,format=qcow2",
		"-drive", "file=" + v.file(m, "-zfs.img") + ",if=virtio,format=raw",
		"-netdev", "tap,id=n0,ifname=" + v.tap(m) + ",script=no,downscript=no",
		"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:%02x:%02x:%02x", v.Subnet.Addr().As4()[2], 0, n),
		"-device", "virtio-rng-pci",
		"-pidfile", v.file(m, ".pid"), "-daemonize",
	}
	if err := run(ctx, "nice", args...); err != nil {
		return fmt.Errorf("machine %s: qemu: %w", m.Name, err)
	}
	return nil
}

// pid returns m's running QEMU process, or 0.
func (v *vmLab) pid(m *Machine) int {
	b, err := os.ReadFile(v.file(m, ".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// powerOff shuts m down from inside (a clean poweroff, as an operator
// would) and waits for QEMU to exit; a VM that does not stop in time is
// killed, as pulling the plug would.
func (v *vmLab) powerOff(ctx context.Context, m *Machine) error {
	pid := v.pid(m)
	if pid == 0 {
		return nil
	}
	v.Lab.SSH(ctx, m.Name, "systemctl poweroff --no-block") // the connection drops as it powers off
	deadline := time.Now().Add(2 * time.Minute)
	for v.pid(m) != 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if v.pid(m) != 0 {
		syscall.Kill(pid, syscall.SIGKILL) // best effort; the wait below reports
		time.Sleep(time.Second)
		return fmt.Errorf("machine %s did not power off within 2m; killed", m.Name)
	}
	return nil
}

// removeVM kills a VM lab's QEMU processes and removes its taps, bridge,
// forward rule and directory. It is a no-op for a name with no VM lab.
func removeVM(ctx context.Context, name string) error {
	v, err := openVM(name)
	if v == nil {
		return err
	}
	for _, m := range v.Lab.Machines {
		if pid := v.pid(m); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL) // gone already is fine
			for i := 0; i < 50 && v.pid(m) != 0; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		run(ctx, "ip", "link", "del", v.tap(m)) // may not exist yet
	}
	var errs []error
	if v.Bridge != "" {
		run(ctx, "ip", "link", "del", v.Bridge) // may not exist yet
		for run(ctx, "iptables", "-w", "-D", "FORWARD", "-i", v.Bridge, "-o", v.Bridge, "-m", "comment", "--comment", "ployz-labvm-"+name, "-j", "ACCEPT") == nil {
		}
	}
	if err := os.RemoveAll(vmLabDir(name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// vmNames lists the VM labs on this host.
func vmNames() []string {
	entries, _ := os.ReadDir(filepath.Join(vmRoot(), "labs"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
