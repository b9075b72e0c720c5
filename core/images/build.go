package images

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/client"
)

// maxContext bounds a build context sent to the local Docker.
const maxContext = 512 << 20

// BuildRequest is one compose build: section, with paths resolved.
type BuildRequest struct {
	// Repo names the image; the built image is tagged Repo:<input tag>.
	Repo       string
	Context    string // a directory
	Dockerfile string // relative to Context; default Dockerfile
	Target     string
	Args       map[string]string
	// Platform (os/arch) is what the image must run on: the target
	// Machines' (TargetPlatform). Empty builds for the local Docker's.
	Platform string
	// Secrets are compose's build.secrets, served to RUN --mount=type=secret.
	Secrets []BuildSecret
	// SSH are compose's build.ssh entries: "default" or "ID=PATH[,PATH]".
	SSH []string
	// AdditionalContexts are named contexts: a directory, or a
	// docker-image:// (or other BuildKit) source.
	AdditionalContexts map[string]string
	// CacheFrom are cache sources: an image reference or
	// "type=registry,ref=...".
	CacheFrom []string
	// Progress hears each step of the build; may be nil.
	Progress func(BuildEvent)
	// Starting hears the tag just before a build starts, never when
	// the local Docker already holds it; may be nil.
	Starting func(tag string)
}

// BuildSecret is one build secret: its id and where its value is read.
type BuildSecret struct {
	ID   string `json:"id"`
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// BuildEvent is one step of a build as BuildKit reports it: its start,
// an output line (Log), or its end.
type BuildEvent struct {
	Step   string
	Log    string
	Done   bool
	Cached bool
	Error  string
}

// Built is what Build did: the tag, and whether it built (false: the
// local Docker already held the tag of these inputs).
type Built struct {
	Tag   string
	Built bool
}

// Build builds req with the BuildKit of the operator's local Docker and
// tags the result by its inputs (InputTag): the same context, Dockerfile,
// arguments and platform give the same tag, so an unchanged Service
// neither rebuilds nor redeploys. A failure returns BuildKit's error
// before anything reaches a Machine.
func Build(ctx context.Context, req BuildRequest) (Built, error) {
	if req.Dockerfile == "" {
		req.Dockerfile = "Dockerfile"
	}
	tag, err := InputTag(req)
	if err != nil {
		return Built{}, err
	}
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return Built{}, fmt.Errorf("local docker: %w", err)
	}
	defer docker.Close()
	if _, err := docker.ImageInspect(ctx, tag); err == nil {
		return Built{Tag: tag}, docker.ImageTag(ctx, tag, req.Repo+":latest")
	}
	bk, err := dialBuildKit(ctx, docker)
	if err != nil {
		return Built{}, fmt.Errorf("local docker's buildkit: %w", err)
	}
	defer bk.Close()
	if req.Platform == localPlatform(ctx, docker) {
		req.Platform = ""
	}
	if req.Starting != nil {
		req.Starting(tag)
	}
	if _, err := solve(ctx, bk, req, []string{tag, req.Repo + ":latest"}); err != nil {
		if req.Platform != "" {
			return Built{}, fmt.Errorf("build %s for %s (the Machines' platform; RUN steps of another platform need emulation such as binfmt/QEMU in this computer's Docker): %w", req.Context, req.Platform, err)
		}
		return Built{}, fmt.Errorf("build %s: %w", req.Context, err)
	}
	return Built{Tag: tag, Built: true}, nil
}

// InputTag is the tag a build of req gets, from its inputs alone: the
// context's files (less .dockerignore's), the Dockerfile, target,
// arguments, platform, secret and SSH ids and additional contexts. A dry
// run plans with it without building.
func InputTag(req BuildRequest) (string, error) {
	st, err := os.Stat(req.Context)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("build context %s: not a directory", req.Context)
	}
	if req.Dockerfile == "" {
		req.Dockerfile = "Dockerfile"
	}
	h := sha256.New()
	field := func(k, v string) { fmt.Fprintf(h, "%s=%d:%s\n", k, len(v), v) }
	if err := hashDir(h, "context", req.Context); err != nil {
		return "", fmt.Errorf("build context: %w", err)
	}
	df, err := os.ReadFile(filepath.Join(req.Context, req.Dockerfile))
	if err != nil {
		return "", fmt.Errorf("build.dockerfile: %w", err)
	}
	field("dockerfile", string(df))
	field("target", req.Target)
	field("platform", req.Platform)
	for _, k := range slices.Sorted(maps.Keys(req.Args)) {
		field("arg:"+k, req.Args[k])
	}
	for _, s := range req.Secrets {
		field("secret", s.ID)
	}
	for _, s := range req.SSH {
		field("ssh", s)
	}
	for _, k := range slices.Sorted(maps.Keys(req.AdditionalContexts)) {
		src := req.AdditionalContexts[k]
		if strings.Contains(src, "://") {
			field("context:"+k, src)
			continue
		}
		if err := hashDir(h, "context:"+k, src); err != nil {
			return "", fmt.Errorf("build.additional_contexts.%s: %w", k, err)
		}
	}
	return req.Repo + ":" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// hashDir adds a directory's names, modes and content (as TarDir lays
// them out, without times) less what its .dockerignore leaves out.
func hashDir(h io.Writer, name, dir string) error {
	ignore, err := dockerIgnore(dir)
	if err != nil {
		return err
	}
	tarball, err := TarDir(dir, maxContext, true, ignore)
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "%s=%d:", name, len(tarball))
	_, err = h.Write(tarball)
	return err
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
	for _, t := range info.RepoTags {
		if i := strings.LastIndex(t, ":"); t[:max(i, 0)] == repo && t[i+1:] != "latest" {
			return t, nil
		}
	}
	return "", fmt.Errorf("%s:latest has no content tag in this computer's Docker (run `ployz build`)", repo)
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
