package dashboard

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/internal/browsertest"
)

// TestBrowser drives every page in headless Chromium against a fake
// Source: it renders, updates live, scales and restarts from the UI, draws
// charts with gaps, follows logs, fits a phone and follows the system
// theme, with no page error (a CSP refusal would be one).
func TestBrowser(t *testing.T) {
	src := newFake()
	s, ts := serveUnbound(t, src, 200*time.Millisecond)
	// After serve, so the browser closes (its cleanup runs) first.
	b := browsertest.New(t, 2*time.Minute)

	// The launch link binds the dashboard to this browser and leaves the
	// clean URL in its address bar.
	b.Do(t, "open the launch link", chromedp.Navigate(s.LaunchURL()))
	if u := browsertest.Eval[string](t, b, "location.href"); u != ts.URL+"/" {
		t.Fatalf("after the launch link the browser is at %q, want %s/", u, ts.URL)
	}
	if got := browsertest.Eval[string](t, b, "document.cookie"); got != "" {
		t.Fatalf("the page's script reads the session cookie %q; want it HttpOnly", got)
	}
	// The browser's cookie is the whole credential: a client holding it
	// reads the API.
	req, _ := http.NewRequest("GET", ts.URL+"/api/view/cluster", nil)
	for _, c := range b.Cookies(t, ts.URL) {
		req.AddCookie(c)
	}
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("the API with the browser's cookie: %v %v", r, err)
	}
	b.Do(t, "open the Cluster page", chromedp.Navigate(ts.URL+"/#/cluster"))
	b.WaitText(t, "#machines", "drained since", 10*time.Second)
	if txt := b.Text(t, "#machines"); !strings.Contains(txt, "m3") || !strings.Contains(txt, "1 capabilities") || !strings.Contains(txt, "logstore") || !strings.Contains(txt, "0.9.0") {
		t.Fatalf("cluster table %q", txt)
	}
	// An opened list stays open across live updates (the page re-renders
	// every poll: the observation time changes).
	opened := func() bool {
		return browsertest.Eval[bool](t, b, `document.querySelector('tr[data-machine="m1"] details').open`)
	}
	// A re-render between the mouse's press and release (separate events
	// here, as with a real mouse) swallows the click; click again then,
	// as a person would, but only while it is closed.
	for try := 0; try < 5 && !opened(); try++ {
		b.Do(t, "open m1's capabilities", chromedp.Click(chromedp.CSS(`tr[data-machine="m1"] summary`)))
		time.Sleep(100 * time.Millisecond)
	}
	if !opened() {
		t.Fatal("m1's capabilities did not open on a click")
	}
	time.Sleep(time.Second) // five live updates
	if !opened() {
		t.Fatal("the opened capabilities closed on a live update")
	}
	b.Shot(t, "cluster")

	b.Do(t, "open the Services page", chromedp.Navigate(ts.URL+"/#/services"))
	b.WaitText(t, "#services", "published", 10*time.Second)
	// The Certificates column: state and expiry per hostname, and the
	// Machines that differ.
	b.WaitText(t, `tr[data-service="app-prod/web"] [data-cert="web.example.com"]`, "issued until 2027-03-01", 5*time.Second)
	b.WaitText(t, `tr[data-service="app-prod/web"] [data-cert="www.example.com"]`, "pending on m2", 5*time.Second)
	if txt := b.Text(t, `tr[data-service="app-prod/stray"] td.certs`); txt != "-" {
		t.Errorf("a Service without hostnames has certificates %q", txt)
	}
	b.Shot(t, "services")
	b.Do(t, "scale web to 4",
		chromedp.SetValue(chromedp.CSS(`form[data-scale="app-prod/web"] input`), "4"),
		chromedp.Click(chromedp.CSS(`form[data-scale="app-prod/web"] button`)))
	b.WaitText(t, "#action-result", "completed", 10*time.Second)
	if len(src.scales) != 1 || src.scales[0] != 4 {
		t.Fatalf("the Source saw scales %v, want [4]", src.scales)
	}
	// The table follows without a reload.
	b.WaitText(t, `tr[data-service="app-prod/web"]`, "4", 5*time.Second)
	b.Shot(t, "services-scaled")

	b.Do(t, "follow the Service link", chromedp.Click(chromedp.CSS(`tr[data-service="app-prod/web"] a`)))
	b.WaitText(t, "#acks", "pending", 10*time.Second)
	b.WaitText(t, "#containers", "web-3", 5*time.Second)
	b.WaitText(t, "#routes", "https issued until 2027", 5*time.Second)
	b.WaitText(t, "#routes", "connection refused", 5*time.Second)
	b.WaitText(t, "#logs", "GET / 2", 10*time.Second)
	// m3's broken stream is named while it is down, then reopened; the
	// whole stream ending is reopened by the page.
	b.WaitText(t, "#log-streams", "m3: log stream down (log stream ended: connection reset), reopening in 1s", 5*time.Second)
	b.WaitText(t, "#logs", "~ m3: log stream reopened", 5*time.Second)
	if shown := browsertest.Eval[bool](t, b, `!document.querySelector("#log-streams").hidden`); shown {
		t.Error("the down notice stays after m3's stream was reopened")
	}
	b.WaitText(t, "#logs", "log streams ended (entry restarting), reopening in 1s", 10*time.Second)
	b.WaitText(t, "#logs", "~ log streams reopened", 5*time.Second)
	b.WaitText(t, "#gaps", "machine stopped", 10*time.Second)
	b.WaitText(t, "#gaps", "no answer: connection refused", 5*time.Second)
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll("#charts .uplot canvas").length`); n < 1 {
		t.Fatalf("%d chart canvases", n)
	}
	if h := browsertest.Eval[string](t, b, "location.hash"); h != "#/service/app-prod/web" {
		t.Fatalf("service URL %q", h)
	}
	b.Shot(t, "service")
	b.Do(t, "24h range", chromedp.Click(chromedp.CSS(`button[data-range="24h"]`)))
	b.WaitText(t, `button[aria-pressed="true"]`, "24h", 5*time.Second)
	b.Do(t, "restart web", chromedp.Click(chromedp.CSS(`button[data-restart="app-prod/web"]`)))
	b.WaitText(t, "#action-result", "completed", 10*time.Second)
	if src.restarts != 1 {
		t.Fatalf("restarts %d", src.restarts)
	}
	b.Do(t, "stop web", chromedp.Click(chromedp.CSS(`button[data-stop="app-prod/web"]`)))
	b.WaitText(t, "#action-result", "completed\nstop web", 10*time.Second)
	if len(src.stopped) != 1 || src.stopped[0] != "stop app-prod/web" {
		t.Fatalf("stops %v", src.stopped)
	}

	b.Do(t, "open the Deploys page", chromedp.Navigate(ts.URL+"/#/deploys"))
	b.WaitText(t, "#view", "restart app-prod/web", 10*time.Second)
	b.WaitText(t, "#revisions", "app-prod", 5*time.Second)
	b.Shot(t, "deploys")
	deployLive(t, b, src, ts.URL)

	volumesPages(t, b, src, ts.URL)
	jobsPage(t, b, ts.URL)

	// Keyboard: from the page's start, Tab walks the Service link, the
	// replicas field and the two buttons, in order.
	b.Do(t, "reload", chromedp.Navigate("about:blank"), chromedp.Navigate(ts.URL+"/#/services"))
	b.WaitText(t, "#services", "published", 10*time.Second)
	if walked := tabWalk(t, b, 4); walked != "A:web INPUT: BUTTON:Scale BUTTON:Restart" {
		t.Fatalf("Tab walked %q", walked)
	}

	phone(t, b, ts.URL)

	b.ColorScheme(t, "dark")
	b.Do(t, "dark", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/#/cluster"))
	b.WaitText(t, "#machines", "m1", 10*time.Second)
	if bg := browsertest.Eval[string](t, b, "getComputedStyle(document.body).backgroundColor"); bg != "rgb(18, 20, 24)" {
		t.Errorf("dark background %q", bg)
	}
	b.Shot(t, "cluster-dark")
	b.Do(t, "dark volumes", chromedp.Navigate(ts.URL+"/#/volumes"))
	b.WaitText(t, "#volume-machines", "no ZFS pool", 10*time.Second)
	b.Shot(t, "volumes-dark")
	if errs := b.Errors(); len(errs) > 0 {
		t.Fatalf("page errors: %v", errs)
	}
}

// deployLive plays a CLI deploy's record into the open Deploys page: its
// steps in flight per Machine show while it runs (on its namespace's
// Service pages too), then each Machine's
// outcome, without a reload; an older deploy's outcome is superseded.
func deployLive(t *testing.T, b *browsertest.Browser, src *fakeSource, base string) {
	t.Helper()
	start := time.Now().Add(-time.Minute)
	older := deploy.Record{DeploymentID: "d6", Namespace: "app-prod", Revision: 2, Status: "completed", StartedAt: start.Add(-time.Hour), UpdatedAt: start.Add(-time.Hour),
		Machines: []deploy.MachineRecord{{MachineID: "m1-id", Machine: "m1", Status: "completed", Completed: 3}, {MachineID: "m4-id", Machine: "m4", Status: "completed", Completed: 3}}}
	run := deploy.Record{DeploymentID: "d8", Namespace: "app-prod", Revision: 4, Why: "scale web to 3", Status: deploy.RecordRunning, StartedAt: start, UpdatedAt: time.Now(),
		Machines: []deploy.MachineRecord{
			{MachineID: "m1-id", Machine: "m1", Status: deploy.MachineRunning, Completed: 1, InFlight: []string{"web wait_ready web-4"}},
			{MachineID: "m2-id", Machine: "m2", Status: deploy.MachinePending},
			{MachineID: "m3-id", Machine: "m3", Status: deploy.MachinePending}}}
	src.setRecords(run, older)
	b.WaitText(t, `[data-deploy="d8"] tr[data-machine="m1"]`, "web wait_ready web-4", 10*time.Second)
	b.WaitText(t, `[data-deploy="d8"] h3`, "running", 5*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m2"]`, "pending", 5*time.Second)
	b.Shot(t, "deploys-running")
	// The Service page of the namespace shows the running Deploy too.
	b.Do(t, "open the Service page while d8 runs", chromedp.Navigate(base+"/#/service/app-prod/web"))
	b.WaitText(t, `[data-deploy="d8"] tr[data-machine="m1"]`, "web wait_ready web-4", 10*time.Second)
	b.Do(t, "back to the Deploys page", chromedp.Navigate(base+"/#/deploys"))
	b.WaitText(t, `[data-deploy="d8"] h3`, "running", 10*time.Second)

	run.Status, run.FinishedAt, run.UpdatedAt = "partial", time.Now(), time.Now()
	run.Machines = []deploy.MachineRecord{
		{MachineID: "m1-id", Machine: "m1", Status: "completed", Completed: 3},
		{MachineID: "m2-id", Machine: "m2", Status: "failed", Completed: 1, Failed: 1, NeverAttempted: 1, Error: "web wait_ready web-5: not ready: exited (exit code 1)"},
		{MachineID: "m3-id", Machine: "m3", Status: "never_attempted", NeverAttempted: 3}}
	src.setRecords(run, older)
	b.WaitText(t, `[data-deploy="d8"] h3`, "partial", 10*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m2"]`, "failed", 5*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m2"]`, "exit code 1", 5*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m3"]`, "never attempted", 5*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m1"]`, "d8", 5*time.Second)
	b.WaitText(t, `#outcomes tr[data-outcome="app-prod/m4"]`, "d6", 5*time.Second)
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('[data-deploy="d8"] tbody tr').length`); n != 3 {
		t.Fatalf("deploy d8 shows %d Machines, want 3", n)
	}
	b.Shot(t, "deploys-outcome")

	// A record whose CLI stopped writing is named, not shown running.
	run.Status, run.Stale = deploy.RecordRunning, true
	src.setRecords(run)
	b.WaitText(t, `[data-deploy="d8"]`, "has not written this record", 10*time.Second)
}

// phone opens every page at 390 px: tables stack into one card per row
// with each value named, and nothing on the page (a table included)
// scrolls sideways.
func phone(t *testing.T, b *browsertest.Browser, base string) {
	t.Helper()
	b.Do(t, "phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []struct{ hash, sel, want, card string }{
		{"#/cluster", "#machines", "drained since", `#machines tbody tr`},
		{"#/services", "#services", "published", `#services tbody tr`},
		{"#/service/app-prod/web", "#acks", "pending", `#containers tbody tr`},
		{"#/deploys", "#outcomes", "never attempted", `#outcomes tbody tr`},
		{"#/volumes", "#volume-machines", "no ZFS pool", `#volumes tbody tr`},
		{"#/volume/m1/db", "#snapshots", "db-restore@s1", `#snapshots tbody tr`},
		{"#/jobs", "#job-runs", "failed (exit 3)", `#job-runs tbody tr`},
	} {
		b.Do(t, "open "+p.hash+" at phone width", chromedp.Navigate(base+"/"+p.hash))
		b.WaitText(t, p.sel, p.want, 10*time.Second)
		time.Sleep(300 * time.Millisecond) // charts and late regions settle
		if w := browsertest.Eval[int](t, b, "document.documentElement.scrollWidth"); w > 390 {
			t.Errorf("%s is %dpx wide at 390 px", p.hash, w)
		}
		wide := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll("main *")].filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible" && e.tagName !== "PRE" && !e.closest(".uplot") && !e.closest("thead")).map(e => e.tagName + "#" + e.id + "." + e.className)`)
		if len(wide) > 0 {
			t.Errorf("%s: these scroll sideways at 390 px: %v", p.hash, wide)
		}
		card := browsertest.Eval[[]string](t, b, fmt.Sprintf(`(() => { const tr = document.querySelector(%q); const td = tr.querySelector("td"); return [getComputedStyle(tr).display, getComputedStyle(td, "::before").content]; })()`, p.card))
		if card[0] != "block" || card[1] == "none" || card[1] == "" || card[1] == `""` {
			t.Errorf("%s: a row at 390 px is display %q with label %q, want a card with its column named", p.hash, card[0], card[1])
		}
		b.Shot(t, "phone-"+strings.Trim(strings.ReplaceAll(p.hash, "/", "-"), "#-"))
	}
}

