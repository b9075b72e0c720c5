// Package images delivers locally built images to Machines without a
// registry: the operator's Docker saves the image, the CLI streams it
// through the Entry Machine, and each target loads it into its Docker.
// Only Machines that miss the image receive it.
package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// chunk is the size of one data frame.
const chunk = 256 << 10

// Result is one target's outcome.
type Result struct {
	MachineID   string `json:"machine_id"`
	MachineName string `json:"machine_name"`
	// Outcome is pushed, present (already had it) or failed.
	Outcome string `json:"outcome"`
	Bytes   int64  `json:"bytes,omitempty"`
	// SkippedLayers counts the layers left out because the Machine held them.
	SkippedLayers int    `json:"skipped_layers,omitempty"`
	Error         string `json:"error,omitempty"`
}

// Progress is told how many bytes of one upload went out so far.
type Progress func(machine string, sent, total int64)

// Push delivers image to the named Machines (all the entry observes when
// names is empty) and reports each target. It fails before sending
// anything when the image is not in the operator's Docker.
func Push(ctx context.Context, entry *rpc.Client, image string, names []string, progress Progress) ([]Result, error) {
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("local docker: %w", err)
	}
	defer docker.Close()
	info, err := docker.ImageInspect(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("image %s is not in this computer's Docker: %w", image, err)
	}
	t := rpc.Target{All: len(names) == 0, Set: names}
	fan, err := entry.Fanout(ctx, t, rpc.CmdListImages, rpc.ListImagesRequest{Layers: true})
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, o := range fan.Omitted {
		out = append(out, Result{MachineID: o.MachineID, MachineName: o.MachineName, Outcome: "failed", Error: o.Reason})
	}
	var send []int // indexes into out of the Machines that miss the image
	held := map[int]map[string]bool{}
	for _, r := range fan.Results {
		res := Result{MachineID: r.MachineID, MachineName: r.MachineName}
		var list rpc.ImageList
		switch {
		case r.Error != nil:
			res.Outcome, res.Error = "failed", r.Error.Error()
		case json.Unmarshal(r.Payload, &list) != nil:
			res.Outcome, res.Error = "failed", "list_images: malformed answer"
		case slices.ContainsFunc(list.Images, func(i rpc.ImageInfo) bool { return i.ID == info.ID && slices.Contains(i.Tags, image) }):
			res.Outcome = "present"
		default:
			held[len(out)] = heldChains(list)
			send = append(send, len(out))
		}
		out = append(out, res)
	}
	if len(send) == 0 {
		return out, nil
	}
	saved, err := saveImage(ctx, docker, image, info.RootFS.Layers)
	if err != nil {
		return nil, err
	}
	defer saved.remove()
	// Every Machine that misses the image gets its own stream at once:
	// delivery takes as long as the slowest Machine, not their sum.
	var wg sync.WaitGroup
	for _, i := range send {
		wg.Add(1)
		go func(res *Result, skip map[string]bool) {
			defer wg.Done()
			sent := func(n int64) {
				if progress != nil {
					progress(res.MachineName, n, saved.size)
				}
			}
			n, err := upload(ctx, entry, saved, skip, res.MachineID, sent)
			res.SkippedLayers = len(skip)
			if err != nil && len(skip) > 0 {
				res.SkippedLayers = 0
				// A Docker that cannot load without every layer gets them all.
				var m int64
				m, err = upload(ctx, entry, saved, nil, res.MachineID, sent)
				n += m
			}
			res.Bytes, res.Outcome = n, "pushed"
			if err != nil {
				res.Outcome, res.Error = "failed", err.Error()
			}
		}(&out[i], saved.skip(held[i]))
	}
	wg.Wait()
	return out, nil
}

// upload streams the saved archive, without the skipped layers, to one
// Machine and returns the bytes sent.
func upload(ctx context.Context, entry *rpc.Client, saved *savedImage, skip map[string]bool, machineID string, sent func(int64)) (int64, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(saved.stream(pw, skip)) }()
	defer pr.Close()
	rd := pr
	st, err := entry.OpenStream(ctx, rpc.Target{One: machineID}, rpc.CmdImageLoad, nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	buf := make([]byte, chunk)
	var n int64
	for {
		k, err := rd.Read(buf)
		if k > 0 {
			if err := st.Send(rpc.StreamFrame{Data: buf[:k]}); err != nil {
				return n, fmt.Errorf("upload: %w", err)
			}
			n += int64(k)
			sent(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read saved image: %w", err)
		}
	}
	if err := st.CloseSend(); err != nil {
		return n, err
	}
	for {
		f, err := st.Recv()
		if err != nil {
			return n, err
		}
		if f.Done {
			return n, nil
		}
	}
}

// Deliver pushes each image that this computer's Docker holds to every
// Machine that misses it, before a Deploy plans: deploy's own delivery. An
// image this computer does not hold is left to the planner, which refuses
// a Service whose image no Machine has. Failures are returned per target.
func Deliver(ctx context.Context, entry *rpc.Client, images []string, progress Progress) ([]Result, error) {
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, nil // no local Docker: nothing to deliver from
	}
	defer docker.Close()
	if _, err := docker.Ping(ctx); err != nil {
		return nil, nil
	}
	var out []Result
	seen := map[string]bool{}
	for _, img := range images {
		if seen[img] {
			continue
		}
		seen[img] = true
		if _, err := docker.ImageInspect(ctx, img); err != nil {
			continue
		}
		res, err := Push(ctx, entry, img, nil, progress)
		if err != nil {
			return out, fmt.Errorf("deliver %s: %w", img, err)
		}
		out = append(out, res...)
	}
	return out, nil
}
