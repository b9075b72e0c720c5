package dashboard

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/core/volumes"
)

// fakeSource is a Cluster of three Machines held in memory; Scale changes
// what Services reports, as a deploy would.
type fakeSource struct {
	mu       sync.Mutex
	replicas int
	scales   []int
	restarts int
	stopped  []string
	metrics  []MachineMetrics
	records  []deploy.Record
	logCalls int
	// snaps is how many snapshots m1's volume db has.
	snaps int
	// prot is the protection of m1's volumes, by name.
	prot map[string]VolumeProtection
}

// setRecords replaces the Deploy records the Deploys page reads, as a
// CLI deploy rewriting its record would.
func (f *fakeSource) setRecords(recs ...deploy.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = recs
}

func newFake() *fakeSource {
	return &fakeSource{replicas: 2, snaps: 2, prot: map[string]VolumeProtection{"db": dbProtection(12*time.Minute, nil)}}
}

// dbProtection is db's protection on m1: one automatic snapshot, a
// Mirror on m2 behind by lag (every 15m) and the newest scheduled run.
func dbProtection(lag time.Duration, scheduled *volumerun.ScheduledRun) VolumeProtection {
	now := time.Date(2026, 12, 7, 5, 30, 0, 0, time.UTC)
	last := now.Add(-30 * time.Minute)
	return VolumeProtection{MirrorEvery: "15m", Protection: volumerun.Protection{LastSnapshot: &last, SnapshotsKept: 1, Scheduled: scheduled,
		Mirrors: []volumerun.MirrorLag{{Machine: "m2", Gen: 7, Kind: "sync", Synced: now.Add(-lag), BehindSeconds: int64(lag / time.Second)}}}}
}

// dbMount is web-0 on m1 mounting the volume db.
var dbMount = volumes.Mount{Machine: "m1", Volume: "db", Namespace: "app-prod", Service: "web", Container: "web-0", State: "running",
	Path: "/var/lib/ployz/volumes/db", Target: "/data"}

// Volumes: m1 has a pool with db (f.snaps snapshots; db-restore holds a
// copy of its first) and the unmounted cache, m2 has no pool, m3 did not
// answer.
func (f *fakeSource) Volumes(context.Context) (Volumes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	db := rpc.Volume{MachineID: "m1-id", Name: "db", Pool: "tank", Dataset: "tank/ployz/volumes/db", Mountpoint: "/var/lib/ployz/volumes/db",
		SizeBytes: 1 << 30, UsedBytes: 300 << 20, Created: t0.UnixNano(), Snapshots: []rpc.VolumeSnapshot{}}
	for i := 0; i < f.snaps; i++ {
		db.Snapshots = append(db.Snapshots, rpc.VolumeSnapshot{Name: fmt.Sprintf("s%d", i+1), Created: t0.Add(time.Duration(i+1) * time.Hour).UnixNano(),
			UsedBytes: 4096, GUID: fmt.Sprint(1000 + i)})
	}
	restore := rpc.Volume{MachineID: "m1-id", Name: "db-restore", Pool: "tank", Mountpoint: "/var/lib/ployz/volumes/db-restore", UsedBytes: 200 << 20,
		Snapshots: []rpc.VolumeSnapshot{{Name: "s1", GUID: "1000"}}}
	cache := rpc.Volume{MachineID: "m1-id", Name: "cache", Pool: "tank", Mountpoint: "/var/lib/ployz/volumes/cache", Snapshots: []rpc.VolumeSnapshot{}}
	return Volumes{Machines: []VolumeMachine{
		{MachineVolumes: volumes.MachineVolumes{Machine: "m1", MachineID: "m1-id", List: &rpc.VolumeList{MachineID: "m1-id", Pool: "tank", Health: "ONLINE", FreeBytes: 9 << 30,
			Volumes: []rpc.Volume{cache, db, restore}}}, Protection: maps.Clone(f.prot)},
		{MachineVolumes: volumes.MachineVolumes{Machine: "m2", MachineID: "m2-id", List: &rpc.VolumeList{MachineID: "m2-id", Volumes: []rpc.Volume{}}}},
		{MachineVolumes: volumes.MachineVolumes{Machine: "m3", MachineID: "m3-id", Error: "connection refused"}},
	}, Mounts: []volumes.Mount{dbMount}}, nil
}

