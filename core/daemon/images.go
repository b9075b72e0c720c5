package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
)

// imageLoad streams an uploaded image archive into this Machine's Docker:
// images reach Machines without a registry (issue 6, "Images without a
// registry").
func (d *Daemon) imageLoad(ctx context.Context, _ json.RawMessage, s rpc.StreamConn) error {
	pr, pw := io.Pipe()
	var n int64
	go func() {
		for {
			f, err := s.Recv()
			if err != nil {
				pw.CloseWithError(fmt.Errorf("upload ended early: %w", err))
				return
			}
			if f.EOF {
				pw.Close()
				return
			}
			if _, err := pw.Write(f.Data); err != nil {
				return
			}
			n += int64(len(f.Data))
		}
	}()
	res, err := loadArchive(ctx, pr)
	pr.CloseWithError(errors.New("docker load ended")) // stops the receiver
	if err != nil {
		return err
	}
	res.Bytes = n
	ev, _ := json.Marshal(res)
	return s.Send(rpc.StreamFrame{Event: ev})
}

// imageRelay streams an image the operator sends once on to every target
// Machine over the mesh (images.ServeRelay), this one included when named.
func (d *Daemon) imageRelay(ctx context.Context, raw json.RawMessage, s rpc.StreamConn) error {
	id, _ := d.local()
	return images.ServeRelay(ctx, raw, s, images.RelayEnv{Self: id, Peers: d.peers, Dial: d.dialPeer,
		Load: func(ctx context.Context, r io.Reader) (rpc.ImageLoadResult, error) {
			c := &countReader{r: r}
			res, err := loadArchive(ctx, c)
			res.Bytes = c.n
			return res, err
		}})
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
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
func (o *containerOps) pullImage(ctx context.Context, raw json.RawMessage) (any, error) {
	var req rpc.PullImageRequest
	if err := rpc.Decode(rpc.CmdPullImage, raw, &req); err != nil {
		return nil, err
	}
	ref, err := reference.ParseNormalizedNamed(req.Image)
	if err != nil {
		return nil, rpc.InvalidField("image", "%q is not an image reference: %v", req.Image, err)
	}
	if len(req.RegistryAuth) > 64<<10 {
		return nil, rpc.InvalidField("registry_auth", "longer than 64 KiB")
	}
	f := o.facts()
	name := reference.TagNameOnly(ref).String()
	rd, err := o.docker.ImagePull(ctx, name, image.PullOptions{RegistryAuth: req.RegistryAuth})
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", f.Name, req.Image, err).With("image", req.Image)
	}
	defer rd.Close()
	status, err := pullStatus(rd)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "machine %s: pull %s: %v", f.Name, req.Image, err).With("image", req.Image)
	}
	img, err := o.docker.ImageInspect(ctx, req.Image)
	if err != nil {
		return nil, dockerErr(err, "inspect pulled image %s", req.Image)
	}
	o.log.Info("image pulled", "image", req.Image, "id", short(img.ID))
	return rpc.PullImageResult{Image: req.Image, ID: img.ID, Status: status}, nil
}

// pullStatus reads Docker's pull progress stream to its end and returns
// the last status line, or the error the stream reports.
func pullStatus(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	last := ""
	for {
		var m struct {
			Status      string `json:"status"`
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
	}
}
