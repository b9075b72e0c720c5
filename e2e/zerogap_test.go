package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// requestLoop sends requests with one Host to every target in turn
// (each lab Machine's :80, and :443 where HTTPS is on), from a few workers
// and without pausing, until stopped; it counts answers and keeps when
// each (message, Container) pair was first answered. Every request goes
// through oneShotURL, so a dropped connection is a counted failure, never
// a silent retry.
type requestLoop struct {
	ok, failed int
	// idleClosed counts the failures that were requests on a reused
	// connection the proxy closed unanswered (errIdleClosed): failures
	// like any other, printed apart to tell a reload or restart closing
	// idle keep-alive connections from other faults.
	idleClosed int
	samples    []string
	failedAt   []time.Time          // when each failure was seen
	first      map[string]time.Time // message + "@" + Container hostname
	mu         sync.Mutex
	stop       chan struct{}
	wg         sync.WaitGroup
}

// loopTarget is one address a requestLoop sends to: url is requested
// (with the loop's Host), through a keep-alive client from client.
type loopTarget struct {
	name, url string
	client    func() *http.Client
}

// httpTargets are every lab Machine's :80.
func httpTargets(l *lab.Lab) []loopTarget { return httpTargetsAt(l, "/") }

// httpTargetsAt are every lab Machine's :80, requests going to path.
func httpTargetsAt(l *lab.Lab, path string) []loopTarget {
	var ts []loopTarget
	for _, m := range l.Machines {
		ts = append(ts, loopTarget{name: m.IP.String() + ":80", url: "http://" + m.IP.String() + path,
			client: func() *http.Client { return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}} }})
	}
	return ts
}

func startLoop(l *lab.Lab, host string) *requestLoop { return startLoopOn(host, httpTargets(l)) }

func startLoopOn(host string, targets []loopTarget) *requestLoop {
	r := &requestLoop{first: map[string]time.Time{}, stop: make(chan struct{})}
	for w := 0; w < 3; w++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			clients := make([]*http.Client, len(targets))
			for i, tg := range targets {
				clients[i] = tg.client()
				defer clients[i].CloseIdleConnections()
			}
			for i := w; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				tg := targets[i%len(targets)]
				code, body, err := oneShotURL(clients[i%len(targets)], tg.url, host)
				var doc struct{ Message, Hostname string }
				r.mu.Lock()
				failures := r.failed
				switch {
				case err != nil:
					if errors.Is(err, errIdleClosed) {
						r.idleClosed++
					}
					r.failed++
					r.samples = append(r.samples, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), tg.name, err))
				case code != 200 || json.Unmarshal([]byte(body), &doc) != nil:
					r.failed++
					r.samples = append(r.samples, fmt.Sprintf("%s %s: %d %s", time.Now().Format("15:04:05.000"), tg.name, code, strings.TrimSpace(body)))
				default:
					r.ok++
					k := doc.Message + "@" + doc.Hostname
					if _, seen := r.first[k]; !seen {
						r.first[k] = time.Now()
					}
				}
				if r.failed > failures {
					r.failedAt = append(r.failedAt, time.Now())
				}
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// end stops the loop and fails t if any request failed.
func (r *requestLoop) end(t *testing.T, what string) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	t.Logf("request loop during %s: %d ok, %d failed (%d of them unanswered on a reused connection the proxy closed)", what, r.ok, r.failed, r.idleClosed)
	if r.failed > 0 || r.ok == 0 {
		t.Errorf("%s: %d of %d requests failed; first: %v", what, r.failed, r.ok+r.failed, r.samples[:min(5, len(r.samples))])
	}
}

const zeroGapCompose = `name: hello
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "v2", READY_DELAY: "4s"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
      start_period: 20s
    deploy: {replicas: 2}
    mem_limit: 64m
    x-placement: {max_per_machine: 1}
    x-ports:
      - hostname: hello.example.test
        container_port: 8080
`

