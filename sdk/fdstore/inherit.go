package fdstore

import (
	"os"
	"sync"

	"github.com/coreos/go-systemd/v22/activation"
)

// The sockets systemd passed this process (LISTEN_FDS, LISTEN_FDNAMES:
// its fd store at a restart, or a handoff's), by name, until taken.
// activation.Files works once (it clears the environment), so this
// package is the one place that calls it.
var inherited = struct {
	sync.Mutex
	claimed bool
	files   map[string][]*os.File
}{files: map[string][]*os.File{}}

// Claim takes the sockets systemd passed this process and marks them
// close-on-exec, so no child it starts inherits a listening socket. Take,
// ListenTCP and ListenUDP claim on first use; a process that starts
// children before that (ployzd) calls Claim first. A handoff successor
// must call it only after it set LISTEN_PID (sdk.ServeDataPlane does).
func Claim() {
	inherited.Lock()
	defer inherited.Unlock()
	claimLocked()
}

func claimLocked() {
	if inherited.claimed {
		return
	}
	inherited.claimed = true
	for _, f := range activation.Files(true) {
		inherited.files[f.Name()] = append(inherited.files[f.Name()], f)
	}
}

// Take returns the socket systemd passed this process under name, once;
// nil when there is none (a first start, or outside systemd). The caller
// owns the file.
func Take(name string) *os.File {
	inherited.Lock()
	defer inherited.Unlock()
	claimLocked()
	fs := inherited.files[name]
	if len(fs) == 0 {
		return nil
	}
	inherited.files[name] = fs[1:]
	return fs[0]
}

// CloseUntaken closes every passed socket nothing took: a process that
// takes what it serves at start drops the rest, so a socket it no longer
// serves refuses connections instead of queueing them for nobody.
func CloseUntaken() {
	inherited.Lock()
	defer inherited.Unlock()
	claimLocked()
	for name, fs := range inherited.files {
		for _, f := range fs {
			f.Close()
		}
		delete(inherited.files, name)
	}
}

// closeInherited closes the untaken passed sockets named name.
func closeInherited(name string) {
	inherited.Lock()
	defer inherited.Unlock()
	for _, f := range inherited.files[name] {
		f.Close()
	}
	delete(inherited.files, name)
}
