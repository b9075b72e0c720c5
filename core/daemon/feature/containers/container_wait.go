package containers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
)

// Readiness wait bounds and the log tail a failed wait carries.
const (
	waitReadyDefault = 60 * time.Second
	waitReadyMax     = 10 * time.Minute
	waitReadyPoll    = 150 * time.Millisecond
	failureLogTail   = 30
	// noneSettle is how long a readiness-none Container must have run
	// (Docker's own state says running) before wait_ready calls it ready,
	// so a crash on start is caught; Docker reports the start itself, so
	// only the first moments of the process need this grace.
	noneSettle = 250 * time.Millisecond
)

// wait_ready outcomes.
const (
	outcomeReady      = "ready"
	outcomeExited     = "exited"
	outcomeRestarting = "restarting"
	outcomeUnhealthy  = "unhealthy"
	outcomeTimeout    = "timeout"
)

func (o *Ops) waitReady(ctx context.Context, req rpc.WaitReadyRequest) (rpc.WaitReadyResult, error) {
	if req.TimeoutSeconds < 0 {
		return rpc.WaitReadyResult{}, rpc.InvalidField("timeout_seconds", "%d is negative", req.TimeoutSeconds)
	}
	timeout := min(time.Duration(req.TimeoutSeconds)*time.Second, waitReadyMax)
	if timeout == 0 {
		timeout = waitReadyDefault
	}
	o.restore(ctx)
	if req.ID == "" {
		return rpc.WaitReadyResult{}, rpc.InvalidField("id", "is empty")
	}
	// Die events carry the exit code Docker resets when it restarts a
	// Container, and wake the wait at once. Subscribed before the baseline
	// inspection so no death after it is missed.
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, errs := o.docker.Events(ectx, events.ListOptions{Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("container", req.ID), filters.Arg("event", string(events.ActionDie)))})
	first, err := o.inspect(ctx, req.ID)
	if err != nil {
		return rpc.WaitReadyResult{}, err
	}
	id, restarts := first.ID, first.RestartCount
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(waitReadyPoll)
	defer tick.Stop()
	lastExit := -1
	exitOf := func(m events.Message) {
		if n, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
			lastExit = n
		}
	}
	for {
		c, err := o.inspect(ctx, id)
		if err != nil {
			return rpc.WaitReadyResult{}, err
		}
		if res, done := o.judge(c, restarts); done {
			if res.Outcome == outcomeReady {
				return res, nil
			}
			if res.ExitCode == 0 && res.Outcome == outcomeRestarting && lastExit < 0 {
				// Docker already restarted it: its die event tells the code.
				select {
				case m := <-msgs:
					exitOf(m)
				case <-time.After(time.Second):
				}
			}
			if res.ExitCode == 0 && lastExit > 0 {
				res.ExitCode = lastExit
			}
			if res.Outcome == outcomeRestarting {
				res.Message += fmt.Sprintf(", last exit code %d", res.ExitCode)
			}
			res.LogTail = o.logTail(ctx, id)
			return res, nil
		}
		wake := tick.C
		if left := settleLeft(c); left > 0 && left < waitReadyPoll {
			wake = time.After(left) // judge again the moment it settles
		}
		select {
		case m := <-msgs:
			exitOf(m)
		case <-wake:
		case <-errs:
			errs = nil // polling alone still decides
		case <-ctx.Done():
			return rpc.WaitReadyResult{}, rpc.Errorf(rpc.CodeUnavailable, "wait_ready for %s: %v", req.ID, ctx.Err())
		case <-deadline.C:
			res := rpc.WaitReadyResult{Outcome: outcomeTimeout, LogTail: o.logTail(ctx, id),
				Message: fmt.Sprintf("not ready after %s (state %s%s)", timeout, c.State.Status, healthSuffix(c))}
			return res, nil
		}
	}
}

// judge decides a readiness wait from one inspection: done is false while
// the Container may still become ready.
func (o *Ops) judge(c container.InspectResponse, restarts int) (rpc.WaitReadyResult, bool) {
	st := c.State
	switch {
	case st == nil:
		return rpc.WaitReadyResult{}, false
	case o.ready.verdict(c) && settled(c) && !isHook(c):
		return rpc.WaitReadyResult{Outcome: outcomeReady}, true
	case st.Restarting || c.RestartCount > restarts:
		return rpc.WaitReadyResult{Outcome: outcomeRestarting, ExitCode: st.ExitCode,
			Message: fmt.Sprintf("restarting (restart count %d)", c.RestartCount)}, true
	case st.Status == "exited" || st.Status == "dead":
		return rpc.WaitReadyResult{Outcome: outcomeExited, ExitCode: st.ExitCode,
			Message: fmt.Sprintf("exited with code %d%s", st.ExitCode, feature.ErrSuffix(st.Error))}, true
	case st.Health != nil && st.Health.Status == container.Unhealthy:
		return rpc.WaitReadyResult{Outcome: outcomeUnhealthy, Message: "healthcheck reports unhealthy" + lastProbe(st.Health)}, true
	}
	return rpc.WaitReadyResult{}, false
}

// isHook reports whether c is a one-shot hook, whose wait ends only when
// it exits (outcome exited; exit code 0 is success).
func isHook(c container.InspectResponse) bool {
	return c.Config != nil && c.Config.Labels[rpc.LabelKind] == rpc.KindHook
}

// isRun reports whether c is a one-off run (`ployz run`).
func isRun(c container.InspectResponse) bool {
	return c.Config != nil && c.Config.Labels[rpc.LabelKind] == rpc.KindRun
}

