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
	"maps"
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
	plat := imagePlatform(info.Os, info.Architecture, info.Variant)
	t := rpc.Target{All: len(names) == 0, Set: names}
	// Which Machines hold it, cheaply first: layers (an inspection of
	// every image a Machine holds) only from those that miss it.
	fan, err := rpc.FanoutMethod(ctx, entry, t, rpc.ListImages, rpc.ListImagesRequest{})
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
		case list.Platform != "" && !samePlatform(list.Platform, plat):
			res.Outcome, res.Error = "failed", fmt.Sprintf("image %s is built for %s but this Machine runs %s", image, plat, list.Platform)
		default:
			send = append(send, len(out))
		}
		out = append(out, res)
	}
	if len(send) == 0 {
		return out, nil
	}
	heldLayers(ctx, entry, out, send, held)
	saved, err := saveImage(ctx, docker, image, info.RootFS.Layers)
	if err != nil {
		return nil, err
	}
	defer saved.remove()
	skips := map[int]map[string]bool{}
	for _, i := range send {
		skips[i] = saved.skip(held[i])
	}
	var ct rpc.Contract
	if err := rpc.InvokeInto(ctx, entry, rpc.Target{}, rpc.DescribeContract, rpc.None{}, &ct); err != nil {
		return nil, err
	}
	if slices.Contains(ct.Capabilities, rpc.CapImageRelay) {
		relayed(ctx, entry, saved, out, send, skips, slices.Contains(ct.Capabilities, rpc.CapStreamRawData), progress)
	} else {
		parallel(ctx, entry, saved, out, send, skips, progress)
	}
	// A Docker that cannot load without every layer gets them all.
	var wg sync.WaitGroup
	for _, i := range send {
		res := &out[i]
		if res.Outcome != "failed" || len(skips[i]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := upload(ctx, entry, saved, nil, res.MachineID, func(n int64) {
				if progress != nil {
					progress(res.MachineName, n, saved.size)
				}
			})
			res.Bytes += n
			res.SkippedLayers, res.Outcome, res.Error = 0, "pushed", ""
			if err != nil {
				res.Outcome, res.Error = "failed", err.Error()
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// heldLayers fills held, by index into out, with the layer chains each
// Machine of send holds, so their uploads leave those out; a Machine
// that does not answer gets every layer.
func heldLayers(ctx context.Context, entry *rpc.Client, out []Result, send []int, held map[int]map[string]bool) {
	at := map[string]int{}
	var ids []string
	for _, i := range send {
		at[out[i].MachineID] = i
		ids = append(ids, out[i].MachineID)
	}
	fan, err := rpc.FanoutMethod(ctx, entry, rpc.Target{Set: ids}, rpc.ListImages, rpc.ListImagesRequest{Layers: true})
	if err != nil {
		return
	}
	for _, r := range fan.Results {
		i, ok := at[r.MachineID]
		if !ok || r.Error != nil {
			continue
		}
		if list, err := rpc.ListImages.Answer(r.Payload); err == nil {
			held[i] = heldChains(list)
		}
	}
}

// parallel uploads the archive to each target through the entry, all at
// once: for an Entry Machine that cannot relay (from before image_relay).
func parallel(ctx context.Context, entry *rpc.Client, saved *savedImage, out []Result, send []int, skips map[int]map[string]bool, progress Progress) {
	var wg sync.WaitGroup
	for _, i := range send {
		wg.Add(1)
		go func(res *Result, skip map[string]bool) {
			defer wg.Done()
			n, err := upload(ctx, entry, saved, skip, res.MachineID, func(n int64) {
				if progress != nil {
					progress(res.MachineName, n, saved.size)
				}
			})
			res.Bytes, res.Outcome, res.SkippedLayers = n, "pushed", len(skip)
			if err != nil {
				res.Outcome, res.Error = "failed", err.Error()
			}
		}(&out[i], skips[i])
	}
	wg.Wait()
}

// upload streams the saved archive, without the skipped layers, to one
// Machine and returns the bytes sent.
func upload(ctx context.Context, entry *rpc.Client, saved *savedImage, skip map[string]bool, machineID string, sent func(int64)) (int64, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(saved.stream(pw, skip)) }()
	defer pr.Close()
	rd := pr
	st, err := rpc.Open(ctx, entry, rpc.Target{One: machineID}, rpc.LoadImage, rpc.None{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var n int64
	if err := sendAll(st, rd, func(k int64) { n += k; sent(n) }); err != nil {
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

// relayed sends the archive once to the Entry Machine, which streams each
// target its copy over the mesh (image_relay): the operator's link
// carries each byte once however many Machines receive it. The archive
// sent leaves out what every target holds; the entry leaves out, per
// target, what that one holds.
func relayed(ctx context.Context, entry *rpc.Client, saved *savedImage, out []Result, send []int, skips map[int]map[string]bool, raw bool, progress Progress) {
	fail := func(err error) {
		for _, i := range send {
			out[i].Outcome, out[i].Error = "failed", err.Error()
		}
	}
	var common map[string]bool // what every target skips
	req := rpc.ImageRelayRequest{}
	byID := map[string]*Result{}
	for k, i := range send {
		skip := skips[i]
		if k == 0 {
			common = maps.Clone(skip)
		}
		for p := range common {
			if !skip[p] {
				delete(common, p)
			}
		}
		req.Targets = append(req.Targets, rpc.ImageRelayTarget{MachineID: out[i].MachineID, Skip: slices.Sorted(maps.Keys(skip))})
		out[i].SkippedLayers = len(skip)
		byID[out[i].MachineID] = &out[i]
	}
	st, err := rpc.Open(ctx, entry, rpc.Target{}, rpc.RelayImage, req)
	if err != nil {
		fail(err)
		return
	}
	defer st.Close()
	if raw {
		st.SendRawData()
	}
	// The entry answers Ready once it reached the targets it can.
	if f, err := st.Recv(); err != nil {
		fail(err)
		return
	} else if ev := relayEvent(f); !ev.Ready {
		fail(errors.New("image_relay: the Entry Machine did not answer ready"))
		return
	}
	size := saved.size
	done := make(chan []rpc.ImageRelayResult, 1)
	recvErr := make(chan error, 1)
	go func() {
		for {
			f, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			ev := relayEvent(f)
			for id, n := range ev.Progress {
				if r := byID[id]; r != nil && progress != nil {
					progress(r.MachineName, min(n, size), size)
				}
			}
			if ev.Results != nil {
				done <- ev.Results
				return
			}
		}
	}()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(saved.stream(pw, common)) }()
	defer pr.Close()
	if err := sendAll(st, pr, func(int64) {}); err != nil {
		// The entry may still say which targets finished and why not.
		select {
		case res := <-done:
			applyRelay(out, byID, res, progress, size)
		case <-recvErr:
			fail(err)
		}
		return
	}
	select {
	case res := <-done:
		applyRelay(out, byID, res, progress, size)
	case err := <-recvErr:
		fail(err)
	}
}

func relayEvent(f rpc.StreamFrame) rpc.ImageRelayEvent {
	ev, _ := rpc.RelayImage.Event(f) // a tolerant reader: unknown events carry nothing
	return ev
}

// sendAll streams r as data frames, then the end of data; sent is told
// each frame's size.
func sendAll(st *rpc.ClientStream, r io.Reader, sent func(int64)) error {
	buf := make([]byte, chunk)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if err := st.Send(rpc.StreamFrame{Data: buf[:k]}); err != nil {
				return fmt.Errorf("upload: %w", err)
			}
			sent(int64(k))
		}
		if errors.Is(err, io.EOF) {
			return st.CloseSend()
		}
		if err != nil {
			return fmt.Errorf("read saved image: %w", err)
		}
	}
}

func applyRelay(out []Result, byID map[string]*Result, res []rpc.ImageRelayResult, progress Progress, size int64) {
	for _, r := range res {
		o := byID[r.MachineID]
		if o == nil {
			continue
		}
		o.Bytes, o.Outcome = r.Bytes, "pushed"
		if r.Error != nil {
			o.Outcome, o.Error = "failed", r.Error.Error()
		} else if progress != nil {
			progress(o.MachineName, size, size)
		}
	}
	for _, o := range byID {
		if o.Outcome == "" {
			o.Outcome, o.Error = "failed", "the Entry Machine reported no result"
		}
	}
}
