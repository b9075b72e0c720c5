package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

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
	t.Cleanup(func() {
		list, _ := cli.ImageList(ctx, image.ListOptions{})
		for _, im := range list {
			for _, tag := range im.RepoTags {
				if strings.HasPrefix(tag, repo+":") {
					cli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true}) //nolint:errcheck // best effort
				}
			}
		}
	})
	req := BuildRequest{Repo: repo, Context: dir, Dockerfile: "build/Dockerfile.app", Target: "base", Args: map[string]string{"GREETING": "hi"}}
	var log strings.Builder
	tag1, err := Build(ctx, req, &log)
	if err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
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
	if tag2, err := Build(ctx, req, nil); err != nil || tag2 != tag1 {
		t.Fatalf("same context rebuilt as %q (%v), want %q", tag2, err, tag1)
	}
	if last, err := LastBuilt(ctx, repo); err != nil || last != tag1 {
		t.Fatalf("last built %q (%v), want %q", last, err, tag1)
	}
	write("node_modules/huge.bin", "changed but ignored")
	if tag3, err := Build(ctx, req, nil); err != nil || tag3 != tag1 {
		t.Fatalf("a change under .dockerignore rebuilt as %q (%v)", tag3, err)
	}
	write("app.txt", "v2")
	if tag4, err := Build(ctx, req, nil); err != nil || tag4 == tag1 {
		t.Fatalf("changed file: tag %q (%v), want a new one", tag4, err)
	}
	write("build/Dockerfile.app", "FROM scratch\nCOPY missing.txt /\n")
	req.Target = ""
	if _, err := Build(ctx, req, nil); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("failing build: %v", err)
	}
}
