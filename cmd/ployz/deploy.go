package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// projectFlags name a project and environment.
type projectFlags struct {
	file    string
	project string
	env     string
}

func (f *projectFlags) add(c *cobra.Command, withFile bool) {
	if withFile {
		c.Flags().StringVarP(&f.file, "file", "f", "compose.yaml", "compose file")
	}
	c.Flags().StringVarP(&f.project, "project-name", "p", "", "project name (default: the compose file's name:)")
	c.Flags().StringVar(&f.env, "env", deploy.DefaultEnvironment, "environment; the namespace is <project>-<environment>")
}

// resolveProject finds the project name: the flag, else ./compose.yaml's
// name, else the context's only project with saved state.
func (f *projectFlags) resolveProject(ctx context.Context, st *operator.Store, ctxName string) (string, error) {
	if f.project != "" {
		return f.project, nil
	}
	if b, err := os.ReadFile("compose.yaml"); err == nil {
		if app, err := deploy.Load(ctx, deploy.Source{Compose: b, Environment: f.env, DeclarationsOnly: true}); err == nil {
			return app.Project, nil
		}
	}
	states, err := st.States(ctxName)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var names []string
	for _, s := range states {
		if !seen[s.Project] {
			seen[s.Project] = true
			names = append(names, s.Project)
		}
	}
	if len(names) == 1 {
		return names[0], nil
	}
	return "", fmt.Errorf("which project? pass --project-name (saved projects: %s)", strings.Join(names, ", "))
}

type deployFlags struct {
	projectFlags
	dryRun  bool
	noPrune bool
	timeout time.Duration
	// pull is --pull: always, missing or never ("" lets each Service's
	// pull_policy decide).
	pull string
	// noBuild deploys each build: Service's last local build.
	noBuild   bool
	buildArgs []string
	// restart names Services replaced even when up to date.
	restart []string
	// images pins build: Services to the images a rollback's revision
	// ran; needImages refuses, before any change, images that no Machine
	// holds and no registry supplies.
	images     map[string]string
	needImages bool
}

func deployCommand() *cobra.Command {
	var f deployFlags
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Make the Cluster run the compose file's Services (plan, confirm, execute, report)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b, err := os.ReadFile(f.file)
			if err != nil {
				return fmt.Errorf("compose file: %w", err)
			}
			return runDeploy(c, b, f, "")
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the plan and stop")
	cmd.Flags().BoolVar(&f.noPrune, "no-prune", false, "keep Services in the namespace that the file no longer declares")
	cmd.Flags().DurationVar(&f.timeout, "ready-timeout", 120*time.Second, "how long each Container may take to become ready")
	cmd.Flags().StringVar(&f.pull, "pull", "", "pull images from their registry: always, missing (default; Machines that lack one pull it) or never")
	cmd.Flags().BoolVar(&f.noBuild, "no-build", false, "deploy the last local build of each build: Service instead of building")
	cmd.Flags().StringArrayVar(&f.buildArgs, "build-arg", nil, "KEY=VALUE build argument for every build: Service (repeatable)")
	cmd.AddCommand(deployLsCommand())
	return cmd
}

// deployResult is deploy's --json document.
type deployResult struct {
	Plan     deploy.Plan     `json:"plan"`
	Outcome  *deploy.Outcome `json:"outcome,omitempty"`
	Snapshot struct {
		Complete   bool                `json:"complete"`
		Unobserved []deploy.Unobserved `json:"unobserved,omitempty"`
	} `json:"snapshot"`
	Removals []removalReport `json:"removals,omitempty"`
	// Timings is where the deploy's time went: its phases and every
	// step that ran, with offsets from the start.
	Timings []deploy.Timing `json:"timings,omitempty"`
}

