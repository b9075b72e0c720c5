// Package images is the daemon's image feature: the Machine RPC that
// puts images into this Machine's Docker and lists them (list_images,
// pull_image, pull_image_progress, image_load, image_relay). Images reach
// Machines through a registry (pull) or without one (load, relay).
package images

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
)

// Host is what the feature needs of the daemon.
type Host interface {
	// Docker is this Machine's Docker client; nil while it has none.
	Docker() client.APIClient
	// Local is this Machine's ID and name.
	Local() (id, name string)
	// Peers lists the Machines this one observes, itself included.
	Peers(ctx context.Context) ([]rpc.Peer, error)
	// DialPeer opens Machine RPC to a peer over the mesh.
	DialPeer(ctx context.Context, p rpc.Peer) (*rpc.Client, error)
}

// Feature serves the image commands.
type Feature struct {
	host Host
	log  hclog.Logger
}

// New returns the feature over host.
func New(host Host, log hclog.Logger) *Feature {
	return &Feature{host: host, log: log}
}

// Routes are the unary image commands, served while Docker is.
func (f *Feature) Routes() []rpc.Route {
	routes := []rpc.Route{
		rpc.Bind(rpc.ListImages, f.listImages),
		rpc.Bind(rpc.PullImage, f.pullImage),
	}
	for i := range routes {
		routes[i].Available = func() bool { return f.host.Docker() != nil }
	}
	return routes
}

// Streams are the streaming image commands.
func (f *Feature) Streams() []rpc.StreamRoute {
	return []rpc.StreamRoute{
		rpc.BindStream(rpc.LoadImage, f.imageLoad),
		rpc.BindStream(rpc.RelayImage, f.imageRelay),
		rpc.BindStream(rpc.PullImageProgress, f.withDocker(f.pullImageProgress)),
	}
}

// withDocker refuses a stream while this Machine has no Docker client.
func (f *Feature) withDocker(h func(context.Context, rpc.PullImageRequest, rpc.StreamConn) error) func(context.Context, rpc.PullImageRequest, rpc.StreamConn) error {
	return func(ctx context.Context, req rpc.PullImageRequest, s rpc.StreamConn) error {
		if f.host.Docker() == nil {
			return rpc.Errorf(rpc.CodeUnavailable, "docker is not available on this Machine")
		}
		return h(ctx, req, s)
	}
}

// pull is Pull into this Machine's Docker.
func (f *Feature) pull(ctx context.Context, req rpc.PullImageRequest, report func(rpc.PullProgress)) (rpc.PullImageResult, error) {
	_, name := f.host.Local()
	return Pull(ctx, f.host.Docker(), f.log, name, req, report)
}

// imageLoad serves image_load: it streams an uploaded image archive into this Machine's Docker:
// images reach Machines without a registry (issue 6, "Images without a
// registry").
func (f *Feature) imageLoad(ctx context.Context, _ rpc.None, s rpc.StreamConn) error {
	in := images.RecvData(s)
	c := iocount.NewReader(in)
	res, err := loadArchive(ctx, c)
	in.CloseWithError(errors.New("docker load ended")) // stops the receiver
	if err != nil {
		return err
	}
	res.Bytes = c.N()
	return rpc.LoadImage.Send(s, res)
}

// imageRelay streams an image the operator sends once on to every target
// Machine over the mesh (images.ServeRelay), this one included when named.
func (f *Feature) imageRelay(ctx context.Context, req rpc.ImageRelayRequest, s rpc.StreamConn) error {
	id, _ := f.host.Local()
	return images.ServeRelay(ctx, req, s, images.RelayEnv{Self: id, Peers: f.host.Peers, Dial: f.host.DialPeer,
		Load: func(ctx context.Context, r io.Reader) (rpc.ImageLoadResult, error) {
			c := iocount.NewReader(r)
			res, err := loadArchive(ctx, c)
			res.Bytes = c.N()
			return res, err
		}})
}

// loadArchive loads one `docker save` archive into this Machine's Docker.
func loadArchive(ctx context.Context, r io.Reader) (rpc.ImageLoadResult, error) {
	var res rpc.ImageLoadResult
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return res, rpc.Errorf(rpc.CodeUnavailable, "docker: %v", err)
	}
	defer cli.Close()
	resp, err := cli.ImageLoad(ctx, r, client.ImageLoadWithQuiet(true))
	if err != nil {
		return res, rpc.Errorf(rpc.CodeInvalidArgument, "docker load: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Error != "" {
			return res, rpc.Errorf(rpc.CodeInvalidArgument, "docker load: %s", m.Error)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			res.Loaded = append(res.Loaded, s)
		}
	}
	return res, nil
}

// pullImage pulls one image from its registry with the credentials the
// request carries, used for this pull only: they are never logged nor
// kept. The answer names the image and this Machine on failure.
func (f *Feature) pullImage(ctx context.Context, req rpc.PullImageRequest) (rpc.PullImageResult, error) {
	return f.pull(ctx, req, nil)
}

