package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/internal/prereq"
)

func dockerOrSkip(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		prereq.Missing(t, "a Docker client", err)
	}
	if _, err := cli.Ping(context.Background()); err != nil {
		prereq.Missing(t, "a Docker daemon to build images", err)
	}
	return cli
}

func TestBuildTagsByContent(t *testing.T) {
	cli := dockerOrSkip(t)
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("build/Dockerfile.app", "FROM scratch AS base\nARG GREETING=none\nLABEL greeting=$GREETING\nCOPY app.txt /app.txt\nFROM base AS final\nCOPY extra.txt /extra.txt\n")
	write("app.txt", "v1")
	write("extra.txt", "x")
	write("node_modules/huge.bin", "ignored")
	write(".dockerignore", "node_modules\n")
	repo := "ployz-buildtest-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() { dockertest.RemoveRepo(repo) })
	req := BuildRequest{Repo: repo, Context: dir, Dockerfile: "build/Dockerfile.app", Target: "base", Args: map[string]string{"GREETING": "hi"}}
	var log strings.Builder
	req.Progress = func(e BuildEvent) { fmt.Fprintf(&log, "%s %s %v\n", e.Step, e.Log, e.Done) }
	b1, err := Build(ctx, req)
	if err != nil || !b1.Built {
		t.Fatalf("build: %v %+v\n%s", err, b1, log.String())
	}
	tag1 := b1.Tag
	if dry, err := InputTag(req); err != nil || dry != tag1 {
		t.Fatalf("input tag %q (%v), build tagged %q", dry, err, tag1)
	}
	if !strings.HasPrefix(tag1, repo+":") || len(strings.TrimPrefix(tag1, repo+":")) != 12 {
		t.Fatalf("tag %q is not repo:<12 hex>", tag1)
	}
	info, err := cli.ImageInspect(ctx, tag1)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Labels["greeting"] != "hi" {
		t.Fatalf("build arg not applied: labels %v", info.Config.Labels)
	}
	// Starting is heard only when a build starts: an unchanged context
	// says nothing of building.
	var starts []string
	req.Starting = func(tag string) { starts = append(starts, tag) }
	if b2, err := Build(ctx, req); err != nil || b2.Tag != tag1 || b2.Built || len(starts) != 0 {
		t.Fatalf("same context: %+v (%v, started %v), want %q not built", b2, err, starts, tag1)
	}
	if last, err := LastBuilt(ctx, repo); err != nil || last != tag1 {
		t.Fatalf("last built %q (%v), want %q", last, err, tag1)
	}
	write("node_modules/huge.bin", "changed but ignored")
	if b3, err := Build(ctx, req); err != nil || b3.Tag != tag1 || b3.Built {
		t.Fatalf("a change under .dockerignore: %+v (%v)", b3, err)
	}
	write("app.txt", "v2")
	if b4, err := Build(ctx, req); err != nil || b4.Tag == tag1 || !b4.Built || len(starts) != 1 || starts[0] != b4.Tag {
		t.Fatalf("changed file: %+v (%v, started %v), want a new build", b4, err, starts)
	}
	write("build/Dockerfile.app", "FROM scratch\nCOPY missing.txt /\n")
	req.Target = ""
	if _, err := Build(ctx, req); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("failing build: %v", err)
	}
}

