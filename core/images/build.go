package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// maxContext bounds a build context sent to the local Docker.
const maxContext = 512 << 20

// BuildRequest is one compose build: section, with paths resolved.
type BuildRequest struct {
	// Repo names the image; the built image is tagged Repo:<content id>.
	Repo       string
	Context    string // a directory
	Dockerfile string // relative to Context; default Dockerfile
	Target     string
	Args       map[string]string
	// Platform (os/arch) is what the image must run on: the target
	// Machines' (TargetPlatform). Empty, or the local Docker's own,
	// builds for the local Docker's.
	Platform string
}

// Build builds req with the operator's local Docker (its classic builder,
// through the Docker API) and tags the result by content: the same
// context and arguments give the same tag, so an unchanged service does
// not redeploy. Build output goes to out; a failure returns Docker's
// error before anything reaches a Machine.
func Build(ctx context.Context, req BuildRequest, out io.Writer) (string, error) {
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("local docker: %w", err)
	}
	defer docker.Close()
	st, err := os.Stat(req.Context)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("build context %s: not a directory", req.Context)
	}
	if req.Dockerfile == "" {
		req.Dockerfile = "Dockerfile"
	}
	ignore, err := dockerIgnore(req.Context)
	if err != nil {
		return "", err
	}
	tarball, err := TarDir(req.Context, maxContext, true, ignore)
	if err != nil {
		return "", fmt.Errorf("build context: %w", err)
	}
	args := map[string]*string{}
	for k, v := range req.Args {
		args[k] = &v
	}
	opts := build.ImageBuildOptions{
		Dockerfile: filepath.ToSlash(req.Dockerfile), Target: req.Target, BuildArgs: args,
		Remove: true, ForceRemove: true, Version: build.BuilderV1,
	}
	if req.Platform != "" && req.Platform != localPlatform(ctx, docker) {
		opts.Platform = req.Platform
	}
	resp, err := docker.ImageBuild(ctx, bytes.NewReader(tarball), opts)
	if err != nil {
		return "", fmt.Errorf("docker build %s: %w", req.Context, err)
	}
	defer resp.Body.Close()
	id, err := buildResult(resp.Body, out)
	if err != nil {
		if opts.Platform != "" {
			return "", fmt.Errorf("docker build %s for %s (the Machines' platform; this computer's Docker needs emulation such as binfmt/QEMU to run other platforms' build steps): %w", req.Context, opts.Platform, err)
		}
		return "", fmt.Errorf("docker build %s: %w", req.Context, err)
	}
	tag := contentTag(req.Repo, id)
	for _, t := range []string{tag, req.Repo + ":latest"} {
		if err := docker.ImageTag(ctx, id, t); err != nil {
			return "", fmt.Errorf("tag %s: %w", t, err)
		}
	}
	return tag, nil
}

func contentTag(repo, id string) string {
	return repo + ":" + strings.TrimPrefix(id, "sha256:")[:12]
}

// LastBuilt is the content tag of repo's most recent build in the
// operator's Docker (deploy --no-build).
func LastBuilt(ctx context.Context, repo string) (string, error) {
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("local docker: %w", err)
	}
	defer docker.Close()
	info, err := docker.ImageInspect(ctx, repo+":latest")
	if err != nil {
		return "", fmt.Errorf("no build of %s in this computer's Docker (run `ployz build`): %w", repo, err)
	}
	tag := contentTag(repo, info.ID)
	if err := docker.ImageTag(ctx, info.ID, tag); err != nil {
		return "", fmt.Errorf("tag %s: %w", tag, err)
	}
	return tag, nil
}

// buildResult copies the build's log lines to out and returns the image
// id, or the error the stream reports.
func buildResult(r io.Reader, out io.Writer) (string, error) {
	if out == nil {
		out = io.Discard
	}
	id := ""
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
			Aux    struct {
				ID string `json:"ID"`
			} `json:"aux"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("read build output: %w", err)
		}
		if m.Error != "" {
			return "", errors.New(strings.TrimSpace(m.Error))
		}
		if m.Stream != "" {
			fmt.Fprint(out, m.Stream)
		}
		if m.Aux.ID != "" {
			id = m.Aux.ID
		}
	}
	if id == "" {
		return "", errors.New("docker reported no image id")
	}
	return id, nil
}

// dockerIgnore reads the context's .dockerignore: one pattern a line,
// matched with path.Match against the path and each of its parents;
// "!" re-includes. (Docker's own "**" is matched as "*".)
func dockerIgnore(dir string) (func(string, bool) bool, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pats []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		neg := strings.HasPrefix(l, "!")
		l = path.Clean(strings.TrimPrefix(strings.TrimPrefix(l, "!"), "/"))
		l = strings.ReplaceAll(l, "**", "*")
		if neg {
			l = "!" + l
		}
		pats = append(pats, l)
	}
	return func(rel string, _ bool) bool {
		if rel == "Dockerfile" || rel == ".dockerignore" {
			return false
		}
		skip := false
		for _, p := range pats {
			neg := strings.HasPrefix(p, "!")
			p = strings.TrimPrefix(p, "!")
			for q := rel; q != "." && q != "/"; q = path.Dir(q) {
				if ok, _ := path.Match(p, q); ok {
					skip = !neg
					break
				}
			}
		}
		return skip
	}, sc.Err()
}
