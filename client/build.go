package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
)

// Build says how BuildApp builds a compose file's build: Services.
type Build struct {
	// Names limits the build to these Services (none: every one).
	Names []string
	// Reuse takes each Service's last local build instead of building.
	Reuse bool
	// Args are KEY=VALUE build arguments for every build: Service.
	Args []string
	// Log hears one line per Service built; Output hears each build
	// step's start, output lines and end, as plain lines. Either may be nil.
	Log, Output io.Writer
	// DryRun computes each Service's tag from its build inputs and builds
	// nothing (no build, push or pull).
	DryRun bool
}

// BuildApp builds each build: Service of app and points its spec at the
// content tag; with Reuse it takes each Service's last local build
// instead. With an entry, it builds for the platform the Machines run. A
// failed build is an error before anything reaches the Cluster.
func BuildApp(ctx context.Context, ent *rpc.Client, app *deploy.App, b Build) error {
	over, err := buildArgs(b.Args)
	if err != nil {
		return err
	}
	for _, n := range b.Names {
		if !slices.ContainsFunc(app.Services, func(s deploy.Service) bool { return s.Name == n && s.Build != nil }) {
			return fmt.Errorf("service %q: not declared with build:", n)
		}
	}
	platform := ""
	if ent != nil && !b.Reuse && len(Built(*app, b.Names)) > 0 {
		if platform, err = images.TargetPlatform(ctx, ent, nil); err != nil {
			return err
		}
	}
	log := b.Log
	if log == nil {
		log = io.Discard
	}
	for i := range app.Services {
		s := &app.Services[i]
		if s.Build == nil || len(b.Names) > 0 && !slices.Contains(b.Names, s.Name) {
			continue
		}
		if b.Reuse {
			tag, err := images.LastBuilt(ctx, s.Build.Repo)
			if err != nil {
				return fmt.Errorf("service %q: %w", s.Name, err)
			}
			s.Spec.Image = tag
			continue
		}
		args := maps.Clone(s.Build.Args)
		if args == nil {
			args = map[string]string{}
		}
		maps.Copy(args, over)
		req := buildRequest(*s.Build, args, platform)
		req.Progress = plainSteps(b.Output, s.Name)
		if b.DryRun {
			tag, err := images.InputTag(req)
			if err != nil {
				return fmt.Errorf("service %q: %w", s.Name, err)
			}
			fmt.Fprintf(log, "dry run: %s would be built as %s (nothing built, pushed or pulled)\n", s.Name, tag)
			s.Spec.Image = tag
			continue
		}
		req.Starting = func(string) { fmt.Fprintf(log, "building %s from %s\n", s.Name, s.Build.Context) }
		built, err := images.Build(ctx, req)
		if err != nil {
			return fmt.Errorf("service %q: build failed, nothing was deployed: %w", s.Name, err)
		}
		tag := built.Tag
		if built.Built {
			fmt.Fprintf(log, "built %s as %s\n", s.Name, tag)
		} else {
			fmt.Fprintf(log, "%s unchanged: %s already built, nothing built\n", s.Name, tag)
		}
		s.Spec.Image = tag
	}
	return nil
}

// buildRequest is the BuildKit request for one Service's build: section
// with its arguments (the --build-arg overrides applied) and platform.
func buildRequest(b deploy.Build, args map[string]string, platform string) images.BuildRequest {
	return images.BuildRequest{Repo: b.Repo, Context: b.Context, Dockerfile: b.Dockerfile, Target: b.Target,
		Args: args, Platform: platform, Secrets: b.Secrets, SSH: b.SSH, AdditionalContexts: b.AdditionalContexts, CacheFrom: b.CacheFrom}
}

// plainSteps writes a build's steps to w as plain lines, each naming
// the Service; nil without w.
func plainSteps(w io.Writer, service string) func(images.BuildEvent) {
	if w == nil {
		return nil
	}
	return func(e images.BuildEvent) {
		switch {
		case e.Log != "":
			fmt.Fprintf(w, "%s | %s\n", service, e.Log)
		case e.Error != "":
			fmt.Fprintf(w, "%s ERR %s: %s\n", service, e.Step, e.Error)
		case e.Done && e.Cached:
			fmt.Fprintf(w, "%s cached %s\n", service, e.Step)
		case e.Done:
			fmt.Fprintf(w, "%s done %s\n", service, e.Step)
		}
	}
}

func buildArgs(kvs []string) (map[string]string, error) {
	over := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--build-arg %q: want KEY=VALUE", kv)
		}
		over[k] = v
	}
	return over, nil
}

