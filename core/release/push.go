package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Caller is the part of an Entry Machine client the push needs.
type Caller interface {
	Call(ctx context.Context, t rpc.Target, command string, payload, out any) error
	rpc.Opener
}

// chunk is one data frame of an upload.
const chunk = 256 << 10

// Digest is the hex sha256 and size of the bundle file at p.
func Digest(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// Bundle is a bundle file to push: its opened manifest and what signs it
// (the Machine checks the proof against its own keys).
type Bundle struct {
	Path     string
	Manifest *Manifest
	Proof    *rpc.BundleProof
}

// Push uploads b to one Machine over Machine RPC and returns once that
// Machine verified it and started its swap.
func Push(ctx context.Context, c Caller, machineID string, b Bundle) (rpc.UpgradeStarted, error) {
	return push(ctx, c, rpc.UpgradeMachine, machineID, b, "")
}

// PushPlugin is Push for a swap of one plugin (upgrade_plugin).
func PushPlugin(ctx context.Context, c Caller, machineID string, b Bundle, plugin string) (rpc.UpgradeStarted, error) {
	return push(ctx, c, rpc.UpgradePlugin, machineID, b, plugin)
}

func push(ctx context.Context, c Caller, m rpc.StreamMethod[rpc.UpgradeRequest, rpc.UpgradeStarted], machineID string, b Bundle, plugin string) (rpc.UpgradeStarted, error) {
	var started rpc.UpgradeStarted
	sum, size, err := Digest(b.Path)
	if err != nil {
		return started, err
	}
	f, err := os.Open(b.Path)
	if err != nil {
		return started, err
	}
	defer f.Close()
	req := rpc.UpgradeRequest{Version: b.Manifest.Version, SHA256: sum, Size: size, Plugin: plugin, Proof: b.Proof}
	st, err := rpc.Open(ctx, c, rpc.Target{One: machineID}, m, req)
	if err != nil {
		return started, err
	}
	defer st.Close()
	buf := make([]byte, chunk)
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			if err := st.Send(rpc.StreamFrame{Data: append([]byte(nil), buf[:n]...)}); err != nil {
				return started, fmt.Errorf("upload: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return started, rerr
		}
	}
	if err := st.Send(rpc.StreamFrame{EOF: true}); err != nil {
		return started, fmt.Errorf("upload: %w", err)
	}
	for {
		fr, err := st.Recv()
		if err != nil {
			return started, err
		}
		if fr.Error != nil {
			return started, fr.Error
		}
		if len(fr.Event) > 0 {
			if started, err = m.Event(fr); err != nil {
				return started, err
			}
		}
		if fr.Done {
			if started.ID == "" {
				return started, fmt.Errorf("%s ended without starting a swap", m.Name)
			}
			return started, nil
		}
	}
}

// Await polls one Machine's upgrade_status until the swap id has ended.
// Calls fail while the Machine restarts its daemon; they are retried until
// timeout. each sees every new step.
func Await(ctx context.Context, c Caller, machineID, id string, timeout time.Duration, each func(rpc.UpgradeStep)) (rpc.UpgradeStatus, error) {
	return poll(ctx, id, timeout, each, func(ctx context.Context) (rpc.UpgradeStatus, error) {
		return rpc.Invoke(ctx, c, rpc.Target{One: machineID}, rpc.ReadUpgradeStatus, rpc.None{})
	})
}

// poll reads a swap's status until it ends.
func poll(ctx context.Context, id string, timeout time.Duration, each func(rpc.UpgradeStep), read func(context.Context) (rpc.UpgradeStatus, error)) (rpc.UpgradeStatus, error) {
	deadline := time.Now().Add(timeout)
	seen := 0
	var lastErr error
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := read(cctx)
		cancel()
		if err == nil && st.ID == id {
			for ; seen < len(st.Steps); seen++ {
				if each != nil {
					each(st.Steps[seen])
				}
			}
			if st.Terminal() {
				return st, nil
			}
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("the swap did not end within %s (last error: %v)", timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
