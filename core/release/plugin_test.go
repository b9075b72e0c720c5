package release

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestPlanPlugin: name order; a Machine already on the bundle's digest is
// skipped; one without upgrade_plugin is refused naming the capability;
// one without the plugin or that did not answer is refused saying so; a
// bundle without the plugin is an error naming it.
func TestPlanPlugin(t *testing.T) {
	m := &Manifest{Version: "2.0", Files: []File{{Path: "bin/ployz-ingress-caddy", SHA256: "aaaaaaaaaaaaaaaa"}}}
	caps := []string{rpc.CapUpgradeMachine, rpc.CapUpgradePlugin}
	in := func(sha, running string) *rpc.Inspection {
		return &rpc.Inspection{Capabilities: caps, Plugins: []rpc.PluginView{{Name: "ingress-caddy", SHA256: sha, RunningSHA256: running}}}
	}
	targets := []PluginTarget{
		{Machine: rpc.MachineView{ID: "5", Name: "m5", Version: "1.0", Capabilities: caps}, Inspection: in("aaaaaaaaaaaaaaaa", "bbbb")},
		{Machine: rpc.MachineView{ID: "1", Name: "m1", Version: "1.0", Capabilities: caps}, Inspection: in("bbbbbbbbbbbbbbbb", "")},
		{Machine: rpc.MachineView{ID: "2", Name: "m2", Version: "2.0", Capabilities: caps}, Inspection: in("aaaaaaaaaaaaaaaa", "")},
		{Machine: rpc.MachineView{ID: "3", Name: "m3", Version: "0.9", Capabilities: []string{rpc.CapUpgradeMachine}}, Inspection: &rpc.Inspection{Capabilities: []string{rpc.CapUpgradeMachine}}},
		{Machine: rpc.MachineView{ID: "4", Name: "m4", Version: "1.0", Capabilities: caps}, InspectErr: "timeout"},
		{Machine: rpc.MachineView{ID: "6", Name: "m6", Version: "1.0", Capabilities: caps}, Inspection: &rpc.Inspection{Capabilities: caps}},
	}
	plan, err := PlanPlugin(targets, m, "ingress-caddy")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, do, reason, missing string }{
		{"m1", "upgrade", "", ""},
		{"m2", "skip", "already runs", ""},
		{"m3", "refuse", "upgrade the Machine first", rpc.CapUpgradePlugin},
		{"m4", "refuse", "did not answer: timeout", ""},
		{"m5", "upgrade", "", ""}, // installed but still running another binary
		{"m6", "refuse", "not installed", ""},
	}
	if len(plan) != len(want) {
		t.Fatalf("plan %+v", plan)
	}
	for i, w := range want {
		a := plan[i]
		if a.Name != w.name || a.Do != w.do || !strings.Contains(a.Reason, w.reason) || a.Missing != w.missing {
			t.Errorf("%d: %+v, want %+v", i, a, w)
		}
	}
	if _, err := PlanPlugin(targets, m, "dns"); err == nil || !strings.Contains(err.Error(), "bin/ployz-dns") {
		t.Errorf("a bundle without the plugin: %v", err)
	}
}
