package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// keptPort is a port above 1024 a Ployz process listens on, so any local
// user could bind it while that process restarts, and the unit whose
// process keeps it in systemd's fd store.
type keptPort struct {
	proto string // tcp or udp
	port  int
	unit  string
}

var keptPorts = []keptPort{
	{"tcp", 7570, "ployz-store.service"}, {"udp", 7570, "ployz-store.service"},
	{"tcp", 7569, "ployz.service"}, {"tcp", 7574, "ployz.service"},
	{"tcp", 9101, "ployz-plugin@metrics.service"},
}

// squatScript binds, as whoever runs it, each kept port on the wildcard
// address and on the management address (ARGV[0]) without pause until
// /tmp/squat.stop exists, and holds (and listens on) whatever it gets,
// as an attacker would; SO_REUSEADDR makes it as strong as a user can be.
// It binds a free port first: a control showing the method works.
const squatScript = `use strict; use Socket qw(:DEFAULT inet_pton pack_sockaddr_in6);
my $mgmt = shift; $| = 1;
sub try { my ($proto, $addr, $port) = @_;
  socket(my $s, AF_INET6, $proto eq "tcp" ? SOCK_STREAM : SOCK_DGRAM, 0) or die "socket: $!";
  setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1);
  return bind($s, pack_sockaddr_in6($port, inet_pton(AF_INET6, $addr))) ? $s : undef; }
print try("tcp", $mgmt, 7599) ? "control bound\n" : "control refused: $!\n";
my @t; for my $p (@ARGV[1..$#ARGV]) { my ($proto, $port) = split m{/}, $p; push @t, [$proto, $_, $port] for ("::", $mgmt); }
my ($n, %held) = (0);
until (-e "/tmp/squat.stop") {
  for my $t (@t) { next if $held{"@$t"}; $n++; my $s = try(@$t) or next; listen($s, 16) if $t->[0] eq "tcp"; $held{"@$t"} = $s; print "bound @$t\n"; }
  select(undef, undef, undef, 0.002);
}
print "attempts $n\n";`

// restartGap: an unprivileged user binds, without pause, every port above
// 1024 a Ployz process listens on while the store, ployzd and the metrics
// plugin restart. Each process keeps its sockets in systemd's fd store,
// so the user never gets one, every restarted process listens again on
// the very socket it had (same inode) and the units stay active.
func restartGap(ctx context.Context, t *testing.T, l *lab.Lab, m *lab.Machine, mgmt string) {
	before := map[keptPort]string{}
	eventually(t, 60*time.Second, "every kept port listens on "+m.Name, func() error {
		for _, p := range keptPorts {
			ino, _, err := portSocket(ctx, l, m.Name, p)
			if err != nil {
				return err
			}
			before[p] = ino
		}
		return nil
	})
	args := []string{mgmt}
	for _, p := range keptPorts {
		args = append(args, fmt.Sprintf("%s/%d", p.proto, p.port))
	}
	start := "rm -f /tmp/squat.stop /tmp/squat.log; setpriv --reuid=65534 --regid=65534 --clear-groups -- perl -e '" + squatScript + "' " +
		strings.Join(args, " ") + " >/tmp/squat.log 2>&1 </dev/null & echo $!"
	pid, err := l.Exec(ctx, m.Name, "sh", "-c", start)
	if err != nil {
		t.Fatalf("start the squatter: %v", err)
	}
	defer l.Exec(ctx, m.Name, "kill", pid) // gone already when it stopped
	defer func() {
		if t.Failed() { // what the squatter got explains a unit that did not come back
			out, _ := l.Exec(ctx, m.Name, "cat", "/tmp/squat.log")
			t.Logf("squatter log:\n%s", out)
		}
	}()
	eventually(t, 10*time.Second, "the squatter runs", func() error {
		out, _ := l.Exec(ctx, m.Name, "cat", "/tmp/squat.log")
		if !strings.Contains(out, "control bound") {
			return fmt.Errorf("log %q", out)
		}
		return nil
	})
	for _, unit := range []string{"ployz-store.service", "ployz.service", "ployz-plugin@metrics.service"} {
		restartKeeping(ctx, t, l, m.Name, unit)
	}
	if _, err := l.Exec(ctx, m.Name, "touch", "/tmp/squat.stop"); err != nil {
		t.Fatal(err)
	}
	var log string
	eventually(t, 10*time.Second, "the squatter stops", func() error {
		log, _ = l.Exec(ctx, m.Name, "cat", "/tmp/squat.log")
		if !strings.Contains(log, "attempts ") {
			return fmt.Errorf("log %q", log)
		}
		return nil
	})
	t.Logf("squatter as nobody: %s", strings.ReplaceAll(log, "\n", "; "))
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "bound ") {
			t.Errorf("nobody took a Ployz port during the restarts: %s", line)
		}
	}
	for _, p := range keptPorts {
		ino, _, err := portSocket(ctx, l, m.Name, p)
		if err != nil {
			t.Error(err)
			continue
		}
		if ino != before[p] {
			t.Errorf("%s %d: socket %s before the restart of %s, %s after: not kept in the fd store", p.proto, p.port, before[p], p.unit, ino)
		}
	}
	if _, err := lsFrom(ctx, l, m.Name); err != nil {
		t.Errorf("ployzd after the restarts: %v", err)
	}
}

// restartKeeping restarts unit and waits until it is active and its new
// main process listens on each of its kept ports again.
func restartKeeping(ctx context.Context, t *testing.T, l *lab.Lab, name, unit string) {
	t.Helper()
	if _, err := l.Exec(ctx, name, "systemctl", "restart", unit); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, unit+" listens again after its restart", func() error {
		if out, err := l.Exec(ctx, name, "systemctl", "is-active", unit); err != nil || out != "active" {
			return fmt.Errorf("%s is %q", unit, out)
		}
		pid, err := l.Exec(ctx, name, "systemctl", "show", "-p", "MainPID", "--value", unit)
		if err != nil {
			return err
		}
		for _, p := range keptPorts {
			if p.unit != unit {
				continue
			}
			_, pids, err := portSocket(ctx, l, name, p)
			if err != nil {
				return err
			}
			if !strings.Contains(pids, "pid="+pid+",") {
				return fmt.Errorf("%s %d is held by %s, not by %s's main process %s", p.proto, p.port, pids, unit, pid)
			}
		}
		return nil
	})
}

var (
	inoRe   = regexp.MustCompile(`\bino:(\d+)`)
	usersRe = regexp.MustCompile(`users:\(\(.*\)\)`)
)

// portSocket returns the inode of the one listening socket on p's port
// and the processes holding it (ss -p).
func portSocket(ctx context.Context, l *lab.Lab, name string, p keptPort) (ino, users string, err error) {
	flag := "-Hltnpe"
	if p.proto == "udp" {
		flag = "-Hlunpe"
	}
	out, err := l.Exec(ctx, name, "ss", flag, fmt.Sprintf("sport = :%d", p.port))
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if out == "" || len(lines) != 1 {
		return "", "", fmt.Errorf("%s %d: want one listening socket, ss shows %q", p.proto, p.port, out)
	}
	m := inoRe.FindStringSubmatch(out)
	if m == nil {
		return "", "", fmt.Errorf("%s %d: no inode in %q", p.proto, p.port, out)
	}
	return m[1], usersRe.FindString(out), nil
}