// volumesPages opens the Volumes page: each Machine's volumes with size,
// used, snapshots and the Containers mounting them; a Machine without a
// pool and one that did not answer are named. A volume's page lists its
// snapshots (with their copies elsewhere) and updates live; the Service
// page links the volume its Containers mount, and back.
func volumesPages(t *testing.T, b *browsertest.Browser, src *fakeSource, base string) {
	t.Helper()
	b.Do(t, "open the Volumes page from the navigation", chromedp.Navigate(base+"/#/cluster"))
	b.WaitText(t, "#machines", "m1", 10*time.Second)
	b.Do(t, "click Volumes", chromedp.Click(chromedp.CSS(`nav a[data-nav="volumes"]`)))
	b.WaitText(t, `#volumes tr[data-volume="m1/db"]`, "1GiB", 10*time.Second)
	if h := browsertest.Eval[string](t, b, "location.hash"); h != "#/volumes" {
		t.Fatalf("volumes URL %q", h)
	}
	if cur := browsertest.Eval[string](t, b, `document.querySelector('nav a[aria-current="page"]').textContent`); cur != "Volumes" {
		t.Errorf("current page in the navigation %q", cur)
	}
	cells := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#volumes tr[data-volume="m1/db"] td')].map(td => td.innerText)`)
	if strings.Join(cells[:5], "|") != "db|m1|1GiB|300MiB|2 (latest s2)" {
		t.Errorf("db's row %q", cells)
	}
	for sel, want := range map[string]string{
		`#volumes tr[data-volume="m1/cache"]`:                   "not mounted",
		`#volume-machines tr[data-machine="m1"]`:                "tank",
		`#volume-machines tr[data-machine="m2"]`:                "no ZFS pool",
		`#volume-machines tr[data-machine="m3"]`:                "no answer: connection refused",
		`#volumes tr[data-volume="m1/db"] [data-mount="web-0"]`: "web web-0 running → /data",
	} {
		b.WaitText(t, sel, want, 5*time.Second)
	}
	b.WaitText(t, `#volume-machines tr[data-machine="m2"]`, "ployz machine update m2 --zfs-pool NAME", 5*time.Second)
	// Its protection in inspect's words; within its interval, no highlight.
	b.WaitText(t, `#volumes tr[data-volume="m1/db"] [data-mirror="m2"]`, "Mirror on m2 is 12 min behind", 5*time.Second)
	b.WaitText(t, `#volumes tr[data-volume="m1/db"] [data-protection="snapshots"]`, "1 automatic snapshot(s)", 5*time.Second)
	if cls := browsertest.Eval[string](t, b, `document.querySelector('#volumes tr[data-volume="m1/db"]').className`); cls != "" {
		t.Errorf("db within its interval is highlighted: %q", cls)
	}
	b.Shot(t, "volumes")

	// Keyboard: Tab walks the volume links and the mounting Service's.
	if walked := tabWalk(t, b, 4); walked != "A:cache A:db A:web A:db-restore" {
		t.Fatalf("Tab walked %q", walked)
	}
	b.Do(t, "focus db", chromedp.Focus(chromedp.CSS(`#volumes tr[data-volume="m1/db"] td a`)), chromedp.KeyEvent("\r"))
	b.WaitText(t, "#volume-facts", "tank/ployz/volumes/db", 10*time.Second)
	if h := browsertest.Eval[string](t, b, "location.hash"); h != "#/volume/m1/db" {
		t.Fatalf("volume URL %q", h)
	}
	b.WaitText(t, `#snapshots tr[data-snapshot="s1"]`, "db-restore@s1 on m1", 5*time.Second)
	b.WaitText(t, `#volume-mounts tr[data-container="web-0"]`, "/data", 5*time.Second)
	b.WaitText(t, "#view", "No answer from m3", 5*time.Second)
	// A snapshot taken now (from the CLI) shows without a reload.
	src.mu.Lock()
	src.snaps = 3
	src.mu.Unlock()
	b.WaitText(t, `#snapshots tr[data-snapshot="s3"]`, "4KiB", 10*time.Second)
	b.Shot(t, "volume")
	src.mu.Lock()
	src.snaps = 2
	// The Mirror falls more than twice its every behind and the
	// schedule's run fails: both are said and the protection highlighted.
	src.prot["db"] = dbProtection(47*time.Minute, &volumerun.ScheduledRun{Gen: 9, Kind: "sync", State: "failed",
		Error: "send db from m1 to m2 after 0 bytes: connection reset", Started: time.Date(2026, 12, 7, 5, 28, 0, 0, time.UTC), Operator: "schedule@m1"})
	src.mu.Unlock()
	b.WaitText(t, `#volume-protection [data-protection="failed"]`, "scheduled sync run gen 9 failed (2026-12-07T05:28:00Z, schedule@m1): send db from m1 to m2 after 0 bytes: connection reset", 10*time.Second)
	b.WaitText(t, `#volume-protection [data-mirror="m2"]`, "Mirror on m2 is 47 min behind", 5*time.Second)
	if cls := browsertest.Eval[[]string](t, b, `[document.querySelector('#volume-protection').className, document.querySelector('#volume-protection [data-mirror="m2"]').className]`); strings.Join(cls, "|") != "error|overdue" {
		t.Errorf("an overdue Mirror and a failed run not highlighted: %q", cls)
	}
	b.Shot(t, "volume-protection")
	src.mu.Lock()
	src.prot["db"] = dbProtection(12*time.Minute, nil)
	src.mu.Unlock()

	b.Do(t, "follow the mounting Service", chromedp.Click(chromedp.CSS(`#volume-mounts tr[data-container="web-0"] a`)))
	b.WaitText(t, `#service-volumes tr[data-volume="m1/db"]`, "web-0", 10*time.Second)
	b.Do(t, "back to the volume from the Service page", chromedp.Click(chromedp.CSS(`#service-volumes tr[data-volume="m1/db"] a`)))
	b.WaitText(t, "#volume-facts", "tank/ployz/volumes/db", 10*time.Second)

	b.Do(t, "a volume that is not there", chromedp.Navigate(base+"/#/volume/m2/db"))
	b.WaitText(t, "#view .error", `name: no volume "db" on m2: it has no ZFS pool; it is on m1`, 10*time.Second)
}

