package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// inspectLocal returns Machine name's own inspection through its socket.
func inspectLocal(ctx context.Context, l *lab.Lab, name string) (rpc.Inspection, error) {
	var in rpc.Inspection
	return in, localJSON(ctx, l, name, &in, "machine", "inspect")
}

func pluginView(in rpc.Inspection, name string) (rpc.PluginView, bool) {
	for _, p := range in.Plugins {
		if p.Name == name {
			return p, true
		}
	}
	return rpc.PluginView{}, false
}

// TestLongLivedPluginOutlivesDaemon runs the SDK's example plugin as a
// long-lived plugin under real systemd (ployz-plugin@example.service) and
// checks that it keeps serving while ployzd is stopped and killed, and that
// ployzd re-attaches to the same process (issue 4).
func TestLongLivedPluginOutlivesDaemon(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const capName = "example.dns.spec-store.v1"

	bin := filepath.Join(os.Getenv(lab.EnvBinDir), "ployz-example")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("example plugin binary: %v (make build builds it)", err)
	}
	if _, err := lab.Docker(ctx, "cp", bin, l.Machines[0].Container+":/root/ployz-example"); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"ployzd", "plugins", "install", "/root/ployz-example", "--lifecycle", "long-lived"},
		{"systemctl", "enable", "--now", "ployz-plugin@example.service"},
		{"systemctl", "enable", "--now", "ployz.service"},
	} {
		if out, err := l.Exec(ctx, "m1", cmd...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	unitPid := func() string {
		out, _ := l.Exec(ctx, "m1", "systemctl", "show", "-p", "MainPID", "--value", "ployz-plugin@example.service")
		return out
	}
	var first rpc.PluginView
	eventually(t, 60*time.Second, "ployzd attaches the plugin", func() error {
		in, err := inspectLocal(ctx, l, "m1")
		if err != nil {
			return err
		}
		p, ok := pluginView(in, "example")
		if !ok || p.Health != "healthy" || p.Pid == 0 {
			return fmt.Errorf("plugin: %+v", p)
		}
		if !slices.Contains(in.Capabilities, capName) {
			return fmt.Errorf("capability %s not in the catalog: %v", capName, in.Capabilities)
		}
		first = p
		return nil
	})
	if got := unitPid(); got != fmt.Sprint(first.Pid) {
		t.Fatalf("attached pid %d, but the unit's main pid is %s", first.Pid, got)
	}
	t.Logf("plugin %s (api v%d, %s) serves %v as pid %d", first.Name, first.APIVersion, first.Lifecycle, first.Capabilities, first.Pid)

	// ployzd stopped: the plugin still answers on its own socket.
	if _, err := l.Exec(ctx, "m1", "systemctl", "stop", "ployz.service"); err != nil {
		t.Fatal(err)
	}
	out, err := l.Exec(ctx, "m1", "ployzd", "plugins", "ls", "--json")
	if err != nil || !strings.Contains(out, `"healthy"`) || !strings.Contains(out, fmt.Sprint(first.Pid)) {
		t.Fatalf("plugin while ployzd is stopped: %v\n%s", err, out)
	}
	if _, err := l.Exec(ctx, "m1", "systemctl", "start", "ployz.service"); err != nil {
		t.Fatal(err)
	}
	// ployzd killed: systemd restarts it and it re-attaches to the same pid.
	if _, err := l.Exec(ctx, "m1", "systemctl", "kill", "-s", "KILL", "ployz.service"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "ployzd re-attaches after kill -9", func() error {
		in, err := inspectLocal(ctx, l, "m1")
		if err != nil {
			return err
		}
		p, ok := pluginView(in, "example")
		if !ok || p.Health != "healthy" {
			return fmt.Errorf("plugin: %+v", p)
		}
		if p.Pid != first.Pid {
			return fmt.Errorf("re-attached to pid %d, want the same process %d", p.Pid, first.Pid)
		}
		return nil
	})
	if got := unitPid(); got != fmt.Sprint(first.Pid) {
		t.Errorf("the plugin process changed: unit main pid %s, was %d", got, first.Pid)
	}

	// Swapped by digest, as sdk/example/README.md step 8 says: installing
	// another digest while ployzd runs makes it verify the new blob and
	// restart the unit onto it; the capability stays in describe_contract.
	out, err = l.Exec(ctx, "m1", "sh", "-c", "cp /root/ployz-example /root/ployz-example-next && printf 'next' >> /root/ployz-example-next && "+
		"ployzd plugins install /root/ployz-example-next --name example --lifecycle long-lived")
	if err != nil {
		t.Fatalf("install the next release: %v %s", err, out)
	}
	next := out[strings.LastIndex(out, " ")+1:]
	eventually(t, 60*time.Second, "ployzd switches the plugin to the new digest", func() error {
		in, err := inspectLocal(ctx, l, "m1")
		if err != nil {
			return err
		}
		p, _ := pluginView(in, "example")
		if p.SHA256 != next || p.RunningSHA256 != "" || p.Health != "healthy" || p.Pid == first.Pid || p.Pid == 0 {
			return fmt.Errorf("plugin: %+v", p)
		}
		return nil
	})
	c, err := describeContract(ctx, t, l, l.Machines[0])
	if err != nil || !slices.Contains(c.Capabilities, capName) {
		t.Fatalf("describe_contract after the swap: %v %v", c.Capabilities, err)
	}
	if got, want := unitPid(), ""; got == want || got == fmt.Sprint(first.Pid) {
		t.Errorf("unit main pid %s after the swap, first was %d", got, first.Pid)
	}
}
