package release

import (
	"fmt"
	"slices"

	"github.com/ployz/ployz/core/rpc"
)

// PluginTarget is one Machine a plugin upgrade considers: its list entry
// and, when it answered, its inspection (the plugin's installed digest).
type PluginTarget struct {
	Machine rpc.MachineView
	// Inspection is nil when the Machine did not answer; InspectErr says why.
	Inspection *rpc.Inspection
	InspectErr string
}

// PlanPlugin orders the swap of plugin onto m's binary on every Machine,
// one at a time in name order: skip a Machine whose installed and running
// binary already has m's digest, refuse one lacking the upgrade_plugin
// route (naming the capability), one not running the plugin, or one that
// did not answer. The bundle must ship the plugin.
func PlanPlugin(targets []PluginTarget, m *Manifest, plugin string) ([]Action, error) {
	f, ok := m.File("bin/ployz-" + plugin)
	if !ok {
		return nil, fmt.Errorf("plugin %q: the bundle %s does not ship bin/ployz-%s", plugin, m.Version, plugin)
	}
	machines := make([]rpc.MachineView, 0, len(targets))
	for _, t := range targets {
		machines = append(machines, t.Machine)
	}
	plan, err := Plan(machines, m, nil, true)
	if err != nil {
		return nil, err
	}
	for i, a := range plan {
		t := targets[slices.IndexFunc(targets, func(t PluginTarget) bool { return t.Machine.ID == a.MachineID })]
		plan[i] = pluginAction(a, t, f, plugin)
	}
	return plan, nil
}

// pluginAction decides one Machine's part of a plugin upgrade.
func pluginAction(a Action, t PluginTarget, f File, plugin string) Action {
	a.Do, a.Reason, a.Missing = "upgrade", "", ""
	a.To = a.To + " (" + plugin + " " + short(f.SHA256) + ")"
	caps := t.Machine.Capabilities
	if t.Inspection != nil {
		caps = t.Inspection.Capabilities
	}
	if !slices.Contains(caps, rpc.CapUpgradePlugin) {
		a.Do, a.Missing = "refuse", rpc.CapUpgradePlugin
		a.Reason = fmt.Sprintf("release %s has no %s: upgrade the Machine first (ployz machine upgrade)", a.From, rpc.CapUpgradePlugin)
		return a
	}
	if t.Inspection == nil {
		a.Do, a.Reason = "refuse", "did not answer: "+t.InspectErr
		return a
	}
	i := slices.IndexFunc(t.Inspection.Plugins, func(p rpc.PluginView) bool { return p.Name == plugin })
	if i < 0 {
		a.Do, a.Reason = "refuse", "plugin "+plugin+" is not installed on this Machine"
		return a
	}
	p := t.Inspection.Plugins[i]
	a.From = a.From + " (" + plugin + " " + short(p.SHA256) + ")"
	if p.SHA256 == f.SHA256 && p.RunningSHA256 == "" {
		a.Do, a.Reason = "skip", "already runs "+plugin+" sha256 "+short(f.SHA256)
	}
	return a
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