// runDeploy is the whole deploy pipeline for compose bytes: load,
// observe, plan, confirm, save the revision, execute, report. why
// names the command for a scale or rm ("" for deploy).
func runDeploy(c *cobra.Command, compose []byte, f deployFlags, why string) error {
	if _, err := deploy.ParsePullPolicy(f.pull); err != nil {
		return err
	}
	r := &deployRun{c: c, compose: compose, f: f, why: why, trace: deploy.NewTrace(), errw: c.ErrOrStderr()}
	if err := r.load(); err != nil {
		return err
	}
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	ent, oc, err := entry(c.Context(), st)
	if err != nil {
		return err
	}
	defer ent.Close()
	r.st, r.ent, r.context = st, ent, oc.Name
	if err := r.buildAndDeliver(); err != nil {
		return err
	}
	if err := r.makePlan(); err != nil {
		return err
	}
	if missing := deploy.ImagesNowhere(r.app, r.snap); f.needImages && len(missing) > 0 {
		return errImagesNowhere(missing)
	}
	if f.dryRun {
		if g.json {
			return printJSON(c.OutOrStdout(), r.res)
		}
		return nil
	}
	if r.plan.Changes() > 0 {
		if err := confirm(c, fmt.Sprintf("Deploy %d change(s) to %s?", r.plan.Changes(), r.plan.Namespace)); err != nil {
			return err
		}
	}
	if err := r.save(); err != nil {
		return err
	}
	if r.plan.Changes() == 0 {
		return r.upToDate()
	}
	return r.execute()
}

// deployRun is one runDeploy, one method per step.
type deployRun struct {
	c       *cobra.Command
	compose []byte
	f       deployFlags
	why     string
	trace   *deploy.Trace
	errw    io.Writer

	app      deploy.App
	st       *operator.Store
	ent      *rpc.Client
	context  string
	snap     deploy.Snapshot
	plan     deploy.Plan
	revision int
	res      deployResult
}

func (r *deployRun) load() error {
	var err error
	r.app, err = deploy.Load(r.c.Context(), deploy.Source{Compose: r.compose, Filename: filepath.Base(r.f.file), WorkingDir: filepath.Dir(r.f.file),
		ProjectName: r.f.project, Environment: r.f.env, Env: environ()})
	if err != nil || !r.f.needImages {
		return err
	}
	return pinImages(&r.app, r.f.images, r.why)
}

// buildAndDeliver builds the images the compose file builds and, unless
// this is a dry run, pushes every image to the Machines that miss it:
// images reach Machines without a registry.
func (r *deployRun) buildAndDeliver() error {
	ctx := r.c.Context()
	endBuild := r.trace.Phase("build")
	if err := buildApp(ctx, r.ent, &r.app, nil, r.f.noBuild, r.f.buildArgs, r.errw); err != nil {
		return err
	}
	endBuild()
	if r.f.dryRun {
		return nil
	}
	var imgs []string
	for _, s := range r.app.Services {
		imgs = append(imgs, s.Spec.Image)
	}
	endDeliver := r.trace.Phase("deliver_images")
	pushed, err := images.Deliver(ctx, r.ent, imgs, nil)
	endDeliver()
	if err != nil {
		return err
	}
	for _, p := range pushed {
		switch p.Outcome {
		case "pushed":
			fmt.Fprintf(r.errw, "image delivered to %s (%d bytes)\n", p.MachineName, p.Bytes)
		case "failed":
			fmt.Fprintf(r.errw, "warning: image delivery to %s failed: %s\n", p.MachineName, p.Error)
		}
	}
	return nil
}

// makePlan observes the Cluster and plans against it, printing the plan
// and any pending removal it meets.
func (r *deployRun) makePlan() error {
	ctx := r.c.Context()
	endObserve := r.trace.Phase("observe")
	snap, err := deploy.Observe(ctx, r.ent, "", true)
	endObserve()
	if err != nil {
		return err
	}
	if snap.Salts, err = deploy.SaltSpecs(ctx, r.ent, r.app); err != nil {
		return err
	}
	if err := deploy.ObserveVolumes(ctx, r.ent, r.app, &snap); err != nil {
		return err
	}
	r.snap = snap
	r.res.Snapshot.Complete, r.res.Snapshot.Unobserved = snap.Complete(), snap.Missing
	r.plan, err = deploy.MakePlan(r.app, snap, deploy.PlanOptions{NoPrune: r.f.noPrune, Pull: r.f.pull, Restart: r.f.restart})
	if err != nil {
		return err
	}
	r.res.Plan = r.plan
	if g.json {
		return nil
	}
	printPlan(r.errw, r.plan, r.why)
	marks, _ := r.st.Removals(r.context)
	for _, m := range marks {
		if ns := deploy.Namespace(m.Project, m.Environment); ns == r.plan.Namespace {
			fmt.Fprintf(r.errw, "note: %s has a pending removal; this deploy supersedes it\n", ns)
		} else {
			fmt.Fprintf(r.errw, "note: the pending removal of %s is retried after this deploy\n", ns)
		}
	}
	return nil
}

