package sdk_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/plugintest"
)

// TestServeLongLivedNotifiesSystemd runs long-lived mode in-process with a
// fake NOTIFY_SOCKET: READY=1 must arrive only once the socket answers, and
// cancelling the context stops the server and removes socket and record.
func TestServeLongLivedNotifiesSystemd(t *testing.T) {
	dir := t.TempDir()
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Net: "unixgram", Name: filepath.Join(dir, "notify")})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	t.Setenv("NOTIFY_SOCKET", filepath.Join(dir, "notify"))

	socket := filepath.Join(dir, "p.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sdk.ServeLongLived(ctx, &sdk.Plugin{Name: "p", Kind: "test", Version: "1"}, socket, hclog.NewNullLogger())
	}()

	buf := make([]byte, 64)
	_ = notify.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := notify.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("notify = %q, %v", buf[:n], err)
	}
	p := plugintest.Attach(t, socket)
	if p.Info.GetName() != "p" || p.Info.GetPid() != int64(os.Getpid()) {
		t.Fatalf("Info = %v", p.Info)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ServeLongLived did not return after cancel")
	}
	for _, f := range []string{socket, sdk.ReattachPath(socket)} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", f, err)
		}
	}
}