// BuildAndPush builds app's build: Services (names, or all) for the
// Machines' platform and delivers the tags to every Machine that lacks
// them: `ployz build --push`, without a Deploy.
func BuildAndPush(ctx context.Context, ent *rpc.Client, app *deploy.App, b Build, progress images.Progress) ([]images.Result, error) {
	if err := BuildApp(ctx, ent, app, b); err != nil {
		return nil, err
	}
	var tags []string
	for _, s := range Built(*app, b.Names) {
		tags = append(tags, s.Spec.Image)
	}
	return images.Deliver(ctx, ent, tags, progress)
}

// Built is app's build: Services, only those named when names is set.
func Built(app deploy.App, names []string) []deploy.Service {
	var out []deploy.Service
	for _, s := range app.Services {
		if s.Build != nil && (len(names) == 0 || slices.Contains(names, s.Name)) {
			out = append(out, s)
		}
	}
	return out
}

// registryAuth reads the operator's Docker credentials for the images the
// plan pulls, once, before anything runs: a pull sends its registry's
// credential and nothing keeps it.
func registryAuth(p deploy.Plan) (func(string) string, error) {
	var pulls []string
	for _, r := range p.Rows {
		if r.Pull {
			pulls = append(pulls, r.Spec.Image)
		}
	}
	return RegistryAuthFor(pulls)
}

// RegistryAuthFor reads the operator's Docker credentials for imgs, once:
// a credentials file that cannot be read is an error naming it, never an
// anonymous pull. Nothing to pull reads nothing (a nil func).
func RegistryAuthFor(imgs []string) (func(string) string, error) {
	if len(imgs) == 0 {
		return nil, nil
	}
	creds, err := images.LoadCredentials()
	if err != nil {
		return nil, err
	}
	enc := map[string]string{}
	for _, img := range imgs {
		if _, ok := enc[img]; ok {
			continue
		}
		a, err := creds.For(img)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", img, err)
		}
		enc[img] = a
	}
	return func(image string) string { return enc[image] }, nil
}

// DeliveryFailed says whether an image delivery left a Machine without
// its image.
func DeliveryFailed(res []images.Result) bool {
	for _, r := range res {
		if r.Outcome == "failed" {
			return true
		}
	}
	return false
}

// LoadCompose reads and loads the compose file at path for a build:
// project and environment as `ployz build`'s flags name them.
func LoadCompose(ctx context.Context, path, project, environment string) (deploy.App, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return deploy.App{}, fmt.Errorf("compose file: %w", err)
	}
	return deploy.Load(ctx, deploy.Source{Compose: src, Filename: filepath.Base(path), WorkingDir: filepath.Dir(path),
		ProjectName: project, Environment: environment, Env: Environ()})
}

// BuiltImages answers BuildCompose: each built Service, in the compose
// file's order, its tag by name, and after a push each Machine's
// delivery (nil without one).
type BuiltImages struct {
	Services   []deploy.Service
	Images     map[string]string
	Deliveries []images.Result
}

// BuildCompose is `ployz build`: app's build: Services built with this
// computer's Docker and, with a Session, built for the Machines'
// platform and delivered to each that lacks them (progress hears the
// bytes; may be nil). A Machine that did not get an image is a
// *PartialError beside the result.
func BuildCompose(ctx context.Context, s *Session, app deploy.App, b Build, progress images.Progress) (BuiltImages, error) {
	var out BuiltImages
	var err error
	if s != nil {
		out.Deliveries, err = BuildAndPush(ctx, s.ent, &app, b, progress)
	} else {
		err = BuildApp(ctx, nil, &app, b)
	}
	if err != nil {
		return BuiltImages{}, err
	}
	out.Services, out.Images = Built(app, b.Names), map[string]string{}
	for _, sv := range out.Services {
		out.Images[sv.Name] = sv.Spec.Image
	}
	if DeliveryFailed(out.Deliveries) {
		return out, partial(errors.New("an image did not reach every Machine"))
	}
	return out, nil
}

// PushImage streams a local image into the Docker of every Machine (or
// those named) that misses it; a Machine that did not get it is a
// *PartialError beside the result.
func (s *Session) PushImage(ctx context.Context, image string, machines []string, progress images.Progress) ([]images.Result, error) {
	res, err := images.Push(ctx, s.ent, image, machines, progress)
	if err == nil && DeliveryFailed(res) {
		err = partial(fmt.Errorf("image %s did not reach every Machine", image))
	}
	return res, err
}
