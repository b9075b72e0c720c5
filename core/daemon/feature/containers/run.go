package containers

// run_container (core/rpc/run.go): one-off Containers of kind run, for
// `ployz run`. They are created through create_container's own path,
// never counted as replicas (list_containers leaves them out unless
// asked), never ready, and removed here once they ended and the Log
// Store holds their output, unless kept.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/ployz/ployz/core/rpc"
)

const (
	// runLogsWait bounds how long an ended run waits for the Log Store
	// to hold its last line before it is removed anyway (the store reads
	// Docker's files twice a second; a removed Container's files it has
	// not opened yet are lost).
	runLogsWait = 15 * time.Second
	// runOrphanAfter: an ended run whose output the Log Store still does
	// not hold, or one created and never started, is removed this long
	// after, by the reaper.
	runOrphanAfter = time.Minute
	// runStopWait bounds stopping a run whose client went away.
	runStopWait = 60 * time.Second
)

// runRegistry names the runs an attached handler of this process serves:
// the reaper leaves them to it.
type runRegistry struct {
	mu    sync.Mutex
	names map[string]bool
}

// own marks name served until the returned func is called.
func (r *runRegistry) own(name string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.names, name)
	}
}

func (r *runRegistry) owns(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[name]
}

// runContainer serves run_container.
func (o *Ops) runContainer(ctx context.Context, req rpc.RunContainerRequest, s rpc.StreamConn) error {
	if err := req.Validate(); err != nil {
		return err
	}
	req.Spec.Kind = rpc.KindRun
	conn := &lockedConn{s: s}
	if !req.Detach {
		defer o.runs.own(req.Name)() // before it exists: the reaper must not stop it
	}
	ob, err := o.create(ctx, req.CreateContainerRequest, runCreate(req))
	if err != nil {
		return err
	}
	if req.Detach {
		if _, err := o.start(ctx, ob.ID); err != nil {
			o.discardRun(ctx, ob.ID)
			return err
		}
		return conn.event(rpc.RunEvent{Started: &rpc.RunStarted{ID: ob.ID, Name: ob.Name, MachineID: ob.MachineID}})
	}
	return o.attachRun(ctx, req, ob, conn)
}

// runCreate adjusts Docker's create request for a run: its terminal, and
// the labels the reaper reads.
func runCreate(req rpc.RunContainerRequest) func(*dockerCreate) {
	return func(dc *dockerCreate) {
		c := dc.config
		c.Tty, c.OpenStdin, c.StdinOnce, c.AttachStdin = req.TTY, req.Stdin, req.Stdin, req.Stdin
		c.AttachStdout, c.AttachStderr = !req.Detach, !req.Detach
		if req.Keep {
			c.Labels[rpc.LabelRunKeep] = "1"
		}
		if !req.Detach {
			c.Labels[rpc.LabelRunAttached] = "1"
		}
		if req.TTY && req.Width > 0 {
			dc.host.ConsoleSize = [2]uint{uint(req.Height), uint(req.Width)}
		}
	}
}

// attachRun relays a started run's terminal until its process ends, then
// reports how it ended. The run outlives the client's context: a client
// that goes away has it stopped, then removed unless kept.
func (o *Ops) attachRun(ctx context.Context, req rpc.RunContainerRequest, ob rpc.ContainerObservation, conn *lockedConn) error {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	att, err := o.docker.ContainerAttach(rctx, ob.ID, container.AttachOptions{Stream: true, Stdin: req.Stdin, Stdout: true, Stderr: true})
	if err != nil {
		o.discardRun(rctx, ob.ID)
		return dockerErr(err, "attach to run %s", ob.Name)
	}
	defer att.Close()
	// Waited for before the start, so even an instant exit is seen.
	waitC, errC := o.docker.ContainerWait(rctx, ob.ID, container.WaitConditionNextExit)
	if _, err := o.start(ctx, ob.ID); err != nil {
		o.discardRun(rctx, ob.ID)
		return err
	}
	conn.event(rpc.RunEvent{Started: &rpc.RunStarted{ID: ob.ID, Name: ob.Name, MachineID: ob.MachineID}}) // a gone client is handled below
	if req.TTY && req.Width > 0 {
		o.resizeRun(rctx, ob.ID, req.Width, req.Height)
	}
	stop := context.AfterFunc(ctx, func() { o.stopRun(ob.ID, "its client went away") })
	defer stop()
	go o.relayInput(rctx, ob.ID, req.Stdin, att, conn)
	out := &drainWriter{w: frameWriter{s: conn}}
	errw := &drainWriter{w: frameWriter{s: conn, event: mustJSON(rpc.ExecOutput{Stream: "stderr"})}}
	if req.TTY {
		io.Copy(out, att.Reader) // ends with the process's output
	} else {
		stdcopy.StdCopy(out, errw, att.Reader) // ends with the process's output
	}
	ex := o.runExit(rctx, ob.ID, waitC, errC)
	stop()
	if req.Keep {
		ex.Note = "kept: remove it with `docker rm` on its Machine"
	} else {
		ex.Removed, ex.Note = o.removeRun(rctx, ob.ID)
	}
	return conn.event(rpc.RunEvent{Exited: &ex})
}

