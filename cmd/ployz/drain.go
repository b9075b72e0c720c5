package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// reconcileReport is what a drain, undrain or catch-up did: each saved
// namespace redeployed from its latest Saved State, and the Service
// Containers a drained Machine still holds.
type reconcileReport struct {
	Machine    string            `json:"machine"`
	Namespaces []namespaceResult `json:"namespaces"`
	// Remaining are the Containers still on a drained Machine, with why.
	Remaining []remainingContainer `json:"remaining,omitempty"`
}

// namespaceResult is one namespace's redeploy: its deploy result, or the
// error that stopped it (other namespaces go on).
type namespaceResult struct {
	Namespace string        `json:"namespace"`
	Result    *deployResult `json:"result,omitempty"`
	Error     string        `json:"error,omitempty"`
}

type remainingContainer struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Container string `json:"container"`
	Reason    string `json:"reason"`
}

func machineDrain() *cobra.Command {
	return &cobra.Command{
		Use:   "drain MACHINE",
		Short: "Stop placing Containers on MACHINE and move its Service Containers to other Machines, start-first",
		Long: "drain marks MACHINE drained (no new Container is placed there) and redeploys every project's latest\n" +
			"Saved State, so each Service's Containers on MACHINE are replaced on other eligible Machines before\n" +
			"they stop (the Serving Pointer moves first: clients see no gap). A Service with nowhere else to go,\n" +
			"such as one whose volume is local to MACHINE, stays and is reported; none loses its last Container.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return setDrained(c, args[0], true)
		},
	}
}

func machineUndrain() *cobra.Command {
	return &cobra.Command{
		Use:   "undrain MACHINE",
		Short: "Make MACHINE eligible for placement again (Global Services start there at once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return setDrained(c, args[0], false)
		},
	}
}

// setDrained labels the Machine, then reconciles every saved namespace.
func setDrained(c *cobra.Command, machine string, drained bool) error {
	req := rpc.UpdateMachineRequest{LabelsRemove: []string{deploy.LabelDrained}}
	if drained {
		req = rpc.UpdateMachineRequest{LabelsAdd: map[string]string{deploy.LabelDrained: time.Now().UTC().Format(time.RFC3339)}}
	}
	var in rpc.Inspection
	err := withEntry(c, func(ent *rpc.Client, _ *operator.Store) error {
		return ent.Call(c.Context(), rpc.Target{One: machine}, rpc.CmdUpdateMachine, req, &in)
	})
	if err != nil {
		return fmt.Errorf("mark %s: %w", machine, err)
	}
	verb := "undrain"
	if drained {
		verb = "drain"
		fmt.Fprintf(c.ErrOrStderr(), "%s is drained: no new Container is placed there\n", in.Name)
	} else {
		fmt.Fprintf(c.ErrOrStderr(), "%s takes new Containers again\n", in.Name)
	}
	rep, err := reconcileSaved(c, verb+" "+in.Name, nil)
	rep.Machine = in.Name
	if err != nil {
		return err
	}
	if drained {
		if rep.Remaining, err = remainingOn(c, in.ID); err != nil {
			return err
		}
	}
	return finishReconcile(c, rep)
}

// reconcileSaved redeploys the latest Saved State of every namespace of
// the context that want accepts (nil: all), namespace by namespace; a
// failing namespace is reported and the others go on.
func reconcileSaved(c *cobra.Command, why string, want func(app deploy.App) bool) (reconcileReport, error) {
	var rep reconcileReport
	st, err := openStore()
	if err != nil {
		return rep, err
	}
	oc, err := contextName(st)
	if err != nil {
		st.Close()
		return rep, err
	}
	states, err := latestSaved(st, oc)
	if err != nil {
		st.Close()
		return rep, err
	}
	var targets []operator.SavedState
	for _, s := range states {
		if want != nil {
			app, err := loadDeclarations(c.Context(), s)
			if err != nil || !want(app) {
				continue
			}
		}
		targets = append(targets, s)
	}
	st.Close()
	for _, t := range targets {
		rep.Namespaces = append(rep.Namespaces, redeployOne(c, why, t.Project, t.Environment, t.Compose))
	}
	return rep, nil
}

