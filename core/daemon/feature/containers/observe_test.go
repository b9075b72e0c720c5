package containers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// storeVersion is the store's own head version: it moves on every write.
func storeVersion(t *testing.T, st *sdkstore.Client) int64 {
	t.Helper()
	h, err := st.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h.Vector[h.ActorID]
}

// TestSyncOwned makes an owner's rows exactly what it wants: new rows
// written, changed rows rewritten, gone rows deleted, unchanged rows not
// written at all, and another owner's rows never touched.
func TestSyncOwned(t *testing.T) {
	_, st := featuretest.Store(t, "me")
	ctx := context.Background()
	vols := store.Volumes(st)
	if _, err := vols.Put(ctx, sdkstore.Row[store.VolumeBody]{Key: "other/x", Owner: "other", Body: store.VolumeBody{Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]store.VolumeBody{"me/a": {Name: "a", Driver: "local"}, "me/b": {Name: "b", Driver: "local"}}
	if err := syncOwned(ctx, vols, "me", want); err != nil {
		t.Fatal(err)
	}
	v := storeVersion(t, st)
	if err := syncOwned(ctx, vols, "me", want); err != nil {
		t.Fatal(err)
	}
	if got := storeVersion(t, st); got != v {
		t.Fatalf("an unchanged sync wrote: version %d -> %d", v, got)
	}
	want = map[string]store.VolumeBody{"me/a": {Name: "a", Driver: "zfs"}}
	if err := syncOwned(ctx, vols, "me", want); err != nil {
		t.Fatal(err)
	}
	rows, err := vols.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.VolumeBody{}
	for _, r := range rows {
		got[r.Key] = r.Body
	}
	if len(got) != 2 || got["me/a"].Driver != "zfs" || got["other/x"].Name != "x" {
		t.Fatalf("rows after sync %+v", got)
	}
}

// TestRescan publishes this Machine's containers and volumes from real
// Docker: a Service Container's row carries its identity and only the
// names of its environment, a removed Container's row goes, and a
// resetting Machine writes nothing.
func TestRescan(t *testing.T) {
	to, rows, st := observedOps(t)
	ctx := context.Background()
	const secret = "hunter2-never-leaves"
	spec := to.Spec("web", map[string]string{"API_TOKEN": secret, "MODE": "x"})
	spec.Mounts = []rpc.MountSpec{{Type: "volume", Source: to.Namespace + "-data", Target: "/data"}}
	id := to.createStart(t, "web", spec)
	if _, err := st.Containers().Put(ctx, sdkstore.Row[sdkstore.ContainerBody]{Key: "someone-elses", Owner: "other", Body: sdkstore.ContainerBody{State: "running"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Containers().Put(ctx, sdkstore.Row[sdkstore.ContainerBody]{Key: "long-gone", Owner: to.facts.MachineID, Body: sdkstore.ContainerBody{State: "running"}}); err != nil {
		t.Fatal(err)
	}

	if err := to.rescan(ctx, to.Cli); err != nil {
		t.Fatal(err)
	}
	row, ok, err := st.Containers().Get(ctx, id)
	if err != nil || !ok {
		t.Fatalf("row of %s: ok=%v err=%v", feature.Short(id), ok, err)
	}
	b := row.Body
	if row.Owner != to.facts.MachineID || b.Namespace != to.Namespace || b.Service != "web" || b.ServiceID != "sid-web" || b.SpecHash != "hash1" ||
		b.State != "running" || b.Name != to.Name("web") || b.Session == "" || !slices.Contains(b.EnvNames, "API_TOKEN") || !slices.Contains(b.EnvNames, "MODE") {
		t.Fatalf("row %+v owner %s", b, row.Owner)
	}
	raw, _ := json.Marshal(b)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("an environment value left the Machine: %s", raw)
	}
	if _, ok, _ := st.Containers().Get(ctx, "long-gone"); ok {
		t.Fatal("the row of a Container Docker no longer has survived the rescan")
	}
	if _, ok, _ := st.Containers().Get(ctx, "someone-elses"); !ok {
		t.Fatal("the rescan deleted another Machine's row")
	}
	vol := to.facts.MachineID + "/" + to.Namespace + "-data"
	if r, ok, _ := store.Volumes(st).Get(ctx, vol); !ok || r.Body.Name != to.Namespace+"-data" || r.Body.Driver != "local" {
		t.Fatalf("volume row %s: %+v ok=%v", vol, r.Body, ok)
	}

	// Resetting: the remover just deleted this Machine's rows; a rescan
	// must not put them back.
	if err := to.Cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	rows.resetting.Store(true)
	if err := to.rescan(ctx, to.Cli); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Containers().Get(ctx, id); !ok {
		t.Fatal("a resetting Machine's rescan wrote (deleted a row)")
	}
	rows.resetting.Store(false)
	if err := to.rescan(ctx, to.Cli); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Containers().Get(ctx, id); ok {
		t.Fatal("the row of a removed Container survived the rescan")
	}
	if err := to.Cli.VolumeRemove(ctx, to.Namespace+"-data", true); err != nil {
		t.Fatal(err)
	}
	if err := to.rescan(ctx, to.Cli); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Volumes(st).Get(ctx, vol); ok {
		t.Fatal("the row of a removed volume survived the rescan")
	}
}

// TestObserveLoopFollowsEvents runs the observe loop against Docker's
// event stream: a started Container's row appears without waiting for
// the periodic rescan, and neither does a kill's.
func TestObserveLoopFollowsEvents(t *testing.T) {
	to, _, st := observedOps(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { to.ObserveLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond) // the first rescan and the event stream are up

	id := to.createStart(t, "api", to.Spec("api", nil))
	waitRow(t, st, id, 10*time.Second, func(b sdkstore.ContainerBody) bool { return b.State == "running" })
	if err := to.Cli.ContainerKill(context.Background(), id, "KILL"); err != nil {
		t.Fatal(err)
	}
	// The periodic rescan is 30 s away: only the event path meets 10 s.
	waitRow(t, st, id, 10*time.Second, func(b sdkstore.ContainerBody) bool { return b.State == "exited" && !b.Ready })
	if err := to.Cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, st, id, 5*time.Second)

	// A volume event triggers a rescan too.
	name := to.Namespace + "-v"
	if _, err := to.Cli.VolumeCreate(context.Background(), volume.CreateOptions{Name: name, Labels: map[string]string{rpc.LabelNamespace: to.Namespace}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok, _ := store.Volumes(st).Get(context.Background(), to.facts.MachineID+"/"+name); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a created volume was not published")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitRow(t *testing.T, st *sdkstore.Client, id string, within time.Duration, cond func(sdkstore.ContainerBody) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last sdkstore.ContainerBody
	for time.Now().Before(deadline) {
		r, ok, err := st.Containers().Get(context.Background(), id)
		if err == nil && ok {
			if last = r.Body; cond(last) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("row of %s never matched; last %+v", feature.Short(id), last)
}

func waitGone(t *testing.T, st *sdkstore.Client, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if _, ok, err := st.Containers().Get(context.Background(), id); err == nil && !ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("row of %s was not deleted", feature.Short(id))
}
