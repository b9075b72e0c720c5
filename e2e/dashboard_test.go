package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/browsertest"
)

const dashboardCompose = `name: dash
services:
  web:
    image: ployz-testapp:latest
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
`

// TestDashboard drives `ployz dashboard` in headless Chromium against a
// 3-Machine lab: every page renders the lab's real Machines and Services
// (the Volumes page names every Machine as having no ZFS pool, as
// `ployz volume ls` does);
// a scale from the UI changes the Cluster (ployz ps shows it); a line a
// Container prints reaches the followed logs; a restart from the UI
// replaces every Container; stop and start from the UI stop and start
// them; a CLI deploy shows live on the Deploys page, then each
// Machine's outcome (completed, then failed); a Machine whose ployzd and
// metrics plugin are stopped is named, its log stream is named down and
// then reopened, and it is a gap in the Service's chart with values on
// both sides.
// Screenshots go to $PLOYZ_SCREENSHOTS when set.
func TestDashboard(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	formCluster(t, l, op)
	if doc, errs, code := deployFile(t, op, dashboardCompose); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	base, launch := startDashboard(t, op)
	b := browsertest.New(t, 15*time.Minute)
	ns := "dash-production"
	row := fmt.Sprintf(`tr[data-service="%s/web"]`, ns)

	// The launch link binds the dashboard to this browser; another client
	// gets no session and cannot spend the link again.
	b.Do(t, "open the launch link", chromedp.Navigate(launch))
	for what, url := range map[string]string{"/api/session without the cookie": base + "/api/session", "the launch link a second time": launch} {
		r, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %s, want 401", what, r.Status)
		}
	}

	b.Do(t, "open the Cluster page", chromedp.Navigate(base+"/#/cluster"))
	for _, m := range l.Machines {
		b.WaitText(t, "#machines", m.Name, 60*time.Second)
	}
	b.WaitText(t, "#machines", "self", 10*time.Second)
	b.WaitText(t, "#machines", "metrics", 30*time.Second) // plugins, from each Machine's own inspection
	b.Shot(t, "cluster")
	volumesNoPool(t, l, op, b, base)

	b.Do(t, "open the Services page", chromedp.Navigate(base+"/#/services"))
	b.WaitText(t, row, "ready", 60*time.Second)
	b.Shot(t, "services")
	b.Do(t, "scale web to 3 from the UI",
		chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`form[data-scale="%s/web"] input`, ns)), "3"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`form[data-scale="%s/web"] button`, ns))))
	b.WaitText(t, "#action-result", "completed", 5*time.Minute)
	if ready, machines := count(ps(t, op, "dash"), "web"); ready != 3 || machines != 3 {
		t.Fatalf("after the UI's scale ployz ps shows %d ready web Containers on %d Machines, want 3 on 3", ready, machines)
	}
	// The page follows without a reload: Desired and Ready read 3.
	eventually(t, 30*time.Second, "the Services row shows 3 ready", func() error {
		cells := browsertest.Eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll('%s td')].map(td => td.innerText)`, row))
		if len(cells) < 5 || cells[2] != "3" || cells[4] != "3" {
			return fmt.Errorf("row cells %q", cells)
		}
		return nil
	})
	b.Shot(t, "services-scaled")

	b.Do(t, "open the Service page", chromedp.Click(chromedp.CSS(row+" a")))
	for _, m := range l.Machines {
		b.WaitText(t, "#containers", m.Name, 60*time.Second)
		b.WaitText(t, "#acks", m.Name, 30*time.Second)
	}
	// A line printed now reaches the followed logs.
	marker := fmt.Sprintf("dashboard-marker-%d", time.Now().UnixNano())
	c := ps(t, op, "dash").Containers[0]
	if _, err := l.Exec(context.Background(), c.Machine, "docker", "exec", c.ID, "/testapp", "get", "http://127.0.0.1:8080/log?line="+marker); err != nil {
		t.Fatal(err)
	}
	b.WaitText(t, "#logs", marker, 60*time.Second)
	b.Do(t, "reload the charts", chromedp.Click(chromedp.CSS(`button[data-range="1h"]`)))
	eventually(t, 90*time.Second, "a cpu chart is drawn", func() error {
		b.Do(t, "reload the charts", chromedp.Click(chromedp.CSS(`button[data-range="1h"]`)))
		time.Sleep(2 * time.Second)
		if n := browsertest.Eval[int](t, b, `document.querySelectorAll('#charts [data-metric="cpu.cores"] canvas').length`); n == 0 {
			return fmt.Errorf("no cpu.cores chart yet")
		}
		return nil
	})
	b.Shot(t, "service")

	uiRestart(t, op, b, ns)
	uiStopStart(t, op, b, ns)

	b.Do(t, "open the Deploys page", chromedp.Navigate(base+"/#/deploys"))
	b.WaitText(t, "#view", "restart "+ns+"/web", 30*time.Second)
	b.WaitText(t, "#view", "scale "+ns+"/web to 3", 10*time.Second)
	b.WaitText(t, "#revisions", ns, 30*time.Second)
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('#revisions tbody tr').length`); n != 3 {
		t.Errorf("%d Saved State revisions listed, want 3 (deploy, scale, restart)", n)
	}
	b.Shot(t, "deploys")
	var names []string
	for _, m := range l.Machines {
		names = append(names, m.Name)
	}
	cliDeployLive(t, op, b, base, names)

	stoppedGap(t, l, b, base, ns)
	if errs := b.Errors(); len(errs) > 0 {
		t.Fatalf("page errors: %v", errs)
	}
}