// save records the compose file as the next Saved State revision; a
// deploy supersedes a pending removal of the same namespace.
func (r *deployRun) save() error {
	saved, err := r.st.SaveState(r.context, r.app.Project, r.app.Environment, r.compose)
	if err != nil {
		return err
	}
	r.revision = saved.Revision
	r.plan.Revision, r.res.Plan.Revision = saved.Revision, saved.Revision
	return r.st.ClearRemoval(r.context, r.app.Project, r.app.Environment)
}

// upToDate reports a plan with nothing to change (after retrying any
// confirmed removal).
func (r *deployRun) upToDate() error {
	r.res.Removals = finishRemovals(r.c.Context(), r.ent, r.st, r.context, r.snap, r.plan.Namespace, r.errw)
	if g.json {
		if err := printJSON(r.c.OutOrStdout(), r.res); err != nil {
			return err
		}
		return pruneRefused(r.plan)
	}
	fmt.Fprintf(r.errw, "%s is up to date (revision %d)\n", r.plan.Namespace, r.revision)
	return pruneRefused(r.plan)
}

// execute runs the plan (Ctrl-C stops between steps) and reports its
// outcome; a partial one exits 3.
func (r *deployRun) execute() error {
	ctx := r.c.Context()
	runCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	auth, err := registryAuth(r.plan)
	if err != nil {
		return err
	}
	rec := recordDeploy(r.st, r.context, r.plan, r.why, r.errw)
	ex := &deploy.Executor{C: r.ent, ReadyTimeout: r.f.timeout, Progress: both(progressPrinter(r.errw), rec.rec.Event), RegistryAuth: auth, Files: r.app.Files}
	endExec := r.trace.Phase("execute")
	out := ex.Run(runCtx, r.plan)
	endExec()
	rec.finish(out)
	r.trace.Steps(out)
	r.res.Outcome = &out
	if runCtx.Err() == nil {
		// Removals confirmed earlier by `ployz project rm` are retried after
		// the plan, so the confirmed rows ran exactly as shown.
		r.res.Removals = finishRemovals(ctx, r.ent, r.st, r.context, r.snap, r.plan.Namespace, r.errw)
	}
	r.res.Timings = r.trace.Timings()
	if g.json {
		if err := printJSON(r.c.OutOrStdout(), r.res); err != nil {
			return err
		}
	} else {
		printOutcome(r.errw, r.plan, out)
	}
	if out.Partial() {
		return &exitError{code: 3, err: fmt.Errorf("deploy of %s revision %d is %s: %d step(s) failed, %d never attempted; rerun `ployz deploy` to continue from what the Machines show",
			r.plan.Namespace, r.revision, out.Status, out.Count(deploy.StepFailed), out.Count(deploy.StepNeverAttempted)), silent: g.json}
	}
	return pruneRefused(r.plan)
}

// pruneRefused makes a refused prune or a held placement a partial
// outcome (exit 3): the declaration is not fully applied.
func pruneRefused(p deploy.Plan) error {
	var why []string
	if p.PruneRefused != "" {
		why = append(why, p.PruneRefused)
	}
	why = append(why, p.Unplaced()...)
	if len(why) == 0 {
		return nil
	}
	return &exitError{code: 3, err: fmt.Errorf("%s is incompletely applied: %s; rerun when every Machine is reachable", p.Namespace, strings.Join(why, "; ")), silent: g.json}
}

func environ() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// confirm asks on the terminal unless -y; without a terminal it refuses.
func confirm(c *cobra.Command, question string) error {
	if g.yes {
		return nil
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return errors.New("refusing to change the Cluster without confirmation: stdin is not a terminal; pass -y to confirm")
	}
	fmt.Fprintf(c.ErrOrStderr(), "%s [y/N] ", question)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return errors.New("not confirmed; nothing changed")
	}
	return nil
}

