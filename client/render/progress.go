package render

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// Progress prints deploy steps: with live, one row per step in flight
// (steps on different Machines run at once) under the finished steps,
// redrawn as they end; otherwise a plain line per start and per end.
func Progress(w io.Writer, live bool) func(deploy.Event) {
	p := &progress{w: w, live: live}
	return p.event
}

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
