package fakecluster

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/ployz/ployz/core/rpc"
)

// capabilities are what every Machine's list_machines row says it
// serves: run_container unless Options.Unsupported names it.
func (fc *Cluster) capabilities() []string {
	if slices.Contains(fc.o.Unsupported, rpc.CmdRunContainer) {
		return nil
	}
	return []string{rpc.CapRunContainer}
}

// run serves run_container with a pretend process: it records a
// Container of kind run, answers it started, and unless detached writes
// its argv on stdout, echoes its stdin there until EOF, names its
// Container on stderr and exits with N for argv ending "exit N" (else
// 0); argv ending "wait" waits for a signal instead, says it on stderr
// and exits 130. Ended, it is removed unless kept.
func (fc *Cluster) run(m *Machine) rpc.StreamHandler {
	return func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
		var req rpc.RunContainerRequest
		if err := rpc.Decode(rpc.CmdRunContainer, raw, &req); err != nil {
			return err
		}
		if err := req.Validate(); err != nil {
			return err
		}
		fc.mu.Lock()
		m.Calls = append(m.Calls, rpc.CmdRunContainer)
		m.Runs = append(m.Runs, req)
		if _, err := m.Find(req.Name); err == nil {
			fc.mu.Unlock()
			return rpc.Errorf(rpc.CodeConflict, "name: a Container %q exists", req.Name)
		}
		c := fc.add(m, rpc.ContainerExport{Name: req.Name, Spec: req.Spec, Files: req.Files}, "running")
		c.Keep = req.Keep
		fc.mu.Unlock()
		if err := sendEvent(s, rpc.RunEvent{Started: &rpc.RunStarted{ID: c.ID, Name: c.Name, MachineID: m.id}}); err != nil {
			return err
		}
		if req.Detach {
			return nil
		}
		argv := append(append([]string(nil), req.Spec.Entrypoint...), req.Spec.Command...)
		code, err := fc.pretend(s, c, argv, req.Stdin)
		if err != nil {
			return err
		}
		fc.mu.Lock()
		ex := rpc.RunExited{ExitCode: code}
		if c.Keep {
			c.State = "exited"
		} else {
			delete(m.Ctrs, c.ID)
			ex.Removed = true
		}
		fc.mu.Unlock()
		return sendEvent(s, rpc.RunEvent{Exited: &ex})
	}
}

// pretend is run's pretend process; it answers its exit code.
func (fc *Cluster) pretend(s rpc.StreamConn, c *Container, argv []string, stdin bool) (int, error) {
	stderr, _ := json.Marshal(rpc.ExecOutput{Stream: "stderr"})
	if err := s.Send(rpc.StreamFrame{Data: []byte(strings.Join(argv, " ") + "\n")}); err != nil {
		return 0, err
	}
	waits := len(argv) > 0 && argv[len(argv)-1] == "wait"
	for stdin || waits {
		f, err := s.Recv()
		if err != nil {
			return 0, err
		}
		if len(f.Data) > 0 {
			if err := s.Send(rpc.StreamFrame{Data: f.Data}); err != nil {
				return 0, err
			}
		}
		stdin = stdin && !f.EOF
		var ctl rpc.RunControl
		if len(f.Event) > 0 && json.Unmarshal(f.Event, &ctl) == nil && ctl.Signal != "" && waits {
			return 130, s.Send(rpc.StreamFrame{Data: []byte("got " + ctl.Signal + "\n"), Event: stderr})
		}
	}
	if err := s.Send(rpc.StreamFrame{Data: []byte("in " + c.Name + "\n"), Event: stderr}); err != nil {
		return 0, err
	}
	if n := len(argv); n >= 2 && argv[n-2] == "exit" {
		code, _ := strconv.Atoi(argv[n-1])
		return code, nil
	}
	return 0, nil
}

func sendEvent(s rpc.StreamConn, e rpc.RunEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.Send(rpc.StreamFrame{Event: b})
}
