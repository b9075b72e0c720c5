package client

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/operator"
)

// DefaultReadyTimeout bounds each wait_ready of a Deploy that does not
// say (scale, restart, rm, start, a drain's redeploys).
const DefaultReadyTimeout = 120 * time.Second

// DeployRequest is one Deploy of a compose file.
type DeployRequest struct {
	Compose []byte
	// File is the compose file's path: its name and directory resolve
	// the file's relative paths ("compose.yaml" for a Saved State).
	File        string
	Project     string
	Environment string
	// Env interpolates the compose file (nil: nothing set).
	Env     map[string]string
	NoPrune bool
	// Pull is always, missing or never ("": each Service's pull_policy).
	Pull string
	// NoBuild deploys each build: Service's last local build.
	NoBuild   bool
	BuildArgs []string
	// Restart names Services replaced even when up to date.
	Restart      []string
	ReadyTimeout time.Duration
	// Why names the operation for a scale, restart or drain ("" for a
	// Deploy of a file); the plan and the Deploy's record carry it.
	Why string
	// DryRun plans without delivering images (nothing is changed).
	DryRun bool
	// BuildLog and BuildOutput hear the builds (see Build); may be nil.
	BuildLog, BuildOutput io.Writer
	// Images pins build: Services to the images a rollback's revision
	// ran; with NeedImages, images that no Machine holds and no registry
	// supplies are refused before any change.
	Images     map[string]string
	NeedImages bool
}

// DeployPlan is a planned Deploy for the caller to show and confirm
// before ApplyDeploy runs it; nothing of the Cluster changed yet except
// the images delivered to Machines that missed them.
type DeployPlan struct {
	Plan     deploy.Plan
	Snapshot deploy.Snapshot
	Why      string
	// Deliveries are the images pushed to Machines that missed them.
	Deliveries []images.Result
	// PendingRemovals are the context's project removals not finished:
	// one of this namespace is superseded, the others retried after it.
	PendingRemovals []operator.Removal

	req   DeployRequest
	app   deploy.App
	trace *deploy.Trace
}

// DeployResult is a Deploy's whole account: `ployz deploy --json`.
type DeployResult struct {
	Plan     deploy.Plan     `json:"plan"`
	Outcome  *deploy.Outcome `json:"outcome,omitempty"`
	Snapshot struct {
		Complete   bool                `json:"complete"`
		Unobserved []deploy.Unobserved `json:"unobserved,omitempty"`
	} `json:"snapshot"`
	Removals []RemovalReport `json:"removals,omitempty"`
	// Timings is where the deploy's time went: its phases and every
	// step that ran, with offsets from the start.
	Timings []deploy.Timing `json:"timings,omitempty"`
}

// Validate checks what can be checked before connecting.
func (r DeployRequest) Validate() error {
	_, err := deploy.ParsePullPolicy(r.Pull)
	return err
}

// Result is the plan's account before it runs (a dry run's result).
func (dp *DeployPlan) Result() DeployResult {
	var r DeployResult
	r.Plan = dp.Plan
	r.Snapshot.Complete, r.Snapshot.Unobserved = dp.Snapshot.Complete(), dp.Snapshot.Missing
	return r
}

// PlanDeploy loads the compose file, builds and delivers its images
// (unless DryRun), observes the Cluster and plans against it.
func (s *Session) PlanDeploy(ctx context.Context, req DeployRequest) (*DeployPlan, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	dp := &DeployPlan{req: req, Why: req.Why, trace: deploy.NewTrace()}
	var err error
	dp.app, err = deploy.Load(ctx, deploy.Source{Compose: req.Compose, Filename: filepath.Base(req.File), WorkingDir: filepath.Dir(req.File),
		ProjectName: req.Project, Environment: req.Environment, Env: req.Env})
	if err != nil {
		return nil, err
	}
	if req.NeedImages {
		if err := pinImages(&dp.app, req.Images, req.Why); err != nil {
			return nil, err
		}
	}
	if err := s.buildAndDeliver(ctx, dp); err != nil {
		return nil, err
	}
	if err := s.makePlan(ctx, dp); err != nil {
		return nil, err
	}
	if missing := deploy.ImagesNowhere(dp.app, dp.Snapshot); req.NeedImages && len(missing) > 0 {
		return nil, errImagesNowhere(missing)
	}
	return dp, nil
}

// buildAndDeliver builds the images the compose file builds and, unless
// this is a dry run, pushes every image to the Machines that miss it:
// images reach Machines without a registry.
func (s *Session) buildAndDeliver(ctx context.Context, dp *DeployPlan) error {
	endBuild := dp.trace.Phase("build")
	err := BuildApp(ctx, s.ent, &dp.app, Build{Reuse: dp.req.NoBuild, Args: dp.req.BuildArgs, Log: dp.req.BuildLog, Output: dp.req.BuildOutput, DryRun: dp.req.DryRun})
	if err != nil {
		return err
	}
	endBuild()
	if dp.req.DryRun {
		return nil
	}
	var imgs []string
	for _, sv := range dp.app.Services {
		imgs = append(imgs, sv.Spec.Image)
	}
	endDeliver := dp.trace.Phase("deliver_images")
	dp.Deliveries, err = images.Deliver(ctx, s.ent, imgs, nil)
	endDeliver()
	return err
}

