package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// protectedShop is the shop project with db as a compose-declared
// Provisioned Volume (the existing volume db) under x-volume: an hourly
// automatic snapshot kept twice, and a Mirror on m1 kept within a minute.
func protectedShop(t *testing.T) string {
	f := filepath.Join(t.TempDir(), "compose.yaml")
	doc := `name: shop
services:
  db:
    image: ` + lab.TestAppImage + `
    environment: {DATA_DIR: /data, SECRET_TOKEN: s3cret}
    ports: ["18080:8080"]
    volumes: ["data:/data"]
volumes:
  data:
    driver: ployz-zfs
    name: db
    x-volume:
      snapshots: {hourly: 2}
      mirror: {machine: m1, every: 1m}
`
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// protectionDoc is what `volume inspect --json` reports of the volume's
// scheduled protection.
type protectionDoc struct {
	Protection struct {
		SnapshotsKept int `json:"snapshots_kept"`
		Mirrors       []struct {
			Machine       string `json:"machine"`
			BehindSeconds int64  `json:"behind_seconds"`
		} `json:"mirrors"`
		Scheduled *struct {
			Kind, State, Error, Operator string
			Started                      time.Time
		} `json:"scheduled_run"`
	} `json:"protection"`
}

// vmScheduledProtection follows vmSnapshotRestore (m2 the Writer of db
// with the Service running, m1 a level Mirror): the project is deployed
// again with db declared under x-volume, and with no operator command
// m2's ployzd takes an automatic snapshot and brings the Mirror on m1
// level within its minute (plus the protect loop's minute) while the
// Service takes one-shot writes: the scheduled run is a done sync by
// schedule@m2, the marker written before it is on m1, and inspect
// reports m1 behind by less than the bound.
func vmScheduledProtection(ctx context.Context, t *testing.T, l *lab.Lab, op *operator) {
	op.must(t, "deploy", "-f", protectedShop(t), "-y")
	if out, err := fillVolume(ctx, l, "m2", "db", "scheduled", 32<<10); err != nil {
		t.Fatalf("write marker on m2: %v: %s", err, out)
	}
	want := volumeFileSum(ctx, t, l, "m2", "db", "scheduled")
	written := time.Now()

	// The write loop: one-shot POSTs to the Service on m2 throughout.
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &http.Client{Timeout: 3 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if code, _, err := oneShotURL(c, "http://"+l.Machines[1].IP.String()+":18080/append?line="+strconv.Itoa(i), ""); err == nil && code == http.StatusOK {
				ok.Add(1)
			} else {
				failed.Add(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	// Two protect rounds (a minute each) and a sync of a small volume
	// over TCG fit well within five minutes.
	var doc protectionDoc
	deadline := time.Now().Add(5 * time.Minute)
	for {
		doc = protectionDoc{}
		op.json(t, &doc, "volume", "inspect", "db", "--machine", "m2")
		s := doc.Protection.Scheduled
		if s != nil && s.State == "done" && s.Started.After(written) && doc.Protection.SnapshotsKept > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled sync done after the write within 5 min: %+v (scheduled %+v)", doc.Protection, s)
		}
		time.Sleep(10 * time.Second)
	}
	s := doc.Protection.Scheduled
	t.Logf("scheduled %s by %s done %s after the write; %d automatic snapshot(s); writes meanwhile: %d ok, %d failed",
		s.Kind, s.Operator, s.Started.Sub(written).Round(time.Second), doc.Protection.SnapshotsKept, ok.Load(), failed.Load())
	if s.Kind != "sync" || s.Operator != "schedule@m2" {
		t.Fatalf("the scheduled run: %s by %s, want a sync by schedule@m2", s.Kind, s.Operator)
	}
	if got := volumeFileSum(ctx, t, l, "m1", "db", "scheduled"); got != want {
		t.Fatalf("marker on the Mirror m1 after the scheduled sync: %s, want %s", got, want)
	}
	level := false
	for _, m := range doc.Protection.Mirrors {
		if m.Machine == "m1" {
			level = m.BehindSeconds < 150
			t.Logf("inspect: Mirror on m1 %d s behind", m.BehindSeconds)
		}
	}
	if !level {
		t.Fatalf("inspect: %+v; want the Mirror on m1 under 150 s behind", doc.Protection.Mirrors)
	}
	// A scheduled sync snapshots and streams beside the Service: it must
	// not cost the Service a write.
	if ok.Load() == 0 || failed.Load() > 0 {
		t.Fatalf("writes to the Service on m2 during the schedule: %d ok, %d failed; want all ok", ok.Load(), failed.Load())
	}
}
