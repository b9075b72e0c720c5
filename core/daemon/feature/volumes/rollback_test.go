package volumes

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/internal/dockertest"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// fakeVolumes is a volume plugin over real gRPC. It is a fake because the
// real one (plugins/volume-zfs) runs zfs, which exists only on the VM
// lab's Machines; TestVMLab/snapshot-restore runs the real one.
type fakeVolumes struct {
	volumev1.UnimplementedVolumeServer
	held    string        // the volume whose Rollback waits for release
	entered chan struct{} // a Rollback of held has begun
	release chan struct{}
}

func (p *fakeVolumes) GetVolume(_ context.Context, req *volumev1.GetVolumeRequest) (*volumev1.GetVolumeResponse, error) {
	return &volumev1.GetVolumeResponse{Volume: &volumev1.VolumeInfo{Name: req.GetName()}}, nil
}

func (p *fakeVolumes) Rollback(ctx context.Context, req *volumev1.RollbackRequest) (*volumev1.RollbackResponse, error) {
	if req.GetVolume() == p.held {
		p.entered <- struct{}{}
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &volumev1.RollbackResponse{Volume: &volumev1.VolumeInfo{Name: req.GetVolume()}, Destroyed: []string{"run-3"}}, nil
}

// pluginConn is a plugin host with one healthy plugin serving every
// capability over conn.
type pluginConn struct{ conn *grpc.ClientConn }

func (pluginConn) Available(string) bool { return true }
func (p pluginConn) Call(ctx context.Context, _ string, fn func(context.Context, *grpc.ClientConn) error) error {
	return fn(ctx, p.conn)
}

// volumeHost is testHost with a pool, the volume plugin and this host's
// real Docker (copyFacts lists its Containers: none mounts a ployz
// volume).
type volumeHost struct {
	testHost
	plugins feature.Plugins
	docker  client.APIClient
}

func (volumeHost) Machine() machine.Record {
	return machine.Record{ID: "self", Name: "self", Phase: machine.Participating, Labels: map[string]string{volume.PoolLabel: "tank"}}
}
func (h volumeHost) Plugins() feature.Plugins { return h.plugins }
func (h volumeHost) Docker() client.APIClient { return h.docker }

// newVolumeTest is the feature over plugin p, with Writer copies of
// volumes.
func newVolumeTest(t *testing.T, p *fakeVolumes, volumes ...string) *Feature {
	t.Helper()
	docker := dockertest.Client(t)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	volumev1.RegisterVolumeServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///plugin", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, _ := featuretest.Store(t, "self")
	f := New(context.Background(), volumeHost{testHost: testHost{h}, plugins: pluginConn{conn}, docker: docker}, hclog.NewNullLogger())
	for _, v := range volumes {
		if err := f.volumeCreated(v); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

type rolledBack struct {
	out rpc.VolumeRolledBack
	err error
}

// rollback runs rollback_volume of volume name to its snapshot keep in
// the background.
func rollback(ctx context.Context, f *Feature, name string) chan rolledBack {
	done := make(chan rolledBack, 1)
	go func() {
		out, err := f.rollbackVolume(ctx, rpc.RollbackVolumeRequest{Volume: name, Gen: 1, Snapshot: "keep", DestroyNewer: true})
		done <- rolledBack{out, err}
	}()
	return done
}

// TestRollbackVolumeAnswers: rollback_volume answers the volume after
// and what went. It once never answered (TestVMLab/snapshot-restore, 4
// minutes in the CLI): it ran the plugin call under the copy store's
// lock and then built its answer with a read of that same store, a
// non-reentrant mutex, so it waited on itself after zfs had rolled back.
func TestRollbackVolumeAnswers(t *testing.T) {
	f := newVolumeTest(t, &fakeVolumes{}, "db")
	select {
	case r := <-rollback(context.Background(), f, "db"):
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.out.Volume.Name != "db" || r.out.Volume.Copy == nil || r.out.Volume.Copy.Role != volumecopy.Writer || strings.Join(r.out.Destroyed, ",") != "run-3" {
			t.Fatalf("answer: %+v (copy %+v)", r.out, r.out.Volume.Copy)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("rollback_volume did not answer within 20s (it waits on the copy store's lock it holds)")
	}
}

// TestRollbackHoldsOnlyItsVolume: while a rollback of db waits on the
// plugin, the copy records are read (each Container start's admission
// reads them) and another volume rolls back; a second change to db waits
// and gives up when its request ends, naming the volume; db's rollback
// answers once the plugin does.
func TestRollbackHoldsOnlyItsVolume(t *testing.T) {
	p := &fakeVolumes{held: "db", entered: make(chan struct{}, 1), release: make(chan struct{})}
	f := newVolumeTest(t, p, "db", "logs")
	first := rollback(context.Background(), f, "db")
	select {
	case <-p.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("db's rollback never reached the plugin")
	}
	within := func(what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { fn(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waited behind db's rollback", what)
		}
	}
	within("CopyRoles", func() {
		if roles := f.CopyRoles(); roles["db"].Role != volumecopy.Writer || roles["logs"].Role != volumecopy.Writer {
			t.Errorf("copy roles: %+v", roles)
		}
	})
	within("logs' rollback", func() {
		if r := <-rollback(context.Background(), f, "logs"); r.err != nil {
			t.Errorf("logs' rollback: %v", r.err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	within("a second rollback of db (bounded by its request)", func() {
		r := <-rollback(ctx, f, "db")
		var e *rpc.Error
		if r.err == nil || !errors.As(r.err, &e) || e.Code != rpc.CodeUnavailable || !strings.Contains(e.Message, `another change to volume "db"`) {
			t.Errorf("second rollback of db: %v; want unavailable naming db's change in progress", r.err)
		}
	})
	within("set_volume_copy of db (bounded by its request)", func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := f.setVolumeCopy(ctx, rpc.SetVolumeCopyRequest{Volume: "db", Gen: 2, Expect: volumecopy.Writer, Want: volumecopy.Mirror})
		if err == nil || !strings.Contains(err.Error(), `another change to volume "db"`) {
			t.Errorf("set_volume_copy during db's rollback: %v", err)
		}
	})
	close(p.release)
	select {
	case r := <-first:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("db's rollback did not answer after the plugin did")
	}
	if got := f.CopyRoles()["db"].Role; got != volumecopy.Writer {
		t.Fatalf("db after: %s, want writer (the refused set_volume_copy changed nothing)", got)
	}
}
