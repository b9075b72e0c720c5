package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
)

// execCommand is `ployz exec SERVICE -- CMD...`: a process inside one of
// the Service's Containers, on whichever Machine runs it.
func execCommand() *cobra.Command {
	var f projectFlags
	var interactive, tty bool
	var container string
	cmd := &cobra.Command{
		Use:   "exec [-it] SERVICE -- COMMAND...",
		Short: "Run a command inside a Container of a Service",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				ns, snap, cs, err := f.observeService(c.Context(), s.client(), args[0])
				if err != nil {
					return err
				}
				target, err := client.ExecTarget(args[0], ns, snap, cs, container)
				if err != nil {
					return err
				}
				return runExec(c, s, target, args[1:], interactive, tty)
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "send this terminal's stdin to the process")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "allocate a terminal")
	cmd.Flags().StringVar(&container, "container", "", "a Container name or ID (default: the first running one)")
	return cmd
}

func runExec(c *cobra.Command, s session, co rpc.ContainerObservation, argv []string, interactive, tty bool) error {
	ctx := c.Context()
	st, err := s.ent.OpenStream(ctx, rpc.Target{One: co.MachineID}, rpc.CmdExec, rpc.ExecRequest{ID: co.ID, Cmd: argv, TTY: tty, Stdin: interactive})
	if err != nil {
		return err
	}
	defer st.Close()
	if tty && term.IsTerminal(int(os.Stdin.Fd())) {
		old, err := term.MakeRaw(int(os.Stdin.Fd()))
		if err == nil {
			defer term.Restore(int(os.Stdin.Fd()), old) //nolint:errcheck // best effort on the way out
		}
	}
	if interactive {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := os.Stdin.Read(buf)
				if n > 0 && st.Send(rpc.StreamFrame{Data: append([]byte(nil), buf[:n]...)}) != nil {
					return
				}
				if err != nil {
					st.CloseSend() //nolint:errcheck // the process sees EOF or the stream is gone
					return
				}
			}
		}()
	}
	code := 0
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		if f.Done {
			break
		}
		if len(f.Data) > 0 {
			var out rpc.ExecOutput
			json.Unmarshal(f.Event, &out) //nolint:errcheck // no event: stdout
			if out.Stream == "stderr" {
				c.ErrOrStderr().Write(f.Data)
			} else {
				c.OutOrStdout().Write(f.Data)
			}
			continue
		}
		var ex rpc.ExecExit
		if json.Unmarshal(f.Event, &ex) == nil {
			code = ex.ExitCode
		}
	}
	if code != 0 {
		return &exitError{code: code, err: fmt.Errorf("exit %d", code), silent: true}
	}
	return nil
}
