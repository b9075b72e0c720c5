package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/sdk/ingress"
)

// lossCompose is project's web with one replica per Machine of three
// (the scheduler spreads them) and a route; no placement cap, so a deploy
// can restore the third replica on the two Machines that remain.
func lossCompose(project string) string {
	return `name: ` + project + `
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "loss"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 3}
    x-ports:
      - hostname: ` + project + `.example.test
        container_port: 8080
`
}

// machineCut is one way m2 is lost (cut) and comes back (restore).
type machineCut struct {
	name         string
	cut, restore func(l *lab.Lab, ctx context.Context, machine string) error
}

// The two losses the issue names: a power cut (m2's container killed,
// then booted) and a partition (m2 keeps running, cut off the lab
// network, then healed).
var (
	powerCut  = machineCut{"power-off", (*lab.Lab).PowerOff, (*lab.Lab).Start}
	partition = machineCut{"partition", (*lab.Lab).Partition, (*lab.Lab).Heal}
)

// answerWatch asks one Machine the same question again and again (no
// retry) and keeps when each answer named a given Container: a DNS
// lookup, or the ingress's loaded upstreams of a route.
type answerWatch struct {
	mu       sync.Mutex
	queries  int
	failed   int
	naming   []time.Time // answers that named the Container
	lastFail string
	stop     chan struct{}
	done     chan struct{}
}

// probe asks once: whether the answer named the Container, or why the
// question failed.
type probe func() (naming bool, err error)

func startWatch(every time.Duration, ask probe) *answerWatch {
	w := &answerWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			naming, err := ask()
			now := time.Now()
			w.mu.Lock()
			w.queries++
			switch {
			case err != nil:
				w.failed++
				w.lastFail = fmt.Sprintf("%s: %v", now.Format("15:04:05.000"), err)
			case naming:
				w.naming = append(w.naming, now)
			}
			w.mu.Unlock()
			time.Sleep(every)
		}
	}()
	return w
}

// startDNSWatch resolves name through server on machine.
func startDNSWatch(ctx context.Context, l *lab.Lab, machine, server, name, addr string) *answerWatch {
	return startWatch(100*time.Millisecond, func() (bool, error) {
		out, err := l.Exec(ctx, machine, "ployz-dns", "lookup", "--server", server, name)
		lines := strings.Fields(out)
		if err != nil || len(lines) == 0 || lines[0] != "NOERROR" {
			return false, fmt.Errorf("%q %v", out, err)
		}
		return slices.Contains(lines[1:], addr), nil
	})
}

