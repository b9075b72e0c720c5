package containers

import (
	"context"
	"encoding/json"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/ployz/ployz/core/rpc"
)

// exec runs a process inside one of this Machine's Containers and relays
// its stdin and output over the stream (`ployz exec`).
func (o *Ops) exec(ctx context.Context, req rpc.ExecRequest, s rpc.StreamConn) error {
	if len(req.Cmd) == 0 {
		return rpc.InvalidField("cmd", "is empty")
	}
	c, err := o.inspect(ctx, req.ID)
	if err != nil {
		return err
	}
	created, err := o.docker.ContainerExecCreate(ctx, c.ID, container.ExecOptions{
		Cmd: req.Cmd, Tty: req.TTY, AttachStdin: req.Stdin, AttachStdout: true, AttachStderr: true, Env: req.Env})
	if err != nil {
		return dockerErr(err, "exec in container %s", req.ID)
	}
	att, err := o.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: req.TTY})
	if err != nil {
		return dockerErr(err, "attach to exec in container %s", req.ID)
	}
	defer att.Close()
	if req.Stdin {
		go func() {
			for {
				f, err := s.Recv()
				if err != nil || f.EOF {
					att.CloseWrite()
					return
				}
				if _, err := att.Conn.Write(f.Data); err != nil {
					return
				}
			}
		}()
	}
	stdout := frameWriter{s: s}
	stderr := frameWriter{s: s, event: mustJSON(rpc.ExecOutput{Stream: "stderr"})}
	if req.TTY {
		_, err = io.Copy(stdout, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}
	if err != nil && ctx.Err() == nil {
		return rpc.Errorf(rpc.CodeUnavailable, "exec output: %v", err)
	}
	ins, err := o.docker.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return dockerErr(err, "exec in container %s", req.ID)
	}
	return rpc.Exec.Send(s, rpc.ExecExit{ExitCode: ins.ExitCode})
}

// frameWriter sends what is written as data frames, tagged with event.
type frameWriter struct {
	s     rpc.StreamConn
	event json.RawMessage
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.s.Send(rpc.StreamFrame{Data: append([]byte(nil), p...), Event: w.event}); err != nil {
		return 0, err
	}
	return len(p), nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
