package images

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/docker/docker/client"
	bkclient "github.com/moby/buildkit/client"
	"github.com/moby/buildkit/frontend/dockerfile/builder"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/secrets/secretsprovider"
	"github.com/moby/buildkit/session/sshforward/sshprovider"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"
)

// dialBuildKit connects to the BuildKit inside the local Docker through
// its /grpc and /session endpoints (what buildx's "docker" driver uses):
// no buildx, no builder container, nothing to pull.
func dialBuildKit(ctx context.Context, docker *client.Client) (*bkclient.Client, error) {
	return bkclient.New(ctx, "",
		bkclient.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return docker.DialHijack(ctx, "/grpc", "h2c", nil)
		}),
		bkclient.WithSessionDialer(func(ctx context.Context, proto string, meta map[string][]string) (net.Conn, error) {
			return docker.DialHijack(ctx, "/session", proto, meta)
		}))
}

// solve runs one build through BuildKit and names the image tags in the
// local Docker; it returns the image id. The Dockerfile frontend runs in
// this process (the one vendored with ployz, so heredocs, mounts and
// --platform work whatever BuildKit version the Docker has) and hands
// BuildKit the build graph through the session's gateway.
func solve(ctx context.Context, bk *bkclient.Client, req BuildRequest, tags []string) (string, error) {
	opt, err := solveOpt(req, tags)
	if err != nil {
		return "", err
	}
	ch := make(chan *bkclient.SolveStatus)
	var resp *bkclient.SolveResponse
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		var err error
		resp, err = bk.Build(ectx, opt, "ployz", builder.Build, ch)
		return err
	})
	eg.Go(func() error {
		relayStatus(ch, req.Progress)
		return nil
	})
	if err := eg.Wait(); err != nil {
		return "", err
	}
	id := resp.ExporterResponse["containerimage.digest"]
	if id == "" {
		return "", fmt.Errorf("buildkit reported no image id")
	}
	return id, nil
}

// solveOpt is the BuildKit request for req: the context and the
// Dockerfile's directory as session mounts, the Dockerfile frontend's
// options, secrets and SSH agents served from this computer, and the
// image exported into the local Docker as tags.
func solveOpt(req BuildRequest, tags []string) (bkclient.SolveOpt, error) {
	dfPath := filepath.Join(req.Context, req.Dockerfile)
	ctxFS, err := fsutil.NewFS(req.Context)
	if err != nil {
		return bkclient.SolveOpt{}, fmt.Errorf("build context %s: %w", req.Context, err)
	}
	dfFS, err := fsutil.NewFS(filepath.Dir(dfPath))
	if err != nil {
		return bkclient.SolveOpt{}, fmt.Errorf("dockerfile %s: %w", dfPath, err)
	}
	attrs := map[string]string{"filename": filepath.Base(dfPath)}
	if req.Target != "" {
		attrs["target"] = req.Target
	}
	for k, v := range req.Args {
		attrs["build-arg:"+k] = v
	}
	if req.Platform != "" {
		attrs["platform"] = req.Platform
	}
	df, err := os.ReadFile(dfPath)
	if err != nil {
		return bkclient.SolveOpt{}, fmt.Errorf("dockerfile: %w", err)
	}
	if ref, _, _, ok := parser.DetectSyntax(df); ok && builtinSyntax(ref) {
		// The frontend this process runs is docker/dockerfile: use it
		// rather than pull the image the directive names (nothing may be
		// reachable, and BuildKit has no fallback when the pull fails).
		attrs["cmdline"] = ref
	}
	mounts := map[string]fsutil.FS{"context": ctxFS, "dockerfile": dfFS}
	for _, name := range slices.Sorted(maps.Keys(req.AdditionalContexts)) {
		src := req.AdditionalContexts[name]
		if strings.Contains(src, "://") {
			attrs["context:"+name] = src // docker-image://, oci-layout://, https://
			continue
		}
		fs, err := fsutil.NewFS(src)
		if err != nil {
			return bkclient.SolveOpt{}, fmt.Errorf("build.additional_contexts.%s: %w", name, err)
		}
		mounts["ctx-"+name] = fs
		attrs["context:"+name] = "local:ctx-" + name
	}
	attach, err := attachables(req)
	if err != nil {
		return bkclient.SolveOpt{}, err
	}
	var imports []bkclient.CacheOptionsEntry
	for _, c := range req.CacheFrom {
		imports = append(imports, cacheImport(c))
	}
	return bkclient.SolveOpt{
		LocalMounts:   mounts,
		FrontendAttrs: attrs,
		CacheImports:  imports,
		Session:       attach,
		Exports:       []bkclient.ExportEntry{{Type: "moby", Attrs: map[string]string{"name": strings.Join(tags, ",")}}},
	}, nil
}

