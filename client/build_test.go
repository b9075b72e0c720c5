package client

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dockerclient "github.com/docker/docker/client"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/internal/fakecluster"
	"github.com/ployz/ployz/internal/prereq"
)

func TestDeliveryFailed(t *testing.T) {
	ok := []images.Result{{MachineName: "m1", Outcome: "delivered"}, {MachineName: "m2", Outcome: "present"}}
	if DeliveryFailed(ok) || DeliveryFailed(nil) {
		t.Error("a delivery that reached every Machine counted as failed")
	}
	if !DeliveryFailed(append(ok, images.Result{MachineName: "m3", Outcome: "failed"})) {
		t.Error("a Machine that failed went unnoticed")
	}
}

// TestBuildAppForMachinesPlatform: an operator on this (amd64) computer
// deploying to a Machine that reports linux/arm64 gets an arm64 image
// from the real local Docker: the target is the Machines' platform, and
// the RUN steps run in a $BUILDPLATFORM stage, so no emulation is needed.
func TestBuildAppForMachinesPlatform(t *testing.T) {
	docker := os.Getenv("DOCKER_HOST")
	fc := fakecluster.New(t, "m1")
	fc.Machine("m1").Platform = "linux/arm64"
	// The fake Cluster hides the local Docker; this build needs it.
	if docker == "" {
		os.Unsetenv("DOCKER_HOST")
	} else {
		os.Setenv("DOCKER_HOST", docker)
	}
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		prereq.Missing(t, "a Docker client", err)
	}
	defer cli.Close()
	ctx := context.Background()
	if v, err := cli.ServerVersion(ctx); err != nil {
		prereq.Missing(t, "a Docker daemon to build images", err)
	} else if v.Arch == "arm64" {
		prereq.Skip(t, "this computer builds arm64 natively; the test needs another platform")
	}
	base := dockertest.ShellImage(t)
	dir := t.TempDir()
	df := "# syntax=docker/dockerfile:1\nARG BASE\nFROM --platform=$BUILDPLATFORM $BASE AS build\nARG TARGETPLATFORM\nARG BUILDPLATFORM\n" +
		"RUN mkdir /out && echo \"$BUILDPLATFORM -> $TARGETPLATFORM\" > /out/platforms\nFROM scratch\nCOPY --from=build /out/ /\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := "ployz-clienttest-crossplatform"
	t.Cleanup(func() { dockertest.RemoveRepo(repo) })
	app := &deploy.App{Services: []deploy.Service{{Name: "web", Build: &deploy.Build{Repo: repo, Context: dir, Args: map[string]string{"BASE": base}}}}}
	var log strings.Builder
	if err := BuildApp(ctx, fc.Entry, app, Build{Log: &log, Output: &log}); err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	tag := app.Services[0].Spec.Image
	info, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	if info.Os+"/"+info.Architecture != "linux/arm64" {
		t.Fatalf("%s is %s/%s, want linux/arm64 (the Machine's)", tag, info.Os, info.Architecture)
	}
	if !strings.Contains(log.String(), "-> linux/arm64") {
		t.Errorf("the build stage did not see TARGETPLATFORM linux/arm64:\n%s", log.String())
	}
}

// TestBuildRequestCarriesBuildInputs: what the compose file's build:
// declares beyond context and arguments reaches BuildKit.
func TestBuildRequestCarriesBuildInputs(t *testing.T) {
	b := deploy.Build{Repo: "r", Context: "/c", Dockerfile: "D", Target: "final",
		Secrets: []images.BuildSecret{{ID: "token", File: "/c/token"}, {ID: "npm", Env: "NPM_TOKEN"}},
		SSH:     []string{"default"}, AdditionalContexts: map[string]string{"assets": "/a"}, CacheFrom: []string{"r:cache"}}
	req := buildRequest(b, map[string]string{"A": "1"}, "linux/arm64")
	want := []images.BuildSecret{{ID: "token", File: "/c/token"}, {ID: "npm", Env: "NPM_TOKEN"}}
	if !slices.Equal(req.Secrets, want) || !slices.Equal(req.SSH, b.SSH) || req.AdditionalContexts["assets"] != "/a" ||
		!slices.Equal(req.CacheFrom, b.CacheFrom) || req.Platform != "linux/arm64" || req.Args["A"] != "1" || req.Target != "final" || req.Dockerfile != "D" {
		t.Fatalf("request %+v", req)
	}
}

// TestBuildComposeShapes: a missing compose file is named; a file with
// no build: Service builds nothing and answers an empty (not nil) tag
// map and no deliveries, so `ployz build --json` prints {}.
func TestBuildComposeShapes(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadCompose(t.Context(), filepath.Join(dir, "nope.yaml"), "", "production"); err == nil || !strings.Contains(err.Error(), "compose file: ") {
		t.Fatalf("missing file: %v", err)
	}
	f := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(f, []byte("name: shop\nservices:\n  web:\n    image: app:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	app, err := LoadCompose(t.Context(), f, "", "production")
	if err != nil {
		t.Fatal(err)
	}
	res, err := BuildCompose(t.Context(), nil, app, Build{}, nil)
	if err != nil || res.Images == nil || len(res.Images) != 0 || res.Deliveries != nil || len(res.Services) != 0 {
		t.Fatalf("no build: Service: %+v %v", res, err)
	}
}
