package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// HistoryFilter picks history entries: by namespace and kind ("" for
// all), at most Limit (0: rpc.HistoryDefaultLimit), newest first.
type HistoryFilter = rpc.ListHistoryRequest

// History lists the Cluster's operator history through the entry: every
// deploy, rollback, scale, restart, removal, drain and Volume Run any
// operator recorded, with who ran it and how it ended. A filter naming
// an unknown kind is refused before anything is asked.
func (s *Session) History(ctx context.Context, f HistoryFilter) ([]rpc.HistoryEntry, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out rpc.HistoryList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListHistory, f, &out); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if out.Entries == nil {
		out.Entries = []rpc.HistoryEntry{}
	}
	return out.Entries, nil
}

// historyOp records one operation in the Cluster's history: running
// when it starts, then how it ended. A write that fails warns once and
// never fails the operation.
type historyOp struct {
	ent    *rpc.Client
	e      rpc.HistoryEntry
	warn   func(error)
	warned bool
}

// beginHistory records an operation of kind starting now.
func (s *Session) beginHistory(ctx context.Context, kind, ns, detail string, warn func(error)) *historyOp {
	op := &historyOp{ent: s.ent, warn: warn, e: rpc.HistoryEntry{ID: operator.NewHistoryID(), HistoryBody: store.HistoryBody{
		Kind: kind, Namespace: ns, Operator: s.Operator().History(), StartedAt: time.Now().UnixMilli(),
		Outcome: rpc.OutcomeRunning, Detail: operator.ShortDetail(detail)}}}
	op.write(ctx)
	return op
}

// end records how the operation ended: err (nil: completed) decides the
// outcome unless outcome is given; an error becomes the detail.
func (op *historyOp) end(ctx context.Context, err error, outcome string) {
	op.e.FinishedAt = max(time.Now().UnixMilli(), op.e.StartedAt)
	op.e.Outcome = outcome
	if outcome == "" {
		op.e.Outcome = operator.HistoryOutcome(ctx, err, IsPartial)
	}
	if err != nil {
		op.e.Detail = operator.ShortDetail(op.e.Detail + ": " + err.Error())
	}
	op.write(ctx)
}

func (op *historyOp) write(ctx context.Context) {
	if err := operator.RecordHistory(ctx, op.ent, op.e); err != nil && !op.warned {
		op.warned = true
		if op.warn != nil {
			op.warn(err)
		}
	}
}

// historyKinds maps the Why a library operation gives its Deploy to
// the history kind; a Deploy of a file has no Why.
var historyKinds = []struct{ prefix, kind string }{
	{"rollback ", rpc.HistoryRollback},
	{"scale ", rpc.HistoryScale},
	{"restart ", rpc.HistoryRestart},
	{"remove service ", rpc.HistoryRemoveService},
	{"drain ", rpc.HistoryDrain},
	{"undrain ", rpc.HistoryUndrain},
	{"global catch-up ", rpc.HistoryCatchUp},
}

// kindOf is the history kind of a Deploy with why.
func kindOf(why string) string {
	for _, k := range historyKinds {
		if strings.HasPrefix(why, k.prefix) {
			return k.kind
		}
	}
	return rpc.HistoryDeploy
}

// changedServices are the Services a plan changes, sorted.
func changedServices(p deploy.Plan) []string {
	var out []string
	for _, r := range p.Rows {
		if r.Op != deploy.OpUnchanged && r.Service != "" && !slices.Contains(out, r.Service) {
			out = append(out, r.Service)
		}
	}
	slices.Sort(out)
	return out
}

// ApplyDeploy saves the compose file as the next Saved State revision and
// runs the plan (cancelling ctx stops it between steps), then retries the
// context's pending removals. A partial outcome, a refused prune or a
// held placement returns the result with a *PartialError. The Deploy,
// and a scale, restart, rollback or drain that runs as one, is recorded
// in the Cluster's history under its kind, failures too.
func (s *Session) ApplyDeploy(ctx context.Context, dp *DeployPlan, h Hooks) (DeployResult, error) {
	detail := dp.Why
	if detail == "" {
		detail = "deploy"
	}
	op := s.beginHistory(ctx, kindOf(dp.Why), dp.Plan.Namespace, detail, h.warn)
	res, err := s.applyDeploy(ctx, dp, h)
	op.e.Revision, op.e.Services = dp.Plan.Revision, changedServices(dp.Plan)
	outcome := ""
	if err == nil && dp.Plan.Changes() == 0 {
		outcome = rpc.OutcomeUnchanged
	}
	op.end(ctx, err, outcome)
	return res, err
}

// Drain marks a Machine drained (no new Container is placed there) or
// not, then redeploys every namespace's latest Saved State, so a drained
// Machine's Service Containers are replaced elsewhere, start-first. A
// namespace that failed, or a Container with nowhere else to go, returns
// the report with a *PartialError. The drain is recorded in the
// Cluster's history, and each namespace's redeploy under it.
func (s *Session) Drain(ctx context.Context, d Drain) (ReconcileReport, error) {
	kind := rpc.HistoryDrain
	if d.Undrain {
		kind = rpc.HistoryUndrain
	}
	op := s.beginHistory(ctx, kind, "", kind+" "+d.Machine, d.Hooks.warn)
	rep, err := s.drain(ctx, d)
	op.e.Detail = operator.ShortDetail(fmt.Sprintf("%s %s: %d namespace(s) redeployed, %d failed", kind, d.Machine, len(rep.Namespaces), rep.Failed()))
	op.end(ctx, err, "")
	return rep, err
}

// RemoveProject marks a project's environment for removal and removes
// every Container of it the Machines it reaches hold. A removal left
// stalled (a Machine unreachable, a step failed) returns a *PartialError;
// a later Deploy or RemoveProject finishes it. Nothing retries on a timer.
// The removal is recorded in the Cluster's history.
func (s *Session) RemoveProject(ctx context.Context, project, env string, h Hooks) (ProjectRemoval, error) {
	op := s.beginHistory(ctx, rpc.HistoryRemove, deploy.Namespace(project, env), "remove project "+deploy.Namespace(project, env), h.warn)
	out, err := s.removeProject(ctx, project, env, h)
	op.end(ctx, err, "")
	return out, err
}