// pullImageProgress is pullImage that streams the pull's progress.
func (f *Feature) pullImageProgress(ctx context.Context, req rpc.PullImageRequest, s rpc.StreamConn) error {
	var last time.Time
	res, err := f.pull(ctx, req, func(p rpc.PullProgress) {
		if time.Since(last) < 300*time.Millisecond {
			return
		}
		last = time.Now()
		rpc.PullImageProgress.Send(s, rpc.PullImageEvent{Progress: &p}) // a lost client ends the pull through ctx
	})
	if err != nil {
		return err
	}
	return rpc.PullImageProgress.Send(s, rpc.PullImageEvent{Result: &res})
}

// listImages serves list_images.
func (f *Feature) listImages(ctx context.Context, req rpc.ListImagesRequest) (rpc.ImageList, error) {
	docker := f.host.Docker()
	list, err := docker.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return rpc.ImageList{}, feature.DockerErr(err, "list images")
	}
	// ployzd runs natively, so its own platform is its Docker's.
	out := rpc.ImageList{Images: []rpc.ImageInfo{}, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	for _, i := range list {
		tags := i.RepoTags
		if tags == nil {
			tags = []string{}
		}
		info := rpc.ImageInfo{ID: i.ID, Tags: tags, Size: i.Size}
		if req.Layers {
			if in, err := docker.ImageInspect(ctx, i.ID); err == nil {
				info.Layers = in.RootFS.Layers
			}
		}
		out.Images = append(out.Images, info)
	}
	return out, nil
}

// Pull pulls one image into docker as pull_image does, report hearing
// its progress when set; machine names this Machine in a failure.
func Pull(ctx context.Context, docker client.APIClient, log hclog.Logger, machine string, req rpc.PullImageRequest, report func(rpc.PullProgress)) (rpc.PullImageResult, error) {
	var none rpc.PullImageResult
	ref, err := reference.ParseNormalizedNamed(req.Image)
	if err != nil {
		return none, rpc.InvalidField("image", "%q is not an image reference: %v", req.Image, err)
	}
	if len(req.RegistryAuth) > 64<<10 {
		return none, rpc.InvalidField("registry_auth", "longer than 64 KiB")
	}
	name := reference.TagNameOnly(ref).String()
	rd, err := docker.ImagePull(ctx, name, image.PullOptions{RegistryAuth: req.RegistryAuth})
	if err != nil {
		return none, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", machine, req.Image, err).With("image", req.Image)
	}
	defer rd.Close()
	status, err := pullStatus(rd, report)
	if err != nil {
		return none, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", machine, req.Image, err).With("image", req.Image)
	}
	img, err := docker.ImageInspect(ctx, req.Image)
	if err != nil {
		return none, feature.DockerErr(err, "inspect pulled image %s", req.Image)
	}
	log.Info("image pulled", "image", req.Image, "id", feature.Short(img.ID))
	return rpc.PullImageResult{Image: req.Image, ID: img.ID, Status: status}, nil
}

// pullStatus reads Docker's pull progress stream to its end and returns
// the last status line, or the error the stream reports. report, when
// set, hears the progress after every message that changes it.
func pullStatus(r io.Reader, report func(rpc.PullProgress)) (string, error) {
	dec := json.NewDecoder(r)
	last := ""
	type layer struct {
		cur, total int64
		done       bool
	}
	layers := map[string]*layer{}
	var order []string
	for {
		var m struct {
			ID             string `json:"id"`
			Status         string `json:"status"`
			ProgressDetail struct {
				Current int64 `json:"current"`
				Total   int64 `json:"total"`
			} `json:"progressDetail"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return last, nil
		} else if err != nil {
			return last, fmt.Errorf("read pull progress: %w", err)
		}
		if m.Error != "" || m.ErrorDetail.Message != "" {
			if m.ErrorDetail.Message != "" {
				return last, errors.New(m.ErrorDetail.Message)
			}
			return last, errors.New(m.Error)
		}
		if m.Status != "" {
			last = m.Status
		}
		// Layer messages carry the layer's short id; the image's own
		// lines (its tag, the digest) carry none or the tag.
		if m.ID == "" || report == nil || !isLayerStatus(m.Status) {
			continue
		}
		l := layers[m.ID]
		if l == nil {
			l = &layer{}
			layers[m.ID] = l
			order = append(order, m.ID)
		}
		switch m.Status {
		case "Downloading":
			l.cur, l.total = m.ProgressDetail.Current, max(l.total, m.ProgressDetail.Total)
		case "Download complete", "Verifying Checksum":
			l.cur = l.total
		case "Pull complete", "Already exists":
			l.cur, l.done = l.total, true
		}
		var p rpc.PullProgress
		for _, id := range order {
			x := layers[id]
			p.Layers++
			p.Bytes += x.cur
			p.Total += x.total
			if x.done {
				p.LayersDone++
			}
		}
		report(p)
	}
}

// isLayerStatus tells the per-layer lines of a pull from the image's.
func isLayerStatus(s string) bool {
	switch s {
	case "Pulling fs layer", "Waiting", "Downloading", "Verifying Checksum", "Download complete",
		"Extracting", "Pull complete", "Already exists":
		return true
	}
	return false
}
