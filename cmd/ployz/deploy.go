package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
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
// name, else the only project with a Saved State.
func (f *projectFlags) resolveProject(ctx context.Context, s *client.Session) (string, error) {
	return s.ProjectName(ctx, f.project, f.env, "compose.yaml")
}

// namespace is the namespace of the project f names (resolveProject).
func (f *projectFlags) namespace(ctx context.Context, s *client.Session) (string, error) {
	return s.Namespace(ctx, f.project, f.env, "compose.yaml")
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
			return runDeploy(c, b, f)
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

// request is the library's Deploy request for compose bytes.
func (f deployFlags) request(compose []byte, errw io.Writer) client.DeployRequest {
	return client.DeployRequest{Compose: compose, File: f.file, Project: f.project, Environment: f.env, Env: client.Environ(),
		NoPrune: f.noPrune, Pull: f.pull, NoBuild: f.noBuild, BuildArgs: f.buildArgs, Restart: f.restart, ReadyTimeout: f.timeout,
		DryRun: f.dryRun, BuildLog: errw, BuildOutput: buildLog(errw)}
}

// runDeploy is `ployz deploy`: plan, show, confirm, apply, report.
func runDeploy(c *cobra.Command, compose []byte, f deployFlags) error {
	req := f.request(compose, c.ErrOrStderr())
	if err := req.Validate(); err != nil {
		return err
	}
	return withClient(c, func(s *client.Session) error {
		dp, err := s.PlanDeploy(c.Context(), req)
		if err != nil {
			return err
		}
		return showOrApply(c, s, dp, f.dryRun)
	})
}

// showOrApply prints a dry run's plan (and its --json document), or
// confirms and applies it.
func showOrApply(c *cobra.Command, s *client.Session, dp *client.DeployPlan, dryRun bool) error {
	if !dryRun {
		return confirmAndApply(c, s, dp)
	}
	showPlan(c, dp)
	if g.json {
		return printJSON(c.OutOrStdout(), dp.Result())
	}
	return nil
}

// showPlan prints a planned Deploy on stderr (only its image deliveries
// under --json: the document carries the plan).
func showPlan(c *cobra.Command, dp *client.DeployPlan) {
	if g.json {
		render.Deliveries(c.ErrOrStderr(), dp.Deliveries)
		return
	}
	render.DeployPlan(c.ErrOrStderr(), dp)
}

// confirmPlan shows a planned Deploy and asks before it changes anything.
func confirmPlan(c *cobra.Command, dp *client.DeployPlan) error {
	showPlan(c, dp)
	if dp.Plan.Changes() == 0 {
		return nil
	}
	return confirm(c, fmt.Sprintf("Deploy %d change(s) to %s?", dp.Plan.Changes(), dp.Plan.Namespace))
}

// confirmAndApply shows and confirms a planned Deploy, applies it (Ctrl-C
// stops between steps) and reports its result; a partial one exits 3.
func confirmAndApply(c *cobra.Command, s *client.Session, dp *client.DeployPlan) error {
	if err := confirmPlan(c, dp); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := s.ApplyDeploy(ctx, dp, cliHooks(c))
	if err != nil && !client.IsPartial(err) {
		return err
	}
	if g.json {
		if perr := printJSON(c.OutOrStdout(), res); perr != nil {
			return perr
		}
	} else {
		render.DeployResult(c.ErrOrStderr(), res)
	}
	return exitFor(err, g.json)
}

// cliHooks print a running operation's steps, removals and warnings on
// stderr, with live rows on a terminal.
func cliHooks(c *cobra.Command) client.Hooks {
	w := c.ErrOrStderr()
	live := false
	if f, ok := w.(*os.File); ok {
		live = term.IsTerminal(int(f.Fd()))
	}
	return render.Hooks(w, live)
}

// confirm asks on the terminal unless -y; without a terminal it refuses.
func confirm(c *cobra.Command, question string) error {
	if g.yes {
		return nil
	}
	line, ok := askLine(c, question+" [y/N] ")
	if !ok {
		return errors.New("refusing to change the Cluster without confirmation: stdin is not a terminal; pass -y to confirm")
	}
	if a := strings.ToLower(line); a != "y" && a != "yes" {
		return errors.New("not confirmed; nothing changed")
	}
	return nil
}

// askLine prints prompt and reads one trimmed line from a terminal stdin;
// ok is false, with nothing printed, when stdin is no terminal.
func askLine(c *cobra.Command, prompt string) (line string, ok bool) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return "", false
	}
	fmt.Fprint(c.ErrOrStderr(), prompt)
	line, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return strings.TrimSpace(line), true
}