// settled reports whether a ready Container has run long enough for
// wait_ready: readiness none counts only after noneSettle of running.
func settled(c container.InspectResponse) bool { return settleLeft(c) <= 0 }

// settleLeft is how long a running readiness-none Container still has to
// run before it counts as settled (0 for any other).
func settleLeft(c container.InspectResponse) time.Duration {
	if c.Config == nil || c.Config.Labels[rpc.LabelReadiness] != readinessNone || c.State == nil || !c.State.Running {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, c.State.StartedAt)
	if err != nil {
		return 0
	}
	return noneSettle - time.Since(t)
}

func healthSuffix(c container.InspectResponse) string {
	if c.State.Health != nil {
		return ", health " + c.State.Health.Status
	}
	return ""
}

func lastProbe(h *container.Health) string {
	if len(h.Log) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(h.Log[len(h.Log)-1].Output)
}

// logTail is the last lines of a Container's output as text, best effort.
func (o *Ops) logTail(ctx context.Context, id string) []string {
	lines, err := o.logs(ctx, id, failureLogTail, 0)
	if err != nil {
		return []string{"(logs unavailable: " + err.Error() + ")"}
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return out
}

// logs reads the last tail lines of stdout and stderr since a unix time.
func (o *Ops) logs(ctx context.Context, id string, tail int, since int64) ([]rpc.LogLine, error) {
	c, err := o.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true, Tail: strconv.Itoa(tail)}
	if since > 0 {
		opts.Since = strconv.FormatInt(since, 10)
	}
	rc, err := o.docker.ContainerLogs(ctx, c.ID, opts)
	if err != nil {
		return nil, dockerErr(err, "logs of container %s", id)
	}
	defer rc.Close()
	tty := c.Config != nil && c.Config.Tty
	lines, err := parseLogs(rc, tty)
	if err != nil {
		return nil, fmt.Errorf("read logs of container %s: %w", id, err)
	}
	return lines, nil
}

// parseLogs demultiplexes Docker's log stream (8-byte frame headers unless
// the Container has a TTY) into timestamped lines.
func parseLogs(r io.Reader, tty bool) ([]rpc.LogLine, error) {
	lines := []rpc.LogLine{}
	err := scanLogs(r, tty, func(l rpc.LogLine) error { lines = append(lines, l); return nil })
	return lines, err
}

// maxLogLine bounds one line of Container output held in memory: a
// longer line is handed on in pieces of this size (a TTY Container's
// longer line ends the scan, as bufio.Scanner does).
const maxLogLine = 1 << 20

// scanLogs is parseLogs handing each line to emit as soon as it is whole,
// for followed logs; an error from emit stops the scan. Without a TTY the
// stream is Docker's multiplexed form: an 8-byte header (stream byte,
// three zero bytes, big-endian payload size) before each payload. A
// header naming a stream other than stdout or stderr, or a payload larger
// than maxLogLine, is a corrupt stream and an error; Docker's system-error
// stream (3) carries the daemon's own error text.
func scanLogs(r io.Reader, tty bool, emit func(rpc.LogLine) error) error {
	if tty {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), maxLogLine)
		for sc.Scan() {
			if err := emit(logLine("stdout", sc.Text())); err != nil {
				return err
			}
		}
		return sc.Err()
	}
	partial := map[string]*bytes.Buffer{"stdout": {}, "stderr": {}}
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(r, hdr); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("log frame header: %w", err)
		}
		size := binary.BigEndian.Uint32(hdr[4:])
		if size > maxLogLine {
			return fmt.Errorf("log frame of %d bytes exceeds %d: not a Docker log stream", size, maxLogLine)
		}
		var stream string
		switch hdr[0] {
		case 1:
			stream = "stdout"
		case 2:
			stream = "stderr"
		case 3:
			msg, _ := io.ReadAll(io.LimitReader(r, int64(size)))
			return fmt.Errorf("docker: %s", strings.TrimSpace(string(msg)))
		default:
			return fmt.Errorf("log frame names stream %d, not stdout (1) or stderr (2)", hdr[0])
		}
		buf := partial[stream]
		if _, err := io.CopyN(buf, r, int64(size)); err != nil {
			return fmt.Errorf("log frame of %d bytes: %w", size, noEOF(err))
		}
		for {
			i := bytes.IndexByte(buf.Bytes(), '\n')
			if i < 0 {
				if buf.Len() < maxLogLine {
					break
				}
				i = maxLogLine // a line without end: hand on what is held
				if err := emit(logLine(stream, string(buf.Next(i)))); err != nil {
					return err
				}
				continue
			}
			if err := emit(logLine(stream, string(buf.Next(i + 1)[:i]))); err != nil {
				return err
			}
		}
	}
	for _, s := range []string{"stdout", "stderr"} {
		if b := partial[s]; b.Len() > 0 {
			if err := emit(logLine(s, b.String())); err != nil {
				return err
			}
		}
	}
	return nil
}

// noEOF turns a payload cut short into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// logLine splits Docker's RFC 3339 timestamp prefix from the text.
func logLine(stream, s string) rpc.LogLine {
	l := rpc.LogLine{Stream: stream, Text: strings.TrimSuffix(s, "\r")}
	if ts, text, ok := strings.Cut(s, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.Time, l.Text = t.UnixNano(), strings.TrimSuffix(text, "\r")
		}
	}
	return l
}
