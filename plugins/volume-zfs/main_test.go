package main_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/plugins/volume-zfs/internal/zfsvol"
	"github.com/ployz/ployz/sdk/plugintest"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// TestPluginWithoutPool runs the real binary as ployzd does. This host has
// no ZFS, so it checks what needs none: the capabilities advertised, the
// spec kept through Configure, and that a Machine without a pool refuses
// every volume call naming the label, and bad names naming the field.
// TestVMVolumes (e2e) runs the ZFS side on the VM lab.
func TestPluginWithoutPool(t *testing.T) {
	specPath := filepath.Join(t.TempDir(), "volume-zfs.json")
	t.Setenv(zfsvol.SpecPathEnv, specPath)
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/volume-zfs")
	p := plugintest.Start(t, bin)
	if p.Info.GetName() != "volume-zfs" || p.Info.GetKind() != "volume" {
		t.Fatalf("Info = %v", p.Info)
	}
	for _, c := range volume.Capabilities {
		if !slices.Contains(p.Info.GetCapabilities(), c) {
			t.Errorf("capability %s not advertised (%v)", c, p.Info.GetCapabilities())
		}
	}
	ctx := context.Background()
	c := volumev1.NewVolumeClient(p.Conn)

	pool, err := c.Pool(ctx, &volumev1.PoolRequest{})
	if err != nil || pool.GetConfigured() {
		t.Fatalf("Pool without a spec = %v, %v; want configured=false", pool, err)
	}
	_, err = c.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 1 << 30})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), volume.PoolLabel) {
		t.Fatalf("CreateVolume without a pool: %v; want FailedPrecondition naming %s", err, volume.PoolLabel)
	}
	_, err = c.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "Bad/Name", SizeBytes: 1 << 30})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "name:") {
		t.Fatalf("CreateVolume with a bad name: %v; want InvalidArgument naming name", err)
	}
	_, err = c.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 10})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "size_bytes:") {
		t.Fatalf("CreateVolume with a tiny size: %v; want InvalidArgument naming size_bytes", err)
	}
	_, err = c.Pool(ctx, &volumev1.PoolRequest{Pool: "no/pool"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Pool(no/pool): %v; want InvalidArgument", err)
	}

	// A spec naming a bad pool is refused and not kept; a good one is kept.
	api := p.Configure(t, []byte(`{"pool":"ployz","machine_id":"m1"}`))
	b, err := os.ReadFile(specPath)
	if err != nil || !strings.Contains(string(b), `"ployz"`) {
		t.Fatalf("kept spec = %q, %v", b, err)
	}
	if _, err := p.Base.Configure(ctx, &pluginv1.ConfigureRequest{ApiVersion: api, Config: []byte(`{"pool":"a/b"}`)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Configure with a bad pool: %v", err)
	}
	if b2, _ := os.ReadFile(specPath); string(b2) != string(b) {
		t.Fatalf("a refused spec was kept: %q", b2)
	}
	// The pool is set now, and this host has no zpool: named as such.
	_, err = c.ListVolumes(ctx, &volumev1.ListVolumesRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `"ployz"`) {
		t.Fatalf("ListVolumes on a host without the pool: %v", err)
	}
}