// tabWalk presses Tab n times and names each element focused in turn
// ("TAG:text", space separated).
func tabWalk(t *testing.T, b *browsertest.Browser, n int) string {
	t.Helper()
	var walked []string
	for range n {
		b.Do(t, "tab", chromedp.KeyEvent("\t"))
		walked = append(walked, browsertest.Eval[string](t, b, "document.activeElement.tagName + ':' + document.activeElement.textContent"))
	}
	return strings.Join(walked, " ")
}

// jobsPage opens the Jobs page: each job's schedule, next tick and last
// run, its newest runs with exit code and duration, the failed ones
// highlighted, and the logs command of a run's Container.
func jobsPage(t *testing.T, b *browsertest.Browser, base string) {
	t.Helper()
	b.Do(t, "open the Jobs page from the navigation", chromedp.Navigate(base+"/#/cluster"))
	b.WaitText(t, "#machines", "m1", 10*time.Second)
	b.Do(t, "click Jobs", chromedp.Click(chromedp.CSS(`nav a[data-nav="jobs"]`)))
	b.WaitText(t, `#jobs tr[data-job="app-prod/report"]`, "failed (exit 3)", 10*time.Second)
	for sel, want := range map[string]string{
		`#jobs tr[data-job="app-prod/report"]`: "*/5 * * * *",
		`#jobs tr[data-job="app-prod/sweep"]`:  "no runs yet",
		`#job-runs tr.run-failed`:              "4s",
		`#job-runs`:                            "ployz logs report --container app-prod-report-job-ab12cd",
	} {
		b.WaitText(t, sel, want, 5*time.Second)
	}
	b.WaitText(t, `#jobs tr[data-job="app-prod/sweep"]`, "Europe/Berlin", 5*time.Second)
	if browsertest.Eval[int](t, b, `document.querySelectorAll("#jobs tr.failing").length`) != 1 {
		t.Errorf("want report alone highlighted failing")
	}
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll("#job-runs tr.run-failed").length`); n != 1 {
		t.Errorf("%d failed runs highlighted, want 1", n)
	}
	if c := browsertest.Eval[string](t, b, `getComputedStyle(document.querySelector("#job-runs tr.run-failed")).boxShadow`); !strings.Contains(c, "inset") {
		t.Errorf("a failed run is not marked: box-shadow %q", c)
	}
	b.Shot(t, "jobs")
}
