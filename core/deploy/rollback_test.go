package deploy

import (
	"reflect"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

func TestImagesNowhere(t *testing.T) {
	app := App{Services: []Service{
		{Name: "web", Spec: rpc.ContainerSpec{Image: "web:build-abc"}},                    // held by m1
		{Name: "api", Spec: rpc.ContainerSpec{Image: "api:build-old"}},                    // held by nobody
		{Name: "db", Spec: rpc.ContainerSpec{Image: "registry.example.com/db:16"}},        // a registry can supply it
		{Name: "cache", Spec: rpc.ContainerSpec{Image: "redis"}},                          // only on m3, whose images were not read
		{Name: "proxy", Spec: rpc.ContainerSpec{Image: "localhost:5000/proxy:2"}},         // a local registry
		{Name: "worker", Spec: rpc.ContainerSpec{Image: "team/worker@sha256:" + hex64()}}, // Docker Hub by digest: no host named
	}}
	snap := Snapshot{Machines: []MachineState{
		{ID: "1", Name: "m1", ImagesKnown: true, Images: []string{"web:build-abc", "sha256:1"}},
		{ID: "2", Name: "m2", ImagesKnown: true, Images: []string{"api:build-new"}},
		{ID: "3", Name: "m3", ImagesKnown: false, Images: []string{"redis:latest"}},
	}}
	got := ImagesNowhere(app, snap)
	want := []MissingImage{{Service: "api", Image: "api:build-old"}, {Service: "cache", Image: "redis"}, {Service: "worker", Image: "team/worker@sha256:" + hex64()}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ImagesNowhere = %+v\nwant %+v", got, want)
	}
	snap.Machines[1].Images = append(snap.Machines[1].Images, "api:build-old", "redis:latest", "team/worker@sha256:"+hex64())
	if got := ImagesNowhere(app, snap); len(got) != 0 {
		t.Fatalf("every image held: %+v", got)
	}
}

func hex64() string { return "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" }

// A record keeps the image each declared Service ran, a built tag
// included, so a rollback can run it again.
func TestRecordKeepsImages(t *testing.T) {
	p := Plan{DeploymentID: "d1", Revision: 3, Services: []ServiceSummary{{Name: "web", Image: "web:build-abc"}, {Name: "api", Image: "api:1"}, {Name: "gone"}}}
	rec, _ := NewRecorder(p, "", time.Now()).Take(time.Now())
	if want := map[string]string{"web": "web:build-abc", "api": "api:1"}; !reflect.DeepEqual(rec.Images, want) {
		t.Fatalf("record images = %v, want %v", rec.Images, want)
	}
}
