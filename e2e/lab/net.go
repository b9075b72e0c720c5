package lab

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// Lab networks come from 10.251.0.0/16, one /24 each: clear of the mesh's
// 10.210.0.0/16 and of the 172.16/12 pools the Machines' own dockerd uses.
const labPool = "10.251.%d.0/24"

// createNetwork creates the lab's bridge network on the first free /24,
// starting at one derived from the lab name so parallel labs rarely race.
func createNetwork(ctx context.Context, lab, name string) (netip.Prefix, error) {
	h := fnv.New32a()
	h.Write([]byte(lab))
	start := int(h.Sum32() % 250)
	var lastErr error
	for i := range 250 {
		subnet := netip.MustParsePrefix(fmt.Sprintf(labPool, 1+(start+i)%250))
		_, err := docker(ctx, "network", "create", "--driver", "bridge",
			"--subnet", subnet.String(), "--label", labelLab+"="+lab, name)
		if err == nil {
			return subnet, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlap") {
			return netip.Prefix{}, fmt.Errorf("lab network: %w", err)
		}
	}
	return netip.Prefix{}, fmt.Errorf("lab network: no free /24 in 10.251.0.0/16: %w", lastErr)
}

func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Addr().As4()
	a[3] = byte(n)
	return netip.AddrFrom4(a)
}

// partitionRules drop every packet that enters or leaves the Machine on its
// lab interface, including what its own containers route out. The comment
// marks them so Heal removes exactly these.
var partitionRules = [][]string{
	{"-t", "raw", "PREROUTING", "-i", "eth0"},
	{"-t", "mangle", "POSTROUTING", "-o", "eth0"},
}

// Partition cuts Machine name off the lab network while it keeps running:
// its packets on the lab interface are dropped in its own network namespace.
// A VM Machine's tap is set down on the host instead (rules inside the VM
// would cut the SSH that Exec and Heal need): until Heal it cannot be
// reached for Exec either.
func (l *Lab) Partition(ctx context.Context, name string) error {
	if l.VM {
		return l.vmLink(ctx, name, false)
	}
	return l.partitionRules(ctx, name, "-I")
}

// Heal undoes Partition.
func (l *Lab) Heal(ctx context.Context, name string) error {
	if l.VM {
		return l.vmLink(ctx, name, true)
	}
	return l.partitionRules(ctx, name, "-D")
}

func (l *Lab) partitionRules(ctx context.Context, name, op string) error {
	m, err := l.Machine(name)
	if err != nil {
		return err
	}
	for _, r := range partitionRules {
		rule := append(append([]string{}, r[3:]...), "-m", "comment", "--comment", "ployz-lab-partition", "-j", "DROP")
		check := append([]string{"iptables", "-w", r[0], r[1], "-C", r[2]}, rule...)
		_, cerr := l.Exec(ctx, m.Name, check...)
		present := cerr == nil
		if (op == "-I") == present {
			continue // already partitioned, or already healed
		}
		cmd := append([]string{"iptables", "-w", r[0], r[1], op, r[2]}, rule...)
		if _, err := l.Exec(ctx, m.Name, cmd...); err != nil {
			return fmt.Errorf("%s %s: %w", map[string]string{"-I": "partition", "-D": "heal"}[op], name, err)
		}
	}
	return nil
}

// Stop stops Machine name's container, as a power-off would; a VM Machine
// really powers off.
func (l *Lab) Stop(ctx context.Context, name string) error {
	return l.powerDown(ctx, name, "stop", "-t", "10")
}

// PowerOff cuts Machine name's power: its container is killed, nothing
// inside shuts down cleanly (no unit stops, no row is withdrawn); a VM
// Machine powers off as Stop does.
func (l *Lab) PowerOff(ctx context.Context, name string) error {
	return l.powerDown(ctx, name, "kill")
}

// powerDown powers a VM Machine off, or runs `docker ARGS... CONTAINER`
// for a container Machine.
func (l *Lab) powerDown(ctx context.Context, name string, args ...string) error {
	m, err := l.Machine(name)
	if err != nil {
		return err
	}
	if l.VM {
		return l.vmPower(ctx, m, false)
	}
	_, err = docker(ctx, append(args, m.Container)...)
	return err
}

// Start starts a stopped Machine (a VM boots its kernel) and waits until
// it has booted.
func (l *Lab) Start(ctx context.Context, name string) error {
	m, err := l.Machine(name)
	if err != nil {
		return err
	}
	if l.VM {
		if err := l.vmPower(ctx, m, true); err != nil {
			return err
		}
		return l.WaitBooted(ctx, name, 15*time.Minute)
	}
	if _, err := docker(ctx, "start", m.Container); err != nil {
		return err
	}
	return l.WaitBooted(ctx, name, 3*time.Minute)
}

// Reachable reports whether Machine from reaches to's lab address with
// one ping answered within a second. Only ping's own verdict "no answer"
// (exit 1 after its summary line) means unreachable; any other failure,
// such as from not running or ping missing, is an error.
func (l *Lab) Reachable(ctx context.Context, from, to string) (bool, error) {
	dst, err := l.Machine(to)
	if err != nil {
		return false, err
	}
	out, err := l.Exec(ctx, from, "ping", "-c", "1", "-W", "1", dst.IP.String())
	return pingVerdict(out, err)
}

// noReply is ping's summary of a request that got no answer (iputils and
// busybox wording).
var noReply = regexp.MustCompile(`1 packets transmitted, 0 (packets )?received`)

// pingVerdict reads one `ping -c 1` run: answered, not answered, or
// failed to ask.
func pingVerdict(out string, err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	// An *exec.ExitError from docker exec, or a VM Machine's SSH exit status.
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) && ee.ExitCode() == 1 && noReply.MatchString(out) {
		return false, nil
	}
	return false, fmt.Errorf("ping: %w", err)
}