// runExit is how the run's process ended: Docker's wait, else its state.
func (o *Ops) runExit(ctx context.Context, id string, waitC <-chan container.WaitResponse, errC <-chan error) rpc.RunExited {
	var ex rpc.RunExited
	select {
	case w := <-waitC:
		ex.ExitCode = int(w.StatusCode)
	case err := <-errC:
		o.log.Warn("run: wait", "container", short(id), "error", err)
		if c, ierr := o.docker.ContainerInspect(ctx, id); ierr == nil && c.State != nil {
			ex.ExitCode = c.State.ExitCode
		}
	}
	if c, err := o.docker.ContainerInspect(ctx, id); err == nil && c.State != nil {
		ex.OOMKilled = c.State.OOMKilled
	}
	return ex
}

// relayInput passes the client's frames to the run until the stream
// ends: data to its stdin (EOF closes it), events as signals and sizes.
func (o *Ops) relayInput(ctx context.Context, id string, stdin bool, att types.HijackedResponse, conn *lockedConn) {
	for {
		f, err := conn.s.Recv()
		if err != nil {
			return
		}
		if stdin && len(f.Data) > 0 {
			if _, err := att.Conn.Write(f.Data); err != nil {
				stdin = false
			}
		}
		if f.EOF && stdin {
			att.CloseWrite() // the process sees EOF or is gone
			stdin = false
		}
		if len(f.Event) > 0 {
			o.control(ctx, id, f.Event)
		}
	}
}

// control applies one RunControl; a malformed one is logged, not fatal:
// the run's terminal matters more than one bad event.
func (o *Ops) control(ctx context.Context, id string, raw json.RawMessage) {
	var c rpc.RunControl
	if err := json.Unmarshal(raw, &c); err != nil {
		o.log.Warn("run: malformed control event", "container", short(id), "error", err)
		return
	}
	if err := c.Validate(); err != nil {
		o.log.Warn("run: control event refused", "container", short(id), "error", err)
		return
	}
	if c.Signal != "" {
		if err := o.docker.ContainerKill(ctx, id, c.Signal); err != nil {
			o.log.Debug("run: signal", "container", short(id), "signal", c.Signal, "error", err)
		}
	}
	if c.Width > 0 {
		o.resizeRun(ctx, id, c.Width, c.Height)
	}
}

func (o *Ops) resizeRun(ctx context.Context, id string, w, h uint16) {
	if err := o.docker.ContainerResize(ctx, id, container.ResizeOptions{Width: uint(w), Height: uint(h)}); err != nil {
		o.log.Debug("run: resize", "container", short(id), "error", err)
	}
}

// stopRun stops a run nobody is attached to any more, as a Machine's
// shutdown would (its stop signal and grace period).
func (o *Ops) stopRun(id, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), runStopWait)
	defer cancel()
	o.log.Info("run: stopping", "container", short(id), "why", why)
	if err := o.docker.ContainerStop(ctx, id, container.StopOptions{}); err != nil {
		o.log.Warn("run: stop", "container", short(id), "error", err)
	}
}