// makePlan observes the Cluster and plans against it.
func (s *Session) makePlan(ctx context.Context, dp *DeployPlan) error {
	endObserve := dp.trace.Phase("observe")
	snap, err := deploy.Observe(ctx, s.ent, "", true)
	endObserve()
	if err != nil {
		return err
	}
	if snap.Salts, err = deploy.SaltSpecs(ctx, s.ent, dp.app); err != nil {
		return err
	}
	if err := deploy.ObserveVolumes(ctx, s.ent, dp.app, &snap); err != nil {
		return err
	}
	deploy.ObserveServing(ctx, s.ent, &snap)
	dp.Snapshot = snap
	dp.Plan, err = deploy.MakePlan(dp.app, snap, deploy.PlanOptions{NoPrune: dp.req.NoPrune, Pull: dp.req.Pull, Restart: dp.req.Restart})
	if err != nil {
		return err
	}
	dp.PendingRemovals, _ = s.Removals(ctx)
	return nil
}

// applyDeploy is ApplyDeploy (client/history.go) before its history.
func (s *Session) applyDeploy(ctx context.Context, dp *DeployPlan, h Hooks) (DeployResult, error) {
	res := dp.Result()
	ctx, release, err := s.Hold(ctx, NamespaceScope(dp.Plan.Namespace), dp.leaseCommand(), h.warn)
	if err != nil {
		return res, err
	}
	defer release()
	// Jobs and volume policies first: an entry that cannot store them refuses the deploy
	// before anything is saved or changed.
	if err := s.storeJobs(ctx, dp.Plan, dp.app.Files, !dp.req.NoPrune); err != nil {
		return res, err
	}
	if err := s.storeVolumePolicies(ctx, dp.Plan.Namespace, dp.Plan.DeploymentID, dp.app.Provisioned, !dp.req.NoPrune); err != nil {
		return res, err
	}
	if err := s.save(ctx, dp); err != nil {
		return res, err
	}
	res.Plan = dp.Plan
	if dp.Plan.Changes() == 0 {
		res.Removals = s.finishRemovals(ctx, dp.Snapshot, dp.Plan.Namespace, h)
		return res, pruneRefused(dp.Plan)
	}
	auth, err := registryAuth(dp.Plan)
	if err != nil {
		return res, err
	}
	rec := s.recordDeploy(dp.Plan, dp.Why, h)
	ex := &deploy.Executor{C: s.ent, ReadyTimeout: readyTimeout(dp.req.ReadyTimeout), Progress: both(h.step, rec.rec.Event), RegistryAuth: auth, Files: dp.app.Files}
	endExec := dp.trace.Phase("execute")
	out := ex.Run(ctx, dp.Plan)
	endExec()
	rec.finish(out)
	dp.trace.Steps(out)
	res.Outcome = &out
	if ctx.Err() == nil {
		// Removals confirmed earlier by `ployz project rm` are retried after
		// the plan, so the confirmed rows ran exactly as shown.
		res.Removals = s.finishRemovals(ctx, dp.Snapshot, dp.Plan.Namespace, h)
	}
	res.Timings = dp.trace.Timings()
	if out.Partial() {
		return res, partial(fmt.Errorf("deploy of %s revision %d is %s: %d step(s) failed, %d never attempted; rerun `ployz deploy` to continue from what the Machines show",
			dp.Plan.Namespace, dp.Plan.Revision, out.Status, out.Count(deploy.StepFailed), out.Count(deploy.StepNeverAttempted)))
	}
	return res, pruneRefused(dp.Plan)
}

// Deploy plans and applies req with no one to confirm (the caller's
// request is the confirmation).
func (s *Session) Deploy(ctx context.Context, req DeployRequest, h Hooks) (DeployResult, error) {
	dp, err := s.PlanDeploy(ctx, req)
	if err != nil {
		return DeployResult{}, err
	}
	return s.ApplyDeploy(ctx, dp, h)
}

func readyTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultReadyTimeout
	}
	return d
}

// save records the compose file as the next Saved State revision; a
// deploy supersedes a pending removal of the same namespace.
func (s *Session) save(ctx context.Context, dp *DeployPlan) error {
	rev, err := s.saveRevision(ctx, dp.app.Project, dp.app.Environment, dp.req.Compose)
	if err != nil {
		return err
	}
	dp.Plan.Revision = rev
	return s.clearRemoval(ctx, dp.app.Project, dp.app.Environment)
}

// pruneRefused makes a refused prune or a held placement a partial
// outcome: the declaration is not fully applied.
func pruneRefused(p deploy.Plan) error {
	var why []string
	if p.PruneRefused != "" {
		why = append(why, p.PruneRefused)
	}
	why = append(why, p.Unplaced()...)
	if len(why) == 0 {
		return nil
	}
	return partial(fmt.Errorf("%s is incompletely applied: %s; rerun when every Machine is reachable", p.Namespace, strings.Join(why, "; ")))
}

// both is a Progress that tells two listeners.
func both(a, b func(deploy.Event)) func(deploy.Event) {
	return func(e deploy.Event) { a(e); b(e) }
}