// syntaxRef matches the directive's names of the official Dockerfile
// frontend: docker/dockerfile with any 1.x tag or none.
var syntaxRef = regexp.MustCompile(`^(docker\.io/)?(docker/dockerfile|docker/dockerfile-upstream)(:1(\.[0-9]+)*(-labs)?|:latest|:labs)?$`)

func builtinSyntax(ref string) bool {
	return syntaxRef.MatchString(strings.TrimSpace(ref))
}

// attachables serve the build's secrets and SSH agents from this
// computer for the build's session; nothing of them is written to the
// image unless the Dockerfile copies it.
func attachables(req BuildRequest) ([]session.Attachable, error) {
	var out []session.Attachable
	if len(req.Secrets) > 0 {
		var srcs []secretsprovider.Source
		for _, s := range req.Secrets {
			srcs = append(srcs, secretsprovider.Source{ID: s.ID, FilePath: s.File, Env: s.Env})
		}
		store, err := secretsprovider.NewStore(srcs)
		if err != nil {
			return nil, fmt.Errorf("build.secrets: %w", err)
		}
		out = append(out, secretsprovider.NewSecretProvider(store))
	}
	if len(req.SSH) > 0 {
		var confs []sshprovider.AgentConfig
		for _, s := range req.SSH {
			id, paths, _ := strings.Cut(s, "=")
			c := sshprovider.AgentConfig{ID: id}
			if paths != "" {
				c.Paths = strings.Split(paths, ",")
			}
			confs = append(confs, c)
		}
		p, err := sshprovider.NewSSHAgentProvider(confs)
		if err != nil {
			return nil, fmt.Errorf("build.ssh: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// cacheImport reads one compose cache_from entry: a plain image
// reference or buildx's "type=registry,ref=...".
func cacheImport(s string) bkclient.CacheOptionsEntry {
	if !strings.Contains(s, "=") {
		return bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{"ref": s}}
	}
	e := bkclient.CacheOptionsEntry{Type: "registry", Attrs: map[string]string{}}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "type" {
			e.Type = v
			continue
		}
		e.Attrs[k] = v
	}
	return e
}

// relayStatus turns BuildKit's status stream into BuildEvents: a step's
// start, its output lines and its end (cached or not, or its error).
func relayStatus(ch chan *bkclient.SolveStatus, progress func(BuildEvent)) {
	started, done := map[string]bool{}, map[string]bool{}
	names := map[string]string{}
	for st := range ch {
		if progress == nil {
			continue
		}
		for _, v := range st.Vertexes {
			d := v.Digest.String()
			names[d] = v.Name
			if v.Started != nil && !started[d] {
				started[d] = true
				progress(BuildEvent{Step: v.Name})
			}
			if v.Completed != nil && !done[d] {
				done[d] = true
				progress(BuildEvent{Step: v.Name, Done: true, Cached: v.Cached, Error: v.Error})
			}
		}
		for _, l := range st.Logs {
			for _, line := range strings.Split(strings.TrimRight(string(l.Data), "\n"), "\n") {
				progress(BuildEvent{Step: names[l.Vertex.String()], Log: line})
			}
		}
		for _, w := range st.Warnings {
			progress(BuildEvent{Step: names[w.Vertex.String()], Log: "warning: " + string(w.Short)})
		}
	}
}
