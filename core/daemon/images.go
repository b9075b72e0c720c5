package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// imageLoad streams an uploaded image archive into this Machine's Docker:
// images reach Machines without a registry (issue 6, "Images without a
// registry").
func (d *Daemon) imageLoad(ctx context.Context, _ json.RawMessage, s rpc.StreamConn) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "docker: %v", err)
	}
	defer cli.Close()
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
	resp, err := cli.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return rpc.Errorf(rpc.CodeInvalidArgument, "docker load: %v", err)
	}
	defer resp.Body.Close()
	var res rpc.ImageLoadResult
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
			return rpc.Errorf(rpc.CodeInvalidArgument, "docker load: %s", m.Error)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			res.Loaded = append(res.Loaded, s)
		}
	}
	res.Bytes = n
	ev, _ := json.Marshal(res)
	return s.Send(rpc.StreamFrame{Event: ev})
}