// ingressZeroGap runs request loops against hello.example.test through
// every Machine while the Service changes under them: a start-first
// redeploy whose new Containers become ready late, a Container of an
// older deployment turning ready, a scale-down finished by the retire
// loop after its CLI died, `systemctl restart ployz` and `systemctl
// restart ployz-plugin@ingress-caddy` on every Machine. No request may fail.
func ingressZeroGap(t *testing.T, ctx context.Context, l *lab.Lab, op *operator) {
	const host = "hello.example.test"

	loop := startLoop(l, host)
	time.Sleep(time.Second)
	doc, errs, code := deployFile(t, op, zeroGapCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("redeploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	time.Sleep(2 * time.Second)
	loop.end(t, "a start-first redeploy")
	// Not routed before ready: each new Container answered only after
	// READY_DELAY past its start.
	for _, c := range ps(t, op, "hello").Containers {
		if c.Service != "web" {
			continue
		}
		started, err := l.Exec(ctx, c.Machine, "docker", "inspect", "-f", "{{.State.StartedAt}}", c.ID)
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, started)
		if err != nil {
			t.Fatal(err)
		}
		first, ok := loop.first["v2@"+c.ID[:12]]
		if !ok {
			t.Errorf("new Container %s on %s never answered", c.ID[:12], c.Machine)
			continue
		}
		t.Logf("%s on %s: started %s, first answered %s later (ready after 4s)", c.ID[:12], c.Machine, at.Format(time.TimeOnly), first.Sub(at).Round(10*time.Millisecond))
		if first.Sub(at) < 4*time.Second {
			t.Errorf("%s answered %s after its start, before its readiness (4s)", c.ID[:12], first.Sub(at))
		}
	}

	// A replica killed under keep-alive clients costs no GET, nor does
	// one crash-looping while the other serves.
	ingressFailover(t, ctx, l, op, host, sigkill, 1)
	ingressFailover(t, ctx, l, op, host, sigkill, 5)
	ingressFailover(t, ctx, l, op, host, oomKill, 1)

	// A Container of an older deployment that turns ready is not
	// published: the Serving Pointer names the current ones only.
	var web struct {
		ID, Machine string
	}
	for _, c := range ps(t, op, "hello").Containers {
		if c.Service == "web" {
			web.ID, web.Machine = c.ID, c.Machine
		}
	}
	labelsJSON, err := l.Exec(ctx, web.Machine, "docker", "inspect", "-f", "{{json .Config.Labels}}", web.ID)
	if err != nil {
		t.Fatal(err)
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(labelsJSON), &labels); err != nil {
		t.Fatal(err)
	}
	// Ready as soon as it runs (a shell-form healthcheck cannot run in
	// the FROM-scratch testapp).
	labels["ployz.deployment"], labels["ployz.readiness"] = "stale0", "none"
	args := []string{"docker", "run", "-d", "--name", "stale-web", "--network", "ployz", "-e", "MESSAGE=stale"}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	if _, err := l.Exec(ctx, web.Machine, append(args, "ployz-testapp:latest")...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the stale Container is ready in its row", func() error {
		for _, c := range ps(t, op, "hello").Containers {
			if strings.Contains(c.Name, "stale-web") && c.Ready {
				return nil
			}
		}
		return fmt.Errorf("not ready yet")
	})
	loop = startLoop(l, host)
	time.Sleep(4 * time.Second)
	loop.end(t, "an older deployment's Container turning ready")
	for k := range loop.first {
		if strings.HasPrefix(k, "stale@") {
			t.Errorf("the stale Container answered: %s", k)
		}
	}
	if _, err := l.Exec(ctx, web.Machine, "docker", "rm", "-f", "stale-web"); err != nil {
		t.Fatal(err)
	}

	// A scale-down whose CLI dies right after moving the Serving Pointer
	// (before it could stop anything): the left-out Container's Machine
	// retires it on its own once every Machine acked, still without a
	// failed request.
	before := map[string]string{} // web Container id -> Machine
	for _, c := range ps(t, op, "hello").Containers {
		if c.Service == "web" {
			before[c.ID] = c.Machine
		}
	}
	loop = startLoop(l, host)
	time.Sleep(time.Second)
	op.killAfter(t, "ok  (cluster) web move_serving_pointer", "scale", "web", "1", "-p", "hello", "-y")
	var insp struct {
		Serving *rpc.ServiceServing `json:"serving"`
	}
	op.json(t, &insp, "service", "inspect", "web", "-p", "hello")
	if sv := insp.Serving; sv == nil || len(sv.Containers) != 1 {
		t.Fatalf("serving pointer after the scale-down: %+v", insp.Serving)
	}
	delete(before, insp.Serving.Containers[0].ID)
	if len(before) != 1 {
		t.Fatalf("left out by the pointer: %v", before)
	}
	for id, m := range before {
		eventually(t, 60*time.Second, "the retire loop stops "+id[:12]+" on "+m, func() error {
			out, err := l.Exec(ctx, m, "docker", "inspect", "-f", "{{.State.Running}}", id)
			if err != nil || out != "false" {
				return fmt.Errorf("running=%s %v", out, err)
			}
			return nil
		})
	}
	time.Sleep(time.Second)
	loop.end(t, "a scale-down from 2 to 1 finished by the retire loop")
	op.json(t, &insp, "service", "inspect", "web", "-p", "hello")
	if sv := insp.Serving; sv == nil || len(sv.Pending()) != 0 || len(sv.Acks) != 3 {
		t.Errorf("serving pointer acks: %+v", insp.Serving)
	}

	loop = startLoop(l, host)
	for _, m := range l.Machines {
		if _, err := l.Exec(ctx, m.Name, "systemctl", "restart", "ployz.service"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
	}
	loop.end(t, "systemctl restart ployz on every Machine")

	// The proxy itself restarts (as onto a new binary): its :80 socket
	// waits in systemd's fd store, so connections queue, none is refused.
	loop = startLoop(l, host)
	for _, m := range l.Machines {
		t.Logf("%s restarting ployz-plugin@ingress-caddy on %s (%s)", time.Now().Format("15:04:05.000"), m.Name, m.IP)
		if _, err := l.Exec(ctx, m.Name, "systemctl", "restart", "ployz-plugin@ingress-caddy.service"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted", time.Now().Format("15:04:05.000"))
		time.Sleep(2 * time.Second)
	}
	loop.end(t, "systemctl restart ployz-plugin@ingress-caddy on every Machine")
}

// killAfter runs ployz with args and kills it (SIGKILL, no clean-up) as
// soon as its progress output contains marker; it fails t if the marker
// never comes.
func (o *operator) killAfter(t *testing.T, marker string, args ...string) {
	t.Helper()
	o.pins.pin(t)
	cmd := exec.Command(filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), append([]string{"--ssh-key", o.key}, args...)...)
	cmd.Env = append(append(os.Environ(), "PLOYZ_OPERATOR_STORE="+o.store), o.env...)
	killAt(t, cmd, marker)
	t.Logf("killed ployz %s after %q", strings.Join(args, " "), marker)
}

const rivalCompose = `name: rival
services:
  site:
    image: ployz-testapp:latest
    environment: {MESSAGE: "rival"}
    x-ports:
      - hostname: hello.example.test
        container_port: 8080
`

// ingressConflict deploys a second project claiming hello.example.test:
// the deploy warns, every Machine reports the conflict, the existing
// route keeps serving hello's web untouched, and removing the rival
// publishes the route again.
func ingressConflict(t *testing.T, ctx context.Context, l *lab.Lab, op *operator) {
	doc, errs, code := deployFile(t, op, rivalCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("rival deploy: exit %d\n%s", code, errs)
	}
	if w := strings.Join(doc.Plan.Warnings, "\n"); !strings.Contains(w, "already claimed by hello-") {
		t.Errorf("the rival deploy did not warn of the claimed hostname: %s", w)
	}
	eventually(t, 30*time.Second, "every Machine reports the conflict", func() error {
		out := op.must(t, "ingress", "config")
		if n := strings.Count(out, "conflict"); n < 3 {
			return fmt.Errorf("%d Machines report it:\n%s", n, out)
		}
		return nil
	})
	loop := startLoop(l, "hello.example.test")
	time.Sleep(3 * time.Second)
	loop.end(t, "a conflicting claim on the hostname")
	for k := range loop.first {
		if strings.HasPrefix(k, "rival@") {
			t.Errorf("the rival answered for the existing route: %s", k)
		}
	}
	if _, errs, code := op.run(t, "project", "rm", "rival", "-y"); code != 0 {
		t.Fatalf("project rm rival: exit %d\n%s", code, errs)
	}
	eventually(t, 60*time.Second, "the route is published again on every Machine", func() error {
		out := op.must(t, "ingress", "config")
		if strings.Contains(out, "conflict") || strings.Count(out, "published") < 3 {
			return fmt.Errorf("%s", out)
		}
		return nil
	})
}
