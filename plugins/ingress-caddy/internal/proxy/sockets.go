package proxy

import (
	"net"
	"os"
	"strconv"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/fdstore"
)

// FDNameHTTP and FDNameHTTPS name the HTTP and HTTPS listening sockets
// in systemd's fd store.
const (
	FDNameHTTP  = "ployz-ingress-http"
	FDNameHTTPS = "ployz-ingress-https"
)

// kept holds the socket files Caddy listens on by number: a collected
// os.File would close its descriptor under Caddy.
var kept []*os.File

// dropInherited closes the socket named name if systemd passed it back
// and nothing claimed it (HTTPS is no longer served): connections must
// be refused, not queued for nobody.
func dropInherited(name string) {
	if !fdstore.Available() {
		return
	}
	if f := fdstore.Take(name); f != nil {
		f.Close()
		fdstore.Forget(name)
	}
}

// httpListen returns the address Caddy should listen on for listen (see
// parkedListen).
func httpListen(listen string, log hclog.Logger) string {
	return parkedListen(FDNameHTTP, listen, log)
}

// parkedListen returns the address Caddy should listen on for listen.
// Under systemd it is "fd/N": the socket named name that systemd passed
// back from its fd store, else one bound now and parked there, so
// restarting the proxy (a new binary, a new spec) queues connections in
// the kernel instead of refusing them. Outside systemd, or when binding
// fails (Caddy then reports the error itself), it is listen unchanged.
func parkedListen(name, listen string, log hclog.Logger) string {
	if !fdstore.Available() {
		return listen
	}
	if f := fdstore.Take(name); f != nil {
		l, err := net.FileListener(f) // a duplicate, to check the address
		if err == nil && sameListen(l.Addr(), listen) {
			l.Close()
			if err := fdstore.Hold(name, f); err != nil {
				log.Warn("could not keep the socket for a handoff", "name", name, "error", err)
			}
			kept = append(kept, f)
			log.Info("took the socket from the fd store", "name", name, "listen", listen)
			return "fd/" + strconv.Itoa(int(f.Fd()))
		}
		if err == nil {
			l.Close()
		}
		f.Close()
	}
	fdstore.Forget(name)
	l, err := net.Listen("tcp", listen)
	if err != nil {
		log.Warn("could not bind the socket ahead of Caddy", "name", name, "listen", listen, "error", err)
		return listen
	}
	defer l.Close()
	tl := l.(*net.TCPListener)
	if err := fdstore.Park(name, tl); err != nil {
		log.Warn("could not park the socket; restarts will refuse connections briefly", "name", name, "error", err)
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