// volumesNoPool opens the Volumes page on the lab, whose Machines have no
// ZFS pool: it names every Machine as having none, with the command that
// gives it one, as `ployz volume ls` does (checked against its --json), and
// lists no volume.
func volumesNoPool(t *testing.T, l *lab.Lab, op *operator, b *browsertest.Browser, base string) {
	t.Helper()
	var ls struct {
		Machines []struct {
			Machine string `json:"machine"`
			List    *struct {
				Pool    string            `json:"pool"`
				Volumes []json.RawMessage `json:"volumes"`
			} `json:"list"`
			Error string `json:"error"`
		} `json:"machines"`
	}
	op.json(t, &ls, "volume", "ls")
	if len(ls.Machines) != len(l.Machines) {
		t.Fatalf("ployz volume ls lists %d Machines, want %d: %+v", len(ls.Machines), len(l.Machines), ls)
	}
	for _, m := range ls.Machines {
		if m.Error != "" || m.List == nil || m.List.Pool != "" || len(m.List.Volumes) != 0 {
			t.Fatalf("ployz volume ls: %s is not a Machine without a pool: %+v", m.Machine, m)
		}
	}

	b.Do(t, "open the Volumes page from the navigation", chromedp.Click(chromedp.CSS(`nav a[data-nav="volumes"]`)))
	for _, m := range l.Machines {
		row := fmt.Sprintf(`#volume-machines tr[data-machine="%s"][data-state="no_pool"]`, m.Name)
		b.WaitText(t, row, "no ZFS pool, no Provisioned Volumes", 60*time.Second)
		b.WaitText(t, row, "ployz machine update "+m.Name+" --zfs-pool NAME", 5*time.Second)
	}
	b.WaitText(t, "#no-volumes", "No Provisioned Volumes", 5*time.Second)
	if h := browsertest.Eval[string](t, b, "location.hash"); h != "#/volumes" {
		t.Errorf("Volumes page URL %q", h)
	}
	var page dashboard.Volumes
	if err := getDashboard(t, b, base+"/api/view/volumes", &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Machines) != len(l.Machines) {
		t.Fatalf("the Volumes view has %d Machines, want %d", len(page.Machines), len(l.Machines))
	}
	for _, m := range page.Machines {
		if m.State != "no_pool" {
			t.Errorf("the Volumes view says %s is %q (%s), want no_pool", m.Machine, m.State, m.Note)
		}
	}
	b.Shot(t, "volumes")
	b.Do(t, "phone width", chromedp.EmulateViewport(390, 844))
	time.Sleep(300 * time.Millisecond)
	if w := browsertest.Eval[int](t, b, "document.documentElement.scrollWidth"); w > 390 {
		t.Errorf("the Volumes page is %dpx wide at 390 px", w)
	}
	b.Shot(t, "phone-volumes")
	b.Do(t, "desktop width", chromedp.EmulateViewport(1280, 900))
}

// stoppedGap stops m3's ployzd and metrics plugin for 40 s and checks the chart data
// the Service page draws: m3's cpu series has values before, nulls
// while it was stopped, and values after.
func stoppedGap(t *testing.T, l *lab.Lab, b *browsertest.Browser, base, ns string) {
	t.Helper()
	ctx := context.Background()
	m3 := l.Machines[2].Name
	time.Sleep(20 * time.Second) // samples before the stop
	stopAt := time.Now()
	// ployzd restarts a plugin that stops, so both stop (as in
	// TestMetricsTopGapsAndPrometheus); starting ployzd starts the plugin.
	if _, err := l.Exec(ctx, m3, "systemctl", "stop", "ployz", "ployz-plugin@metrics"); err != nil {
		t.Fatal(err)
	}
	b.Do(t, "open the Service page", chromedp.Navigate(base+"/#/service/"+ns+"/web"))
	b.WaitText(t, "#gaps", m3, 60*time.Second) // it does not answer: named
	b.WaitText(t, "#log-streams", m3+": log stream down", 30*time.Second)
	b.Shot(t, "service-m3-stopped")
	time.Sleep(40*time.Second - time.Since(stopAt))
	startAt := time.Now()
	if _, err := l.Exec(ctx, m3, "systemctl", "start", "ployz"); err != nil {
		t.Fatal(err)
	}
	// Its log stream is reopened (with backoff) once it is back.
	b.WaitText(t, "#logs", "~ "+m3+": log stream reopened", 120*time.Second)
	eventually(t, 120*time.Second, "m3's chart has values, then a gap, then values", func() error {
		var c dashboard.Charts
		if err := getDashboard(t, b, base+"/api/metrics?range=1h&namespace="+ns+"&service=web", &c); err != nil {
			return err
		}
		for _, ch := range c.Charts {
			if ch.Metric != "cpu.cores" {
				continue
			}
			for _, s := range ch.Series {
				if s.Machine != m3 {
					continue
				}
				var pre, gap, post bool
				for i, v := range s.Values {
					at := time.Unix(ch.Times[i], 0)
					switch {
					case at.Before(stopAt.Add(-20*time.Second)) && at.After(stopAt.Add(-40*time.Second)):
						pre = pre || v != nil
					case at.After(stopAt.Add(10*time.Second)) && at.Before(startAt.Add(-10*time.Second)):
						gap = gap || v == nil
						if v != nil {
							t.Fatalf("m3 has %v at %s while its metrics plugin was stopped (%s to %s)", *v, at.Format(time.TimeOnly), stopAt.Format(time.TimeOnly), startAt.Format(time.TimeOnly))
						}
					case at.After(startAt.Add(10 * time.Second)):
						post = post || v != nil
					}
				}
				if pre && gap && post {
					return nil
				}
				return fmt.Errorf("m3 values before %t, gap %t, after %t", pre, gap, post)
			}
		}
		return fmt.Errorf("no cpu.cores series for %s in %d charts", m3, len(c.Charts))
	})
	b.Do(t, "reload the charts", chromedp.Click(chromedp.CSS(`button[data-range="1h"]`)))
	time.Sleep(2 * time.Second)
	b.Shot(t, "service-m3-gap")
}

