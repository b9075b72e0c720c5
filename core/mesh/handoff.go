package mesh

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/fdstore"
)

// tunFDName is the TUN's name in the unit's fd store.
const tunFDName = "tun"

// keptTUN returns the TUN systemd handed back from the fd store (a restart
// of the unit), or nil on a first start or outside systemd.
func keptTUN() *os.File {
	kept := fdstore.Take(tunFDName)
	fdstore.CloseUntaken()
	return kept
}

// carryOver parks a new TUN in the fd store, or on a kept TUN starts with
// the peers the previous process saved, so traffic flows again before the
// daemon notices the restart.
func (u *userspace) carryOver(stateFile string, kept bool, log hclog.Logger) {
	if !kept {
		if fdstore.Available() {
			if err := fdstore.Park(tunFDName, u.tun.File()); err != nil {
				log.Warn("keeping the TUN in the fd store failed: a restart will recreate the interface", "error", err)
			}
		}
		return
	}
	if stateFile == "" {
		return
	}
	b, err := os.ReadFile(stateFile)
	os.Remove(stateFile)
	if err != nil {
		if !os.IsNotExist(err) {
			log.Warn("reading the previous process's peers", "file", stateFile, "error", err)
		}
		return
	}
	if set := peerLines(string(b)); set != "" {
		if err := u.dev.IpcSet(set); err != nil {
			log.Warn("restoring the previous process's peers", "error", err)
			return
		}
		log.Info("restored peers from the previous process", "peers", strings.Count(set, "public_key="))
	}
}

// saveState writes the device's peers for a successor (0600: the lines
// carry preshared keys; the private key is not written).
func (u *userspace) saveState(stateFile string, log hclog.Logger) {
	if stateFile == "" {
		return
	}
	get, err := u.dev.IpcGet()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(stateFile), 0o700)
	}
	if err == nil {
		tmp := stateFile + ".tmp"
		if err = os.WriteFile(tmp, []byte(peerLines(get)), 0o600); err == nil {
			err = os.Rename(tmp, stateFile)
		}
	}
	if err != nil {
		log.Warn("saving peers for the next process", "file", stateFile, "error", err)
	}
}

// peerSettable are the UAPI get keys a set accepts back, per peer.
var peerSettable = map[string]bool{
	"public_key": true, "preshared_key": true, "endpoint": true,
	"persistent_keepalive_interval": true, "allowed_ip": true,
}

// peerLines keeps the per-peer lines of a UAPI get that a set accepts:
// never the device's private key or port (the successor sets its own),
// nor counters and handshake times.
func peerLines(get string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(get))
	for sc.Scan() {
		k, _, ok := strings.Cut(sc.Text(), "=")
		if ok && peerSettable[k] {
			b.WriteString(sc.Text())
			b.WriteByte('\n')
		}
	}
	return b.String()
}