// redeployOne runs one namespace's deploy, capturing its JSON result
// when --json is set so the command prints one document.
func redeployOne(c *cobra.Command, why, project, env string, compose []byte) namespaceResult {
	res := namespaceResult{Namespace: deploy.Namespace(project, env)}
	df := deployFlags{projectFlags: projectFlags{file: "compose.yaml", project: project, env: env}, timeout: defaultReadyTimeout, noBuild: true}
	var buf bytes.Buffer
	out := c.OutOrStdout()
	if g.json {
		c.SetOut(&buf)
	}
	err := runDeploy(c, compose, df, why)
	c.SetOut(out)
	if g.json && buf.Len() > 0 {
		var r deployResult
		if json.Unmarshal(buf.Bytes(), &r) == nil {
			res.Result = &r
		}
	}
	if err != nil {
		res.Error = err.Error()
		if !g.json {
			fmt.Fprintf(c.ErrOrStderr(), "%s: %v\n", res.Namespace, err)
		}
	}
	return res
}

// remainingOn lists the Service Containers the Machine still holds, with
// the reason the plan gave for keeping each.
func remainingOn(c *cobra.Command, machineID string) ([]remainingContainer, error) {
	var out []remainingContainer
	err := withSession(c, func(s session) error {
		snap, err := deploy.Observe(c.Context(), s.ent, "", false)
		if err != nil {
			return err
		}
		m, ok := snap.Machine(machineID)
		if !ok || !m.Observed {
			return fmt.Errorf("machine %s was not observed after the drain; run `ployz ps` to see what it holds", machineID)
		}
		for _, co := range m.Containers {
			if co.Labels[rpc.LabelKind] == "hook" {
				continue
			}
			why := "no other eligible Machine"
			if co.Spec != nil {
				for _, mt := range co.Spec.Mounts {
					if mt.Type == "volume" {
						why = "volume " + mt.Source + " is local to this Machine (volumes cannot move yet)"
					}
				}
			}
			out = append(out, remainingContainer{Namespace: co.Namespace, Service: co.Service, Container: co.Name, Reason: why})
		}
		return nil
	})
	return out, err
}

// finishReconcile prints the report and exits 3 when a namespace failed
// or a drained Machine still holds Containers.
func finishReconcile(c *cobra.Command, rep reconcileReport) error {
	failed := 0
	for _, n := range rep.Namespaces {
		if n.Error != "" {
			failed++
		}
	}
	if g.json {
		if err := printJSON(c.OutOrStdout(), rep); err != nil {
			return err
		}
	} else {
		for _, r := range rep.Remaining {
			fmt.Fprintf(c.ErrOrStderr(), "still on %s: %s/%s (%s): %s\n", rep.Machine, r.Namespace, r.Service, r.Container, r.Reason)
		}
	}
	if failed > 0 || len(rep.Remaining) > 0 {
		return &exitError{code: 3, silent: g.json, err: errors.New(partialReconcile(rep, failed))}
	}
	return nil
}

func partialReconcile(rep reconcileReport, failed int) string {
	s := fmt.Sprintf("%s: %d of %d namespace(s) failed to redeploy", rep.Machine, failed, len(rep.Namespaces))
	if len(rep.Remaining) > 0 {
		s += fmt.Sprintf("; %d Container(s) could not move", len(rep.Remaining))
	}
	return s
}

// globalCatchUp redeploys the saved namespaces that declare a Global
// Service, so a new Machine runs its Global slots at once; other
// namespaces are left alone.
func globalCatchUp(c *cobra.Command, machine string) error {
	rep, err := reconcileSaved(c, "global catch-up for "+machine, func(app deploy.App) bool {
		for _, s := range app.Services {
			if s.Mode == deploy.ModeGlobal {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("global catch-up on %s: %w", machine, err)
	}
	for _, n := range rep.Namespaces {
		if n.Error != "" {
			return &exitError{code: 3, err: fmt.Errorf("global catch-up on %s: %s: %s; `ployz deploy` of it retries", machine, n.Namespace, n.Error)}
		}
	}
	return nil
}
