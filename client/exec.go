package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// ExecTarget is the Container of service (in ns, observed as cs from
// snap) a command runs in: the first running one, or the running one
// named container (a name or an ID) when container is set.
func ExecTarget(service, ns string, snap deploy.Snapshot, cs []rpc.ContainerObservation, container string) (rpc.ContainerObservation, error) {
	for _, co := range cs {
		if container != "" && co.Name != container && co.ID != container {
			continue
		}
		if co.State == "running" {
			return co, nil
		}
	}
	if len(cs) == 0 {
		return rpc.ContainerObservation{}, NoService(service, ns, snap)
	}
	named := ""
	if container != "" {
		named = " named " + container
	}
	return rpc.ContainerObservation{}, fmt.Errorf("service %s in %s has no running Container%s", service, ns, named)
}

// ExecIO is where a process's output goes and, when Stdin is set, what
// it reads (its end closes the process's stdin).
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Exec runs argv in co on its Machine (a terminal allocated with tty),
// copying its output to o as it arrives, and returns its exit code.
func (s *Session) Exec(ctx context.Context, co rpc.ContainerObservation, argv []string, tty bool, o ExecIO) (int, error) {
	st, err := rpc.Open(ctx, s.ent, rpc.Target{One: co.MachineID}, rpc.Exec, rpc.ExecRequest{ID: co.ID, Cmd: argv, TTY: tty, Stdin: o.Stdin != nil})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if o.Stdin != nil {
		go pumpStdin(o.Stdin, st.Send, func() { st.CloseSend() }) // the process sees EOF or the stream is gone
	}
	code := 0
	for {
		f, err := st.Recv()
		if err != nil {
			return 0, err
		}
		if f.Done {
			return code, nil
		}
		if writeOutput(f, o.Stdout, o.Stderr) {
			continue
		}
		if ex, err := rpc.Exec.Event(f); err == nil {
			code = ex.ExitCode
		}
	}
}

// writeOutput writes a data frame of a process's output to stdout, or to
// stderr when its event says so (exec's and run_container's framing),
// and reports whether f was one.
func writeOutput(f rpc.StreamFrame, stdout, stderr io.Writer) bool {
	if len(f.Data) == 0 {
		return false
	}
	var out rpc.ExecOutput
	json.Unmarshal(f.Event, &out) // no event: stdout
	if out.Stream == "stderr" {
		stderr.Write(f.Data) // the terminal's, not ours to fail on
	} else {
		stdout.Write(f.Data) // the terminal's, not ours to fail on
	}
	return true
}

// pumpStdin sends what r gives as data frames until it ends, then calls
// eof, so the process sees its input end.
func pumpStdin(r io.Reader, send func(rpc.StreamFrame) error, eof func()) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && send(rpc.StreamFrame{Data: append([]byte(nil), buf[:n]...)}) != nil {
			return
		}
		if err != nil {
			eof()
			return
		}
	}
}

// ServiceExecTarget observes service's Containers in ns and picks the one
// a command runs in (ExecTarget).
func (s *Session) ServiceExecTarget(ctx context.Context, ns, service, container string) (rpc.ContainerObservation, error) {
	snap, cs, err := s.ServiceContainers(ctx, ns, service)
	if err != nil {
		return rpc.ContainerObservation{}, err
	}
	return ExecTarget(service, ns, snap, cs, container)
}
