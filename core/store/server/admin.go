package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/internal/localsock"
)

// maxAdminFrame bounds one admin request frame.
const maxAdminFrame = 1 << 20

// startAdmin serves the admin unix socket: frames are a 4-byte big-endian
// length then a JSON value. Each command is answered with zero or more
// {"Json": ...} frames and then "Success" or {"Error":{"msg":...}}.
func (n *Node) startAdmin(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create admin socket directory: %w", err)
	}
	_ = os.Remove(path) // a stale socket from a previous run blocks Listen
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on admin socket %s: %w", path, err)
	}
	_ = os.Chmod(path, 0o600)
	// The mode alone leaves a window between Listen and Chmod; the peer
	// check closes it.
	ln = localsock.PeerFilter(ln, n.logRefused)
	n.adminLn = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go n.serveAdmin(c)
		}
	}()
	return nil
}

// ReadFrame reads one length-prefixed JSON frame.
func ReadFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxAdminFrame {
		return fmt.Errorf("admin frame of %d bytes exceeds %d", size, maxAdminFrame)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("read admin frame: %w", err)
	}
	return json.Unmarshal(buf, v)
}

// WriteFrame writes one length-prefixed JSON frame.
func WriteFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode admin frame: %w", err)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(append(hdr[:], b...)); err != nil {
		return fmt.Errorf("write admin frame: %w", err)
	}
	return nil
}

func (n *Node) serveAdmin(c net.Conn) {
	defer c.Close()
	for {
		var cmd json.RawMessage
		if err := ReadFrame(c, &cmd); err != nil {
			if !errors.Is(err, io.EOF) {
				_ = WriteFrame(c, adminError(err))
			}
			return
		}
		out, err := n.adminCommand(cmd)
		for _, v := range out {
			if WriteFrame(c, map[string]any{"Json": v}) != nil {
				return
			}
		}
		if err != nil {
			_ = WriteFrame(c, adminError(err))
		} else {
			_ = WriteFrame(c, "Success")
		}
	}
}

func adminError(err error) any { return map[string]any{"Error": map[string]string{"msg": err.Error()}} }

func (n *Node) adminCommand(raw json.RawMessage) ([]any, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch name {
		case "Ping":
			return nil, nil
		case "Reload":
			if len(n.cfg.SchemaPaths) == 0 {
				return nil, fmt.Errorf("no schema paths configured")
			}
			src, err := crdt.ReadSchemaPaths(n.cfg.SchemaPaths)
			if err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return nil, n.eng.Reload(ctx, src)
		case "Vector":
			return []any{n.eng.Book().Vector()}, nil
		}
		return nil, fmt.Errorf("unknown admin command %q", name)
	}
	var obj struct {
		Cluster string
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Cluster == "" {
		return nil, fmt.Errorf("unknown admin command %s", string(raw))
	}
	switch obj.Cluster {
	case "MembershipStates":
		var out []any
		for _, m := range n.Members() {
			out = append(out, map[string]any{"id": m.Name, "addr": m.Addr, "state": m.State})
		}
		return out, nil
	case "Rtts":
		var out []any
		for _, m := range n.Members() {
			out = append(out, map[string]any{"id": m.Name, "addr": m.Addr, "rtt_ms": float64(m.RTT.Microseconds()) / 1000})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown cluster command %q", obj.Cluster)
}