// discardRun removes a run that could not be started or attached.
func (o *Ops) discardRun(ctx context.Context, id string) {
	if _, err := o.remove(context.WithoutCancel(ctx), id, true); err != nil {
		o.log.Warn("run: remove a run that did not start", "container", short(id), "error", err)
	}
}

// removeRun removes an ended run once the Log Store holds its output (or
// runLogsWait passed); note says what could not be confirmed.
func (o *Ops) removeRun(ctx context.Context, id string) (removed bool, note string) {
	if err := o.awaitLogs(ctx, id); err != nil {
		note = fmt.Sprintf("its output may be missing from `ployz logs`: %v", err)
		o.log.Warn("run: removing before the Log Store confirmed its output", "container", short(id), "error", err)
	}
	if _, err := o.remove(ctx, id, true); err != nil {
		return false, fmt.Sprintf("not removed: %v", err)
	}
	return true, note
}

// awaitLogs waits until the Log Store holds id's last line, at most
// runLogsWait.
func (o *Ops) awaitLogs(ctx context.Context, id string) error {
	deadline := time.Now().Add(runLogsWait)
	for {
		held, err := o.logsSettled(ctx, id)
		if held || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Log Store did not hold its last line within %s", runLogsWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logsSettled reports whether the Log Store holds id's last line (true
// for a Container that wrote nothing, or on a Machine without the
// logsHeld hook); an error says the Log Store cannot be asked.
func (o *Ops) logsSettled(ctx context.Context, id string) (bool, error) {
	if o.logsHeld == nil {
		return true, nil
	}
	last, err := o.lastLogTime(ctx, id)
	if err != nil || last == 0 {
		return last == 0, err
	}
	return o.logsHeld(ctx, id, last)
}

// lastLogTime is the time of id's last line of output as Docker's log
// file has it (0: none), the same time the Log Store stores it under.
func (o *Ops) lastLogTime(ctx context.Context, id string) (int64, error) {
	c, err := o.inspect(ctx, id)
	if err != nil {
		return 0, err
	}
	rc, err := o.docker.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: "1"})
	if err != nil {
		return 0, dockerErr(err, "logs of container %s", short(id))
	}
	defer rc.Close()
	var b lastLine
	if c.Config != nil && c.Config.Tty {
		_, err = io.Copy(&b, rc)
	} else {
		_, err = stdcopy.StdCopy(&b, &b, rc)
	}
	if err != nil {
		return 0, fmt.Errorf("logs of container %s: %w", short(id), err)
	}
	return b.time()
}

// lastLine keeps what Docker wrote of a timestamped log tail.
type lastLine struct{ b []byte }

func (l *lastLine) Write(p []byte) (int, error) {
	if len(l.b) < 4096 {
		l.b = append(l.b, p[:min(len(p), 4096-len(l.b))]...)
	}
	return len(p), nil
}

// time parses the tail's leading RFC 3339 timestamp (0 when empty).
func (l *lastLine) time() (int64, error) {
	if len(l.b) == 0 {
		return 0, nil
	}
	ts, _, _ := bytes.Cut(l.b, []byte(" "))
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return 0, fmt.Errorf("log tail %q: %w", ts, err)
	}
	return t.UnixNano(), nil
}

// lockedConn is a StreamConn whose sends may come from several
// goroutines (output, stderr and events); one goroutine receives.
type lockedConn struct {
	mu sync.Mutex
	s  rpc.StreamConn
}

func (c *lockedConn) Send(f rpc.StreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.Send(f)
}

func (c *lockedConn) Recv() (rpc.StreamFrame, error) { return c.s.Recv() }

func (c *lockedConn) event(e rpc.RunEvent) error { return rpc.RunContainer.Send(c, e) }

// drainWriter writes to w until it fails (the client went away), then
// drops what comes, so the process's output is still read to its end.
type drainWriter struct {
	w      io.Writer
	failed bool
}

func (d *drainWriter) Write(p []byte) (int, error) {
	if !d.failed {
		if _, err := d.w.Write(p); err != nil {
			d.failed = true
		}
	}
	return len(p), nil
}