// startDashboard runs `ployz dashboard` on a free loopback port until the
// test ends and returns its URL and the one-time launch link it printed.
func startDashboard(t *testing.T, op *operator) (base, launch string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s := op.stream(ctx, t, "dashboard", "--listen", addr)
	t.Cleanup(func() {
		cancel()
		_ = s.cmd.Wait()
		t.Logf("ployz dashboard stderr:\n%s", s.errText.String())
	})
	base = "http://" + addr
	line, ok := untilLine(s.Stderr, "dashboard at "+base+"/?launch=", 30*time.Second)
	if !ok {
		t.Fatalf("ployz dashboard did not start: %s", s.errText.String())
	}
	_, after, _ := strings.Cut(line, "dashboard at ")
	launch, _, _ = strings.Cut(after, " ")
	return base, launch
}

// getDashboard reads url as the browser b, with its session cookie.
func getDashboard(t *testing.T, b *browsertest.Browser, url string, v any) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	for _, c := range b.Cookies(t, url) {
		req.AddCookie(c)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, r.Status)
	}
	return json.NewDecoder(r.Body).Decode(v)
}

// uiRestart restarts web from the Service page: every Container is
// replaced by a fresh ready one.
func uiRestart(t *testing.T, op *operator, b *browsertest.Browser, ns string) {
	t.Helper()
	before := ps(t, op, "dash").Containers
	b.Do(t, "restart web from the UI", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-restart="%s/web"]`, ns))))
	b.WaitText(t, "#action-result", "completed", 5*time.Minute)
	after := ps(t, op, "dash").Containers
	old := map[string]bool{}
	for _, c := range before {
		old[c.ID] = true
	}
	fresh := 0
	for _, c := range after {
		if c.Service == "web" && c.State == "running" && c.Ready && !old[c.ID] {
			fresh++
		}
	}
	if fresh != 3 {
		t.Fatalf("after the UI's restart %d fresh ready web Containers, want 3: %+v", fresh, after)
	}
}

// uiStopStart stops and starts web from the Service page.
func uiStopStart(t *testing.T, op *operator, b *browsertest.Browser, ns string) {
	t.Helper()
	// Stop and start from the UI act on the existing Containers.
	b.Do(t, "stop web from the UI", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-stop="%s/web"]`, ns))))
	b.WaitText(t, "#action-result", "completed", 3*time.Minute)
	for _, c := range ps(t, op, "dash").Containers {
		if c.Service == "web" && c.State == "running" {
			t.Fatalf("after the UI's stop %s is still running on %s", c.Name, c.Machine)
		}
	}
	b.Do(t, "start web from the UI", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-start="%s/web"]`, ns))))
	b.WaitText(t, "#action-result", "completed", 3*time.Minute)
	// start waits for readiness, so all three are ready when it completes.
	if ready, machines := count(ps(t, op, "dash"), "web"); ready != 3 || machines != 3 {
		t.Fatalf("after the UI's start %d ready web Containers on %d Machines, want 3 on 3\n%s", ready, machines, b.Text(t, "#action-result"))
	}
	// What happens next is ployz start's own business (the Serving Pointer
	// and the retire loop), recorded here as evidence, not judged.
	time.Sleep(30 * time.Second)
	ready, machines := count(ps(t, op, "dash"), "web")
	var in struct {
		Serving *struct {
			Containers []struct{ ID string } `json:"containers"`
		} `json:"serving"`
	}
	op.json(t, &in, "service", "inspect", "web", "-p", "dash")
	pointed := -1
	if in.Serving != nil {
		pointed = len(in.Serving.Containers)
	}
	t.Logf("30 s after the start: %d ready web Containers on %d Machines; the Serving Pointer names %d", ready, machines, pointed)
}
