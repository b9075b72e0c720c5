package zfsvol

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// stuckZFS puts scripted zfs and zpool first on PATH: every dataset
// exists with no snapshots, and zfs receive reads its stream until it
// ends. A script, not the recorded double: the double answers one
// command after the other, and this test needs a receive in flight
// while other commands run (the real zfs exists only on the VM lab).
func stuckZFS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	pool := `printf 'ployz\tname\tployz\t-\nployz\thealth\tONLINE\t-\nployz\tallocated\t115200\t-\nployz\tsize\t2013265920\t-\nployz\tfree\t2013150720\t-\nployz\treadonly\toff\t-\nployz\tdedupratio\t1.00\t-\nployz\tfragmentation\t0\t-\nployz\tfreeing\t0\t-\nployz\tleaked\t0\t-\n'`
	zfs := `for a; do last=$a; done
case "$1 $2 $3 $4" in
receive*) cat >/dev/null ;;
"list -Hp -t"*) ;;
list*) printf '%s\t-\t24576\t67084288\t/var/lib/ployz/volumes/x\toff\tfilesystem\t-\t67108864\t24576\t24576\t12288\t24576\n' "$last" ;;
"get -H -o value") echo - ;;
get*) printf 'creation\t1796507393\nreceive_resume_token\t-\nreadonly\toff\n' ;;
esac`
	for name, body := range map[string]string{"zpool": pool, "zfs": zfs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestReceiveHoldsOnlyItsVolume: while a stream into db is received
// (minutes on a large volume), another volume is read and changed, and
// db's own next change waits for the receive to end. Under the one
// Manager-wide lock a receive held, every Get (its pool read) and every
// other volume's change waited behind the whole stream.
func TestReceiveHoldsOnlyItsVolume(t *testing.T) {
	stuckZFS(t)
	m := &Manager{pool: "ployz"}
	ctx := context.Background()
	stream, feed := io.Pipe()
	received := make(chan error, 1)
	go func() {
		_, err := m.Receive(ctx, "db", true, stream)
		received <- err
	}()
	if _, err := feed.Write([]byte("a stream")); err != nil { // zfs receive reads it: the receive runs
		t.Fatal(err)
	}
	within := func(what string, fn func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s waited behind db's receive", what)
		}
	}
	within("Get of logs", func() error { _, err := m.Get(ctx, "logs"); return err })
	within("SetReadOnly of logs", func() error { _, err := m.SetReadOnly(ctx, "logs", true); return err })
	dbChanged := make(chan error, 1)
	go func() { _, err := m.SetReadOnly(ctx, "db", true); dbChanged <- err }()
	select {
	case err := <-dbChanged:
		t.Fatalf("db's SetReadOnly ran during its receive: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	feed.Close()
	if err := <-received; err != nil {
		t.Fatalf("receive: %v", err)
	}
	if err := <-dbChanged; err != nil {
		t.Fatalf("db's SetReadOnly after the receive: %v", err)
	}
}
