package localsock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// Trusted reports whether uid may serve or use a store socket: root, or the
// uid this process runs as (tests, and a store run by hand).
func Trusted(uid uint32) bool { return uid == 0 || uid == uint32(os.Getuid()) }

// CheckDir refuses a socket directory another user could write to or
// replace: it must be a real directory (not a symlink), owned by root or by
// this process's uid, with no permissions for group or others.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("socket directory %s has mode %04o: only its owner may have access (0700)", dir, perm)
	}
	if uid, ok := ownerUID(fi); !ok || !Trusted(uid) {
		return fmt.Errorf("socket directory %s is owned by uid %d, not root or uid %d", dir, uid, os.Getuid())
	}
	return nil
}

// CheckSocket refuses a socket file that is not in a CheckDir directory or
// is not a socket owned by root or this process's uid.
func CheckSocket(path string) error {
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is not a unix socket", path)
	}
	if uid, ok := ownerUID(fi); !ok || !Trusted(uid) {
		return fmt.Errorf("socket %s is owned by uid %d, not root or uid %d", path, uid, os.Getuid())
	}
	return nil
}

func ownerUID(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// Dial connects to the unix socket at path after CheckSocket, then checks
// that the process that accepted runs as root or this process's uid.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	if err := CheckSocket(path); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uid, err := PeerUID(c)
	if err == nil && !Trusted(uid) {
		err = fmt.Errorf("socket %s is served by uid %d, not root or uid %d", path, uid, os.Getuid())
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Listen makes dir (the socket's directory) 0700, refuses it when CheckDir
// does, replaces a stale socket and listens. The listener drops every peer
// that is not Trusted before Accept returns it; onRefused (may be nil)
// hears of each.
func Listen(path string, onRefused func(error)) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	// MkdirAll keeps an existing directory's mode (an older release made it
	// 0755); the owner check below still refuses one someone else made.
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		if uid, ok := ownerUID(fi); ok && uid == uint32(os.Getuid()) {
			_ = os.Chmod(dir, 0o700)
		}
	}
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return PeerFilter(ln, onRefused), nil
}

// PeerFilter wraps a unix listener so that Accept hangs up on, and skips,
// every peer whose uid is not Trusted.
func PeerFilter(ln net.Listener, onRefused func(error)) net.Listener {
	return &peerListener{Listener: ln, onRefused: onRefused}
}

type peerListener struct {
	net.Listener
	onRefused func(error)
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := PeerUID(c)
		if err == nil && Trusted(uid) {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("refused a peer with uid %d on %s: only root or uid %d", uid, l.Addr(), os.Getuid())
		}
		c.Close()
		if l.onRefused != nil {
			l.onRefused(err)
		}
	}
}
