package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/rpc"
)

// runFlags are `ployz run`'s options.
type runFlags struct {
	project projectFlags
	machine string
	detach  bool
	keep    bool
	noTTY   bool
}

// runCommand is `ployz run SERVICE [-- COMMAND...]`: a one-off Container
// of the Service's current deployment.
func runCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run SERVICE [-- COMMAND...]",
		Short: "Run a one-off command in a new Container of a Service's current deployment",
		Long: `Run a one-off command (a migration, a console, a report) in a new Container
made from the Service's current deployment: its image, environment, shipped
files and config, volumes and network, on a Machine holding the Service (or
--machine). COMMAND replaces the image's entrypoint and the Service's command;
without it the Service's own command runs.

Attached (the default), the terminal is the process's: stdin is sent, stdout
and stderr come back apart, a terminal is allocated when stdin and stdout are
terminals (-T: never), and signals are forwarded (a third Ctrl-C leaves and
stops the run). ployz exits with the command's exit code. --detach starts it
and prints the Container and how to follow its logs.

Its output goes to the Log Store like any Container's (ployz logs SERVICE).
It is never one of the Service's replicas: not counted, not ready, never in
DNS or ingress. It is removed once it ended, unless --keep.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if g.json && !f.detach {
				return errors.New("--json: only with --detach (attached, the command's own output is printed)")
			}
			return withClient(c, func(s *client.Session) error {
				ns, err := f.project.namespace(c.Context(), s)
				if err != nil {
					return err
				}
				req := client.RunRequest{Namespace: ns, Service: args[0], Command: args[1:], Machine: f.machine, Detach: f.detach, Keep: f.keep}
				if f.detach {
					return runDetached(c, s, f, req)
				}
				return runAttached(c, s, f, req)
			})
		},
	}
	f.project.add(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&f.machine, "machine", "", "run on this Machine (name or id; default: one holding the Service)")
	fl.BoolVarP(&f.detach, "detach", "d", false, "start it and return; print its Container and how to read its logs")
	fl.BoolVar(&f.keep, "keep", false, "keep its Container after it ended (default: removed)")
	fl.BoolVarP(&f.noTTY, "no-tty", "T", false, "never allocate a terminal")
	return cmd
}

func runDetached(c *cobra.Command, s *client.Session, f runFlags, req client.RunRequest) error {
	p, err := s.PlanRun(c.Context(), req)
	if err != nil {
		return err
	}
	res, err := s.Run(c.Context(), p, req, client.RunIO{})
	out := client.Detached(res, req.Service, f.project.project, f.project.env)
	return show(c, out, err, func(w io.Writer) error { render.DetachedRun(w, out, req.Keep); return nil })
}

// runAttached runs req with this terminal and exits with its exit code.
func runAttached(c *cobra.Command, s *client.Session, f runFlags, req client.RunRequest) error {
	stdin := c.InOrStdin()
	in, out := terminalFd(stdin), terminalFd(c.OutOrStdout())
	req.Stdin = true
	req.TTY = !f.noTTY && in >= 0 && out >= 0
	if req.TTY {
		w, h, err := term.GetSize(out)
		if err == nil {
			req.Width, req.Height = uint16(w), uint16(h)
		}
	}
	p, err := s.PlanRun(c.Context(), req)
	if err != nil {
		return err
	}
	if terminalFd(c.ErrOrStderr()) >= 0 {
		fmt.Fprintf(c.ErrOrStderr(), "ployz: running in %s on %s (deployment %s)\r\n", p.Name, p.Machine, p.Spec.DeploymentID)
	}
	if req.TTY {
		if old, err := term.MakeRaw(in); err == nil {
			defer term.Restore(in, old) // best effort on the way out
		}
	}
	ctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	ctl := forwardSignals(ctx, cancel, c.ErrOrStderr(), out)
	res, err := s.Run(ctx, p, req, client.RunIO{Stdin: stdin, Stdout: c.OutOrStdout(), Stderr: c.ErrOrStderr(), Control: ctl})
	if err != nil {
		if ctx.Err() != nil && c.Context().Err() == nil {
			return &exitError{code: 130, err: fmt.Errorf("left the run; %s on %s is being stopped", p.Name, p.Machine)}
		}
		return err
	}
	if res.Note != "" {
		fmt.Fprintf(c.ErrOrStderr(), "ployz: %s: %s\n", p.Name, res.Note)
	}
	if res.ExitCode == nil {
		return fmt.Errorf("run %s on %s ended without an exit code", p.Name, p.Machine)
	}
	if *res.ExitCode != 0 {
		return &exitError{code: *res.ExitCode, err: fmt.Errorf("exit %d", *res.ExitCode), silent: true}
	}
	return nil
}

// terminalFd is v's file descriptor when v is a terminal, else -1.
func terminalFd(v any) int {
	f, ok := v.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return -1
	}
	return int(f.Fd())
}

// forwardSignals turns this process's signals into a run's control
// events until ctx ends: a terminal resize into its size (of fd), the
// others into the signal; the third SIGINT cancels instead, which
// leaves the run (its Machine then stops it).
func forwardSignals(ctx context.Context, cancel context.CancelFunc, stderr io.Writer, fd int) <-chan rpc.RunControl {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	ctl := make(chan rpc.RunControl, 8)
	go func() {
		defer signal.Stop(sigs)
		interrupts := 0
		for {
			var sig os.Signal
			select {
			case <-ctx.Done():
				return
			case sig = <-sigs:
			}
			ev := rpc.RunControl{Signal: signalName(sig)}
			switch {
			case sig == syscall.SIGWINCH:
				w, h, err := term.GetSize(fd)
				if err != nil {
					continue
				}
				ev = rpc.RunControl{Width: uint16(w), Height: uint16(h)}
			case sig == syscall.SIGINT:
				if interrupts++; interrupts == 3 {
					fmt.Fprintln(stderr, "ployz: third interrupt: leaving the run")
					cancel()
					return
				}
			}
			select {
			case ctl <- ev:
			default: // a run that does not take them: drop, never block
			}
		}
	}()
	return ctl
}

// signalName is sig's name as RunSignals spell it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return ""
}