func printPlan(w io.Writer, p deploy.Plan, why string) {
	if why != "" {
		fmt.Fprintf(w, "%s\n", why)
	}
	fmt.Fprintf(w, "plan for %s (deployment %s)\n", p.Namespace, p.DeploymentID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tSERVICE\tOPERATION\tCONTAINER\tREASON")
	for _, r := range p.Rows {
		op := r.Op
		if r.Strategy != "" {
			op += " (" + r.Strategy + ")"
		}
		if r.Pull {
			op = "pull+" + op
		}
		name := r.OldName
		if r.Op == deploy.OpCreateVolume {
			name = "volume " + r.Volume
		}
		if r.NewName != "" {
			name = r.NewName
			if r.OldName != "" {
				name = r.OldName + " -> " + r.NewName
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Service, op, name, r.Reason)
	}
	tw.Flush()
	printPulls(w, p)
	for _, s := range p.Services {
		for _, in := range s.Ingress {
			if in.Protocol == "tcp" {
				fmt.Fprintf(w, "ingress: tcp/%d -> %s:%d on every Machine's :%d (`ployz service inspect %s` shows it)\n", in.Port, s.Name, in.ContainerPort, in.Port, s.Name)
				continue
			}
			fmt.Fprintf(w, "ingress: %s -> %s:%d on every Machine's :80, and :443 once its certificate is issued (`ployz service inspect %s` shows it)\n", in.Hostname, s.Name, in.ContainerPort, s.Name)
		}
	}
	for _, warn := range p.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
}

// progressPrinter prints one plain line per step start and end; on a
// terminal the start line is a live row that its end overwrites.
func progressPrinter(w io.Writer) func(deploy.Event) {
	live := false
	if f, ok := w.(*os.File); ok {
		live = term.IsTerminal(int(f.Fd()))
	}
	p := &progress{w: w, live: live}
	return p.event
}

// progress prints deploy steps: on a terminal, one live row per step in
// flight (steps on different Machines run at once) under the finished
// steps; otherwise a plain line per start and per end.
type progress struct {
	w        io.Writer
	live     bool
	inflight []inflightStep
	drawn    int // live rows currently on screen
}

type inflightStep struct {
	key, text string
	since     time.Time
}

func stepKey(s deploy.Step) string {
	return fmt.Sprintf("%d/%s/%s/%t", s.Row, s.Action, s.Container, s.Compensation)
}

func stepText(s deploy.Step) string {
	tag := ""
	if s.Compensation {
		tag = " [compensation]"
	}
	return fmt.Sprintf("%s %s %s %s%s", s.Machine, s.Service, s.Action, s.Container, tag)
}

func (p *progress) event(e deploy.Event) {
	s := e.Step
	if e.Pull != nil {
		p.pull(s, *e.Pull)
		return
	}
	if !p.live {
		if !e.Done {
			fmt.Fprintf(p.w, "  ... %s\n", stepText(s))
			return
		}
		fmt.Fprintln(p.w, doneLine(s))
		return
	}
	p.erase()
	key := stepKey(s)
	if e.Done {
		p.inflight = slices.DeleteFunc(p.inflight, func(f inflightStep) bool { return f.key == key })
		fmt.Fprintln(p.w, doneLine(s))
	} else {
		p.inflight = append(p.inflight, inflightStep{key: key, text: stepText(s), since: time.Now()})
	}
	p.draw()
}

// pull shows a running pull's bytes in its live row; without a live
// display a pull prints only its start and end.
func (p *progress) pull(s deploy.Step, pp rpc.PullProgress) {
	if !p.live {
		return
	}
	key := stepKey(s)
	for i := range p.inflight {
		if p.inflight[i].key == key {
			p.inflight[i].text = fmt.Sprintf("%s %s", stepText(s), pullText(pp))
		}
	}
	p.erase()
	p.draw()
}

// pullText is a pull's progress: "12.3 MB of 45.6 MB, 2 of 5 layers".
func pullText(pp rpc.PullProgress) string {
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
	return fmt.Sprintf("%s of %s, %d of %d layers", mb(pp.Bytes), mb(pp.Total), pp.LayersDone, pp.Layers)
}

// draw shows one live row per step in flight.
func (p *progress) draw() {
	for _, f := range p.inflight {
		fmt.Fprintf(p.w, "  ... %s (%s)\n", f.text, time.Since(f.since).Round(time.Second))
	}
	p.drawn = len(p.inflight)
}

// erase removes the live rows drawn last time.
func (p *progress) erase() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\033[%dA\033[J", p.drawn)
	}
	p.drawn = 0
}

func doneLine(s deploy.Step) string {
	mark := "ok "
	if s.Status == deploy.StepFailed {
		mark = "ERR"
	}
	line := fmt.Sprintf("  %s %s (%dms)", mark, stepText(s), s.DurationMS)
	if s.Error != "" {
		line += ": " + s.Error
	}
	return line
}

func printOutcome(w io.Writer, p deploy.Plan, o deploy.Outcome) {
	if p.Revision > 0 {
		fmt.Fprintf(w, "\noutcome of %s revision %d: %s\n", p.Namespace, p.Revision, o.Status)
	} else {
		fmt.Fprintf(w, "\noutcome in %s: %s\n", p.Namespace, o.Status)
	}
	byMachine := map[string][]deploy.Step{}
	var order []string
	for _, s := range o.Steps {
		if _, ok := byMachine[s.Machine]; !ok {
			order = append(order, s.Machine)
		}
		byMachine[s.Machine] = append(byMachine[s.Machine], s)
	}
	for _, m := range order {
		counts := map[string]int{}
		for _, s := range byMachine[m] {
			counts[s.Status]++
		}
		fmt.Fprintf(w, "  %s: %d completed, %d failed, %d never attempted\n", m, counts[deploy.StepCompleted], counts[deploy.StepFailed], counts[deploy.StepNeverAttempted])
		for _, s := range byMachine[m] {
			if s.Status == deploy.StepCompleted {
				continue
			}
			fmt.Fprintf(w, "    %s %s %s %s: %s\n", s.Status, s.Service, s.Action, s.Container, s.Error)
			for _, l := range s.LogTail {
				fmt.Fprintf(w, "      | %s\n", l)
			}
		}
	}
}

// ensure *rpc.Client satisfies the engine's interface.
var _ deploy.Caller = (*rpc.Client)(nil)

// printPulls says which Machines pull which image before their row.
func printPulls(w io.Writer, p deploy.Plan) {
	var order []string
	on := map[string][]string{}
	for _, r := range p.Rows {
		if !r.Pull {
			continue
		}
		if _, ok := on[r.Spec.Image]; !ok {
			order = append(order, r.Spec.Image)
		}
		on[r.Spec.Image] = append(on[r.Spec.Image], r.Machine)
	}
	for _, img := range order {
		fmt.Fprintf(w, "pull: %s on %s, from its registry\n", img, strings.Join(on[img], ", "))
	}
}

// registryAuth reads the operator's Docker credentials for the images the
// plan pulls, once, before anything runs: a pull sends its registry's
// credential and nothing keeps it.
func registryAuth(p deploy.Plan) (func(string) string, error) {
	var pulls []string
	for _, r := range p.Rows {
		if r.Pull {
			pulls = append(pulls, r.Spec.Image)
		}
	}
	return registryAuthFor(pulls)
}

// registryAuthFor reads the operator's Docker credentials for imgs, once:
// a credentials file that cannot be read is an error naming it, never an
// anonymous pull. Nothing to pull reads nothing (a nil func).
func registryAuthFor(imgs []string) (func(string) string, error) {
	if len(imgs) == 0 {
		return nil, nil
	}
	creds, err := images.LoadCredentials()
	if err != nil {
		return nil, err
	}
	enc := map[string]string{}
	for _, img := range imgs {
		if _, ok := enc[img]; ok {
			continue
		}
		a, err := creds.For(img)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", img, err)
		}
		enc[img] = a
	}
	return func(image string) string { return enc[image] }, nil
}
