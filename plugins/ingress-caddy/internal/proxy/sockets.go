package proxy

import (
	"net"
	"os"
	"strconv"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/fdstore"
)

// FDNameHTTP names the HTTP listening socket in systemd's fd store.
const FDNameHTTP = "ployz-ingress-http"

// kept holds the socket files Caddy listens on by number: a collected
// os.File would close its descriptor under Caddy.
var kept []*os.File

// httpListen returns the address Caddy should listen on for listen. Under
// systemd it is "fd/N": the socket systemd passed back from its fd store,
// else one bound now and parked there, so restarting the proxy (a new
// binary, a new spec) queues connections in the kernel instead of
// refusing them. Outside systemd, or when binding fails (Caddy then
// reports the error itself), it is listen unchanged.
func httpListen(listen string, log hclog.Logger) string {
	if !fdstore.Available() {
		return listen
	}
	for _, f := range activation.Files(true) {
		if f.Name() != FDNameHTTP {
			f.Close()
			continue
		}
		l, err := net.FileListener(f) // a duplicate, to check the address
		if err == nil && sameListen(l.Addr(), listen) {
			l.Close()
			kept = append(kept, f)
			log.Info("took the HTTP socket from the fd store", "listen", listen)
			return "fd/" + strconv.Itoa(int(f.Fd()))
		}
		if err == nil {
			l.Close()
		}
		f.Close()
	}
	fdstore.Forget(FDNameHTTP)
	l, err := net.Listen("tcp", listen)
	if err != nil {
		log.Warn("could not bind the HTTP socket ahead of Caddy", "listen", listen, "error", err)
		return listen
	}
	defer l.Close()
	tl := l.(*net.TCPListener)
	if err := fdstore.Park(FDNameHTTP, tl); err != nil {
		log.Warn("could not park the HTTP socket; restarts will refuse connections briefly", "error", err)
		return listen
	}
	f, err := tl.File()
	if err != nil {
		return listen
	}
	kept = append(kept, f)
	return "fd/" + strconv.Itoa(int(f.Fd()))
}

// sameListen reports whether a is the address listen names (an empty
// host matches any).
func sameListen(a net.Addr, listen string) bool {
	host, port, err := net.SplitHostPort(listen)
	ta, ok := a.(*net.TCPAddr)
	if err != nil || !ok || strconv.Itoa(ta.Port) != port {
		return false
	}
	return host == "" || net.ParseIP(host).Equal(ta.IP)
}
