package feature

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
)

var (
	sessionOnce sync.Once
	sessionID   string
)

// Session is this Machine's session: it changes when the Machine boots
// (the kernel's boot id, and PID 1's start time, which also tells lab
// Machines sharing one kernel apart), not when the daemon restarts.
func Session() string {
	sessionOnce.Do(func() {
		boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		init, _ := os.ReadFile("/proc/1/stat")
		if i := strings.LastIndexByte(string(init), ')'); i >= 0 {
			if f := strings.Fields(string(init)[i+1:]); len(f) > 19 {
				init = []byte(f[19]) // starttime
			}
		}
		sum := sha256.Sum256(append(append(boot, '/'), init...))
		sessionID = hex.EncodeToString(sum[:6])
	})
	return sessionID
}
