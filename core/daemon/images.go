package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
)

// imageLoad streams an uploaded image archive into this Machine's Docker:
// images reach Machines without a registry (issue 6, "Images without a
// registry").
func (d *Daemon) imageLoad(ctx context.Context, _ rpc.None, s rpc.StreamConn) error {
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
func (d *Daemon) imageRelay(ctx context.Context, req rpc.ImageRelayRequest, s rpc.StreamConn) error {
	id, _ := d.local()
	return images.ServeRelay(ctx, req, s, images.RelayEnv{Self: id, Peers: d.peers, Dial: d.dialPeer,
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
func (o *containerOps) pullImage(ctx context.Context, req rpc.PullImageRequest) (rpc.PullImageResult, error) {
	return o.pull(ctx, req, nil)
}

// pullImageProgress is pullImage that streams the pull's progress.
func (o *containerOps) pullImageProgress(ctx context.Context, req rpc.PullImageRequest, s rpc.StreamConn) error {
	var last time.Time
	res, err := o.pull(ctx, req, func(p rpc.PullProgress) {
		if time.Since(last) < 300*time.Millisecond {
			return
		}
		last = time.Now()
		rpc.PullImageProgress.Send(s, rpc.PullImageEvent{Progress: &p}) //nolint:errcheck // a lost client ends the pull through ctx
	})
	if err != nil {
		return err
	}
	return rpc.PullImageProgress.Send(s, rpc.PullImageEvent{Result: &res})
}

func (o *containerOps) pull(ctx context.Context, req rpc.PullImageRequest, report func(rpc.PullProgress)) (rpc.PullImageResult, error) {
	var none rpc.PullImageResult
	ref, err := reference.ParseNormalizedNamed(req.Image)
	if err != nil {
		return none, rpc.InvalidField("image", "%q is not an image reference: %v", req.Image, err)
	}
	if len(req.RegistryAuth) > 64<<10 {
		return none, rpc.InvalidField("registry_auth", "longer than 64 KiB")
	}
	f := o.facts()
	name := reference.TagNameOnly(ref).String()
	rd, err := o.docker.ImagePull(ctx, name, image.PullOptions{RegistryAuth: req.RegistryAuth})
	if err != nil {
		return none, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", f.Name, req.Image, err).With("image", req.Image)
	}
	defer rd.Close()
	status, err := pullStatus(rd, report)
	if err != nil {
		return none, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", f.Name, req.Image, err).With("image", req.Image)
	}
	img, err := o.docker.ImageInspect(ctx, req.Image)
	if err != nil {
		return none, dockerErr(err, "inspect pulled image %s", req.Image)
	}
	o.log.Info("image pulled", "image", req.Image, "id", short(img.ID))
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
