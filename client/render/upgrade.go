package render

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
)

// UpgradeHooks print a rollout's pushes of bundle, its steps and each
// Machine's outcome as lines through progress.
func UpgradeHooks(progress func(string, ...any), bundle string) client.UpgradeHooks {
	return client.UpgradeHooks{
		Pushing: func(a release.Action, over string) {
			if over != "" {
				progress("%s: pushing %s over SSH (%s; %s → %s)", a.Name, bundle, over, a.From, a.To)
				return
			}
			progress("%s: pushing %s (%s → %s)", a.Name, bundle, a.From, a.To)
		},
		Step: func(a release.Action, s rpc.UpgradeStep) {
			way := ""
			if s.Rollback {
				way = " (going back)"
			}
			progress("%s: %s → %s %s in %dms%s%s", a.Name, s.Name, s.Release, s.Outcome, s.Millis, way, suffix("", s.Detail))
		},
		Done: func(mo release.MachineOutcome) {
			progress("%s: %s%s (%.1fs)", mo.Name, mo.Outcome, suffix(mo.FailedStep, mo.Error), float64(mo.Millis)/1000)
		},
	}
}

func suffix(step, msg string) string {
	switch {
	case step != "":
		return fmt.Sprintf(" at step %s: %s", step, msg)
	case msg != "":
		return ": " + msg
	}
	return ""
}

// UpgradePlan is a rollout's order: each Machine, its releases and what
// is done to it, and why.
func UpgradePlan(w io.Writer, plan []release.Action) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tNAME\tID\tFROM\tTO\tACTION\tREASON")
	for i, a := range plan {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, a.Name, shortID(a.MachineID), a.From, a.To, a.Do, a.Reason)
	}
	return tw.Flush()
}

// UpgradeOutcome is each Machine's end of a rollout.
func UpgradeOutcome(w io.Writer, o release.Outcome) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tFROM\tTO\tOUTCOME\tFAILED STEP\tTIME")
	for _, mo := range o.Machines {
		step := mo.FailedStep
		if step == "" {
			step = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\n", mo.Name, shortID(mo.MachineID), mo.From, mo.To, mo.Outcome, step, float64(mo.Millis)/1000)
	}
	return tw.Flush()
}

// shortID is an id's first 8 characters, as tables show it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