func (f *fakeSource) Cluster(context.Context) (Cluster, error) {
	c := Cluster{Observer: "m1", ObservedAt: time.Now()}
	for i, ms := range []string{"self", "up", "down"} {
		name := fmt.Sprintf("m%d", i+1)
		m := Machine{MachineView: rpc.MachineView{ID: name + "-id", Name: name, Phase: "running", Membership: ms, RTTMillis: 1.5, Version: "0.9.0",
			Capabilities: []string{"ployz.logs.v1"}}, Plugins: []rpc.PluginView{{Name: "logstore", Version: "0.9.0", Health: "healthy", Capabilities: []string{"ployz.logs.v1"}}}}
		if i == 2 {
			m.DrainedSince, m.Plugins, m.PluginsError = "2026-12-01T10:00:00Z", nil, "no answer"
		}
		c.Machines = append(c.Machines, m)
	}
	return c, nil
}

func (f *fakeSource) Services(context.Context) (Services, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Services{Services: []ServiceRow{
		{ServiceRow: views.ServiceRow{Namespace: "app-prod", Service: "web", Desired: fmt.Sprint(f.replicas), Running: f.replicas, Ready: f.replicas, Total: f.replicas},
			Execution: "ready", Ingress: "published", Scalable: true, Certificates: []CertSummary{
				{Hostname: "web.example.com", State: "issued", NotAfter: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).Unix()},
				{Hostname: "www.example.com", State: "pending", Detail: "pending on m2; issued on m1"}}},
		{ServiceRow: views.ServiceRow{Namespace: "app-prod", Service: "stray", Desired: "-", Running: 1, Ready: 1, Total: 1},
			Execution: "stopped", Ingress: "not configured"},
	}}, nil
}