// startRouteWatch reads the upstreams machine's ingress has loaded for
// host (`ployz ingress config --machine`, through its local socket).
func startRouteWatch(ctx context.Context, l *lab.Lab, machine, host, upstream string) *answerWatch {
	return startWatch(200*time.Millisecond, func() (bool, error) {
		var ms []struct {
			Status struct {
				Routes []ingress.Route `json:"routes"`
			} `json:"status"`
			Error string `json:"error"`
		}
		if err := localJSONList(ctx, l, machine, &ms, "ingress", "config", "--machine", machine); err != nil {
			return false, err
		}
		for _, m := range ms {
			for _, r := range m.Status.Routes {
				if r.Hostname == host && slices.Contains(r.Upstreams, upstream) {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

func (w *answerWatch) end() { close(w.stop); <-w.done }

// namingAfter counts the answers after t that named the address, and
// returns the last one.
func (w *answerWatch) namingAfter(t time.Time) (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, last := 0, time.Time{}
	for _, at := range w.naming {
		if at.After(t) {
			n++
		}
		last = at
	}
	return n, last
}

// awaitMembership waits until Machine from's `machine ls` says Machine id
// is want (up, suspect, down), and returns when it saw it.
func awaitMembership(t *testing.T, ctx context.Context, l *lab.Lab, from, id, want string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, within, from+" holds "+id+" "+want, func() error {
		list, err := lsFrom(ctx, l, from)
		if err != nil {
			return err
		}
		if s := membership(list, id); s != want {
			return fmt.Errorf("%s is %s", id, s)
		}
		at = time.Now()
		return nil
	})
	return at
}

// failedAfter counts the loop's failures after t.
func (r *requestLoop) failedAfter(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.failedAt {
		if at.After(t) {
			n++
		}
	}
	return n
}

// downOutOfAnswers is how long after the membership's Down verdict a
// dead Machine's Containers may still be answered: DNS and the ingress
// read the membership every second (serving.MembershipPoll), and the
// verdict is read from `machine ls`, which lags the store's own view.
const downOutOfAnswers = 5 * time.Second

// machineLoss loses m2 (how: a power cut or a partition) while
// keep-alive loops go through m1's and m3's ingress and m1 resolves web
// without pause: no request fails, and once m1 holds m2 Down (plus
// downOutOfAnswers) no DNS answer names m2's Container. A deploy then
// restores three ready replicas on m1 and m3 under the same loops with no
// failed request; when m2 is back its old Container is not answered and
// is retired. Each loss deploys its own project (loss-<how>).
func machineLoss(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, ids map[string]string, m1Gateway string, how machineCut) {
	project := "loss-" + how.name
	host := project + ".example.test"
	if doc, errs, code := deployFile(t, op, lossCompose(project)); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy %s: exit %d\n%s", project, code, errs)
	}
	on := map[string]string{} // Machine -> its web Container's IP
	oldID := ""
	for _, c := range ps(t, op, project).Containers {
		if c.Service == "web" && c.Ready {
			on[c.Machine] = c.IP
			if c.Machine == "m2" {
				oldID = c.ID
			}
		}
	}
	if len(on) != 3 || on["m2"] == "" {
		t.Fatalf("web ready on %v, want one replica on each of m1, m2, m3", on)
	}
	m2ID := ids[l.Machines[1].IP.String()]
	targets := slices.DeleteFunc(httpTargets(l), func(tg loopTarget) bool { return strings.HasPrefix(tg.name, l.Machines[1].IP.String()+":") })
	loop := startLoopOn(host, targets)
	dns := startDNSWatch(ctx, l, "m1", m1Gateway+":53", "web."+project+"-production.internal", on["m2"])
	routes := startRouteWatch(ctx, l, "m1", host, on["m2"]+":8080")
	time.Sleep(2 * time.Second)
	if n, _ := dns.namingAfter(time.Time{}); n == 0 {
		t.Fatalf("m1's DNS never named m2's Container %s before the power-off", on["m2"])
	}
	eventually(t, 20*time.Second, "m1's ingress routes "+host+" to m2's Container too", func() error {
		if n, _ := routes.namingAfter(time.Time{}); n == 0 {
			return fmt.Errorf("not yet (%d reads, last failure %q)", routes.queries, routes.lastFail)
		}
		return nil
	})

	offAt := time.Now()
	if err := how.cut(l, ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	verdictAt := awaitMembership(t, ctx, l, "m1", m2ID, "down", 90*time.Second)
	time.Sleep(downOutOfAnswers + 3*time.Second)
	after := verdictAt.Add(downOutOfAnswers)
	late, lastNaming := dns.namingAfter(after)
	t.Logf("benchmark: %s of m2 -> m1's Down verdict %s; last DNS answer on m1 naming m2's Container %s after the cut (%s from the verdict); %d answers named it later than %s after the verdict",
		how.name, verdictAt.Sub(offAt).Round(100*time.Millisecond), lastNaming.Sub(offAt).Round(100*time.Millisecond),
		lastNaming.Sub(verdictAt).Round(100*time.Millisecond), late, downOutOfAnswers)
	lateRoutes, lastRouted := routes.namingAfter(after)
	t.Logf("benchmark: %s of m2 -> last upstream list of m1's ingress naming m2's Container %s after the cut (%s from the verdict); "+
		"%d requests through m1 and m3 failed between the cut and the verdict, %d after it",
		how.name, lastRouted.Sub(offAt).Round(100*time.Millisecond), lastRouted.Sub(verdictAt).Round(100*time.Millisecond),
		loop.failedAfter(offAt)-loop.failedAfter(verdictAt), loop.failedAfter(verdictAt))
	if v := verdictAt.Sub(offAt); v > 10*time.Second {
		t.Logf("NOT MET: the Down verdict came %s after the %s (goal: 10 s); printed, not gated", v.Round(100*time.Millisecond), how.name)
	}
	if late > 0 {
		t.Errorf("m1's DNS named m2's Container %d times more than %s after m1 held m2 down", late, downOutOfAnswers)
	}
	if lateRoutes > 0 {
		t.Errorf("m1's ingress still routed %s to m2's Container in %d reads more than %s after m1 held m2 down", host, lateRoutes, downOutOfAnswers)
	}
	if f := loop.failedAfter(after); f > 0 {
		t.Errorf("%d requests through m1 and m3 failed more than %s after the Down verdict", f, downOutOfAnswers)
	}
	loop.end(t, "m2's "+how.name+" (through m1 and m3)")

	// ls names the Down Machine that holds one of web's serving replicas.
	eventually(t, 30*time.Second, "ls names m2 as Down for web", func() error {
		var doc struct {
			Services []struct {
				Service string   `json:"service"`
				DownOn  []string `json:"down_on"`
			} `json:"services"`
		}
		op.json(t, &doc, "ls", "-p", project)
		for _, s := range doc.Services {
			if s.Service == "web" && slices.Equal(s.DownOn, []string{"m2"}) {
				return nil
			}
		}
		return fmt.Errorf("ls: %+v", doc.Services)
	})
	// ps lists the Container m2 served from the Serving Pointer, state
	// unknown, since m2 itself cannot be asked.
	if !listsDown(ps(t, op, project), "m2", oldID) {
		t.Errorf("ps -p %s does not list m2's web Container %s as on a Down Machine: %+v", project, oldID, ps(t, op, project).Containers)
	}
	loop = startLoopOn(host, targets)

	// Capacity back in one command: the same deploy places the missing
	// replica on m1 or m3, start-first, and leaves m2's alone.
	if doc, errs, code := deployFile(t, op, lossCompose(project)); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy with m2 down: exit %d\n%s", code, errs)
	}
	ready := 0
	for _, c := range ps(t, op, project).Containers {
		if c.Service == "web" && c.Ready && c.Machine != "m2" {
			ready++
		}
	}
	if ready != 3 {
		t.Errorf("after the restoring deploy: %d ready web replicas on m1 and m3, want 3", ready)
	}
	loop.end(t, "the deploy restoring web's replicas with m2 down")

	// m2 comes back: its old Container runs (again, after a power cut:
	// Docker's restart policy) but the Serving Pointer names the
	// replacements, so it is not answered, and m2's retire loop stops it.
	if err := how.restore(l, ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	backAt := awaitMembership(t, ctx, l, "m1", m2ID, "up", 120*time.Second)
	eventually(t, 120*time.Second, "m2's superseded web Container retired", func() error {
		out, err := l.Exec(ctx, "m2", "docker", "inspect", "-f", "{{.State.Running}}", oldID)
		if err == nil && strings.TrimSpace(out) == "true" {
			return fmt.Errorf("still running")
		}
		return nil
	})
	dns.end()
	routes.end()
	if n, last := dns.namingAfter(backAt); n > 0 {
		t.Errorf("m1's DNS named m2's superseded Container %d times after m2 came back (last %s)", n, last.Format("15:04:05.000"))
	}
	// No duplicate serving after the return or the heal: m1's ingress
	// follows the Serving Pointer, which names the replacements.
	if n, last := routes.namingAfter(backAt); n > 0 {
		t.Errorf("m1's ingress routed %s to m2's superseded Container in %d reads after m2 came back (last %s)", host, n, last.Format("15:04:05.000"))
	}
	if dns.failed > 0 {
		t.Errorf("m1's DNS: %d of %d lookups failed; last: %s", dns.failed, dns.queries, dns.lastFail)
	}
	t.Logf("m1's DNS: %d lookups of web during the loss, the restore and the return", dns.queries)
	if out, errs, code := op.run(t, "project", "rm", project, "-y"); code != 0 {
		t.Errorf("project rm %s: exit %d\n%s%s", project, code, out, errs)
	}
}

// listsDown reports whether ps lists Container id on machine as on a
// Down Machine.
func listsDown(doc psDoc, machine, id string) bool {
	for _, c := range doc.Containers {
		if c.Machine == machine && c.ID == id && c.Down && c.State == "unknown" && !c.Ready {
			return true
		}
	}
	return false
}

// machineForget is `machine rm --force` (docs/machine-loss.md): refused
// for m3, which answers; m2 powered off for good, held Down by m1, then
// forgotten: gone from `machine ls` on m1 and m3 and from their
// WireGuard peers. It runs last: m2 stays off and out of the Cluster.
func machineForget(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, ids map[string]string) {
	out, errs, code := op.run(t, "machine", "rm", "m3", "--force", "-y")
	if code == 0 || !strings.Contains(errs, "answers") {
		t.Fatalf("machine rm --force of m3, which answers: exit %d, want a refusal saying it answers\n%s%s", code, out, errs)
	}
	if list, err := lsFrom(ctx, l, "m1"); err != nil || membership(list, ids[l.Machines[2].IP.String()]) != "up" {
		t.Fatalf("m3 after the refused --force: %s (%v)", membership(list, ids[l.Machines[2].IP.String()]), err)
	}
	m2ID := ids[l.Machines[1].IP.String()]
	key := ""
	if list, err := lsFrom(ctx, l, "m1"); err == nil {
		for _, m := range list.Machines {
			if m.ID == m2ID {
				key = m.PublicKey
			}
		}
	}
	if key == "" {
		t.Fatalf("m1 lists no WireGuard key for m2 (%s)", m2ID)
	}
	if err := l.PowerOff(ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	awaitMembership(t, ctx, l, "m1", m2ID, "down", 90*time.Second)
	out, errs, code = op.run(t, "machine", "rm", "m2", "--force", "-y")
	if code != 0 {
		t.Fatalf("machine rm --force of the powered-off m2: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("machine rm --force m2:\n%s%s", out, errs)
	for _, name := range []string{"m1", "m3"} {
		eventually(t, 60*time.Second, name+" forgets m2", func() error {
			list, err := lsFrom(ctx, l, name)
			if err != nil {
				return err
			}
			if s := membership(list, m2ID); s != "absent" {
				return fmt.Errorf("machine ls lists m2 (%s)", s)
			}
			wg, err := l.Exec(ctx, name, "wg", "show", "ployz-wg", "peers")
			if err != nil {
				return fmt.Errorf("wg show: %v: %s", err, wg)
			}
			if slices.Contains(strings.Fields(wg), key) {
				return fmt.Errorf("m2 is still a WireGuard peer")
			}
			return nil
		})
	}
	if out, errs, code := op.run(t, "machine", "rm", "m2", "--force", "-y"); code == 0 {
		t.Errorf("a second machine rm --force of m2 succeeded; want it refused as unknown\n%s%s", out, errs)
	}
}