// TestBuildKitFeatures builds a Dockerfile of the kind Docker Compose
// users write today: the syntax directive (served by the frontend built
// into ployz, never pulled), a heredoc, a cache mount, a build secret, a
// --platform=$BUILDPLATFORM stage and an additional context.
func TestBuildKitFeatures(t *testing.T) {
	cli := dockerOrSkip(t)
	ctx := context.Background()
	base := dockertest.ShellImage(t)
	dir, extra := t.TempDir(), t.TempDir()
	df := "# syntax=docker/dockerfile:1\n" +
		"ARG BASE\n" +
		"FROM --platform=$BUILDPLATFORM $BASE AS build\n" +
		"ARG TARGETARCH\n" +
		"RUN --mount=type=cache,target=/cache --mount=type=secret,id=token <<EOF\n" +
		"set -e\n" +
		"mkdir -p /out\n" +
		"echo run >> /cache/runs\n" +
		"cat /run/secrets/token > /out/token\n" +
		"echo \"$TARGETARCH\" > /out/arch\n" +
		"EOF\n" +
		"COPY <<EOF /out/greeting\n" +
		"hello from a heredoc\n" +
		"EOF\n" +
		"COPY --from=extra note.txt /out/note\n" +
		"FROM scratch\n" +
		"COPY --from=build /out/ /\n"
	for name, body := range map[string]string{filepath.Join(dir, "Dockerfile"): df, filepath.Join(extra, "note.txt"): "extra context", filepath.Join(dir, "token"): "s3cret"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	repo := "ployz-buildtest-features"
	t.Cleanup(func() { dockertest.RemoveRepo(repo) })
	req := BuildRequest{Repo: repo, Context: dir, Args: map[string]string{"BASE": base},
		Secrets:            []BuildSecret{{ID: "token", File: filepath.Join(dir, "token")}},
		AdditionalContexts: map[string]string{"extra": extra}, Platform: "linux/arm64"}
	var log strings.Builder
	req.Progress = func(e BuildEvent) { fmt.Fprintf(&log, "%q %q done=%v err=%q\n", e.Step, e.Log, e.Done, e.Error) }
	b, err := Build(ctx, req)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	info, err := cli.ImageInspect(ctx, b.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if info.Architecture != "arm64" {
		t.Fatalf("built for %s/%s, want linux/arm64", info.Os, info.Architecture)
	}
	files := imageFiles(t, ctx, cli, b.Tag)
	want := map[string]string{"token": "s3cret", "arch": "arm64\n", "greeting": "hello from a heredoc\n", "note": "extra context"}
	for f, body := range want {
		if files[f] != body {
			t.Errorf("/%s = %q, want %q (files %v)", f, files[f], body, files)
		}
	}
	if !strings.Contains(log.String(), "RUN --mount=type=cache") {
		t.Errorf("progress did not name the RUN step:\n%s", log.String())
	}
}

// TestBuildSyntaxNotBuiltin: a syntax directive naming another frontend
// is left to BuildKit, which must pull it; offline that fails with a
// message naming the image.
func TestBuildSyntaxNotBuiltin(t *testing.T) {
	for ref, want := range map[string]bool{"docker/dockerfile:1": true, "docker/dockerfile:1.4": true, "docker.io/docker/dockerfile:1.7-labs": true,
		"docker/dockerfile": true, "example.com/my/frontend:1": false, "docker/dockerfile-copy:1": false} {
		if builtinSyntax(ref) != want {
			t.Errorf("builtinSyntax(%q) = %v", ref, !want)
		}
	}
}

func TestInputTagFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := BuildRequest{Repo: "r", Context: dir}
	tag, err := InputTag(base)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]BuildRequest{
		"platform": {Repo: "r", Context: dir, Platform: "linux/arm64"},
		"arg":      {Repo: "r", Context: dir, Args: map[string]string{"A": "1"}},
		"target":   {Repo: "r", Context: dir, Target: "x"},
		"secret":   {Repo: "r", Context: dir, Secrets: []BuildSecret{{ID: "s"}}},
	} {
		if other, err := InputTag(req); err != nil || other == tag {
			t.Errorf("%s: tag %q (%v) same as without it", name, other, err)
		}
	}
	if _, err := InputTag(BuildRequest{Repo: "r", Context: dir, Dockerfile: "nope"}); err == nil || !strings.Contains(err.Error(), "build.dockerfile") {
		t.Errorf("missing Dockerfile: %v", err)
	}
}

// imageFiles reads an image's regular files (from its saved layers).
func imageFiles(t *testing.T, ctx context.Context, cli *client.Client, ref string) map[string]string {
	t.Helper()
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if !strings.HasSuffix(h.Name, "layer.tar") && !strings.HasPrefix(h.Name, "blobs/") {
			continue
		}
		body, _ := io.ReadAll(tr)
		lr := tar.NewReader(bytes.NewReader(body))
		for {
			lh, err := lr.Next()
			if err != nil {
				break
			}
			if lh.Typeflag == tar.TypeReg {
				b, _ := io.ReadAll(lr)
				out[strings.TrimPrefix(lh.Name, "./")] = string(b)
			}
		}
	}
	return out
}