func (f *fakeSource) Service(_ context.Context, ns, svc string) (Service, error) {
	if ns != "app-prod" || svc != "web" {
		return Service{}, fmt.Errorf("service %q: no Container found in %s", svc, ns)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Service{Namespace: ns, Service: svc, Desired: f.replicas, Running: f.replicas, Ready: f.replicas, Execution: "ready", Ingress: "published",
		Routes: []RouteView{{Machine: "m1", Route: "web.example.com", State: "published", Upstreams: []string{"10.0.0.2:8080"}, Certificate: "https issued until 2027-03-01T00:00:00Z by Let's Encrypt"},
			{Machine: "m3", Error: "connection refused"}},
		Serving: &rpc.ServiceServing{Service: ns + "/" + svc, Pointer: "p7", Deployment: "d7",
			Acks: []rpc.ServingAck{{Machine: "m1", Membership: "self", Acked: "p7"}, {Machine: "m2", Membership: "up", Acked: "p6"}}}}
	s.Volumes = []volumes.Mount{dbMount}
	for _, r := range f.records {
		if r.Namespace == ns && r.Status == deploy.RecordRunning && !r.Stale {
			s.Deploying = &r
			break
		}
	}
	for i := 0; i < f.replicas; i++ {
		s.Containers = append(s.Containers, Container{Machine: fmt.Sprintf("m%d", i%3+1),
			ContainerObservation: rpc.ContainerObservation{Name: fmt.Sprintf("web-%d", i), State: "running", Ready: true, Deployment: "d7"}, LastExit: "-"})
	}
	return s, nil
}

func (f *fakeSource) Deploys(context.Context) (Deploys, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Deploys{Records: f.records, LastOutcomes: deploy.LastOutcomes(f.records), Revisions: []Revision{{Namespace: "app-prod", Project: "app", Environment: "prod", Revision: 3, Latest: true, CreatedAt: time.Now()}},
		Running: []NamespaceDeployment{{Namespace: "app-prod", Machine: "m1", Deployments: []string{"d7"}}}}, nil
}

func (f *fakeSource) Metrics(_ context.Context, q MetricsQuery) ([]MachineMetrics, error) {
	if f.metrics != nil {
		return f.metrics, nil
	}
	// m1 sampled throughout but for a named 10-minute gap; m2 did not answer.
	var pts []rpc.MetricPoint
	gapFrom, gapTo := q.Until.Add(-30*time.Minute), q.Until.Add(-20*time.Minute)
	for t := q.Since; t.Before(q.Until); t = t.Add(10 * time.Second) {
		if t.After(gapFrom) && t.Before(gapTo) {
			continue
		}
		pts = append(pts, rpc.MetricPoint{Time: t.UnixNano(), Value: 0.25})
	}
	return []MachineMetrics{
		{Machine: "m1", Answer: &rpc.MetricsAnswer{Series: []rpc.MetricSeries{{Metric: "cpu.cores", Points: pts}},
			Gaps:    []rpc.MetricGap{{Metric: "cpu.cores", From: gapFrom.UnixNano(), To: gapTo.UnixNano(), Reason: "machine stopped"}},
			Markers: []rpc.MetricMarker{{Time: q.Until.Add(-10 * time.Minute).UnixNano(), Kind: "deploy", Detail: "d7"}}}},
		{Machine: "m2", Error: "connection refused"},
	}, nil
}

// Logs follows like the CLI's Source: m3's stream breaks after two lines
// and is reopened 1.5 s later; the first follow of all ends after 3 s (the
// page reopens it).
func (f *fakeSource) Logs(ctx context.Context, ns, svc string, emit func(LogLine)) error {
	f.mu.Lock()
	f.logCalls++
	first := f.logCalls == 1
	f.mu.Unlock()
	for i := 0; ; i++ {
		emit(LogLine{Machine: fmt.Sprintf("m%d", i%3+1), Container: "web-0", Time: time.Now().Format("15:04:05.000"), Text: fmt.Sprintf("GET / %d", i)})
		switch {
		case first && i == 1:
			emit(LogLine{Machine: "m3", Error: "log stream ended: connection reset", Stream: "down", RetrySeconds: 1})
		case first && i == 15:
			emit(LogLine{Machine: "m3", Stream: "up"})
		case first && i == 30:
			return fmt.Errorf("entry restarting")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fakeSource) Scale(_ context.Context, ns, svc string, n int, out io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(out, "scale %s to %d\nplan for %s\n", svc, n, ns)
	f.scales = append(f.scales, n)
	f.replicas = n
	return nil
}

func (f *fakeSource) Restart(_ context.Context, ns, svc string, out io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restarts++
	fmt.Fprintf(out, "restart %s\n", svc)
	return nil
}

// serve starts a Server over src on a loopback port; ts.Client() has
// opened its launch URL, so it holds the session cookie.
func serve(t *testing.T, src Source, poll time.Duration) (*Server, *httptest.Server) {
	t.Helper()
	s, ts := serveUnbound(t, src, poll)
	jar, _ := cookiejar.New(nil)
	ts.Client().Jar = jar
	r, err := ts.Client().Get(s.LaunchURL())
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK || len(jar.Cookies(r.Request.URL)) != 1 {
		t.Fatalf("launch: %s, cookies %v", r.Status, jar.Cookies(r.Request.URL))
	}
	return s, ts
}

// serveUnbound starts a Server no client has opened yet.
func serveUnbound(t *testing.T, src Source, poll time.Duration) (*Server, *httptest.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(src, Options{Listen: ln.Addr().String(), Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return s, ts
}

func (f *fakeSource) StartStop(_ context.Context, ns, svc, verb string, out io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, verb+" "+ns+"/"+svc)
	fmt.Fprintf(out, "%s %s\n", verb, svc)
	return nil
}

// Jobs: app-prod/report's newest run failed (exit 3) after a success;
// app-prod/sweep has not run yet.
func (f *fakeSource) Jobs(context.Context) (Jobs, error) {
	three, zero := 3, 0
	tick := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return JobsPage(rpc.JobList{Jobs: []rpc.JobView{
		{Namespace: "app-prod", Service: "report", Cron: "*/5 * * * *", Concurrency: "forbid", Image: "app/report:1", Next: tick.Add(10 * time.Minute).UnixMilli(),
			Runs: []store.JobRunBody{
				{Job: "app-prod/report", Tick: tick.Add(5 * time.Minute).UnixMilli(), Status: store.JobRunFailed, MachineName: "m2", Container: "app-prod-report-job-ab12cd",
					Started: tick.Add(5 * time.Minute).UnixMilli(), Ended: tick.Add(5*time.Minute + 4*time.Second).UnixMilli(), ExitCode: &three, DurationMS: 4000, Error: "exit code 3"},
				{Job: "app-prod/report", Tick: tick.UnixMilli(), Status: store.JobRunSucceeded, MachineName: "m1", Container: "app-prod-report-job-0f0f0f",
					ExitCode: &zero, DurationMS: 1200},
			}},
		{Namespace: "app-prod", Service: "sweep", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Concurrency: "allow", Image: "app/sweep:1", Runs: []store.JobRunBody{}},
	}}), nil
}
