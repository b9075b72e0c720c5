package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// echoServer answers every line with "name: line" until the test ends.
func echoServer(t *testing.T, name string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s: %s", name, line)
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func tcpRow(key, machine, svc string, ready bool, port, containerPort int) store.Row[store.ContainerBody] {
	return store.Row[store.ContainerBody]{Key: key, Owner: machine, Body: store.ContainerBody{
		Namespace: "demo", Service: svc, IP: "127.0.0.1", Ready: ready,
		Ingress: []store.IngressRoute{{Protocol: "tcp", Port: port, ContainerPort: containerPort}}}}
}

// exchange sends line on c and returns the answer line.
func exchange(c net.Conn, r *bufio.Reader, line string) (string, error) {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return "", err
	}
	s, err := r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// TestServeTCPRoutes runs the embedded Caddy with tcp routes in front of
// real TCP echo servers on loopback: a published route's port proxies
// bytes both ways to the first upstream (this Machine's Container first),
// a connection outlives a config reload, and a pending route, or one
// that becomes pending, has no listener (connection refused).
func TestServeTCPRoutes(t *testing.T) {
	local, remote := echoServer(t, "local"), echoServer(t, "remote")
	dir := t.TempDir()
	listen := freePort(t)
	_, pp, _ := net.SplitHostPort(freePort(t))
	_, qp, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(pp)
	pendingPort, _ := strconv.Atoi(qp)
	tcpAddr, pendingAddr := "127.0.0.1:"+pp, "127.0.0.1:"+qp
	specPath, statusPath := filepath.Join(dir, "ingress.json"), filepath.Join(dir, "status.json")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		listen, statusPath, filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		tcpRow("c1", "m2", "db", true, port, remote),
		tcpRow("c2", "m1", "db", false, port, local),
		tcpRow("c3", "m1", "cache", false, pendingPort, local),
	}, nil)
	loads, done, cancel := startServe(specPath, src)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })

	st := readStatus(t, statusPath)
	byKey := map[string]ingress.Route{}
	for _, r := range st.Routes {
		byKey[r.Key()] = r
	}
	if p, q := byKey["tcp/"+pp], byKey["tcp/"+qp]; len(st.Routes) != 2 || q.State != ingress.RoutePending ||
		p.State != ingress.RoutePublished || p.Owner != "demo/db" || p.Protocol != "tcp" || p.Port != port {
		t.Fatalf("status routes %+v", st.Routes)
	}
	if _, err := net.DialTimeout("tcp", pendingAddr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("pending route: dial %v, want connection refused", err)
	}

	// Only the remote Container is ready: it answers.
	c, err := net.DialTimeout("tcp", tcpAddr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := exchange(c, r, "hello"); err != nil || got != "remote: hello" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}

	// The local Container becomes ready and an HTTP route appears: the
	// config reloads; the open connection keeps its upstream, a new one
	// goes to the local Container first.
	src.set([]store.Row[store.ContainerBody]{
		tcpRow("c1", "m2", "db", true, port, remote),
		tcpRow("c2", "m1", "db", true, port, local),
		tcpRow("c3", "m1", "cache", false, pendingPort, local),
		webRow("w1", "m1", "http://127.0.0.1:"+strconv.Itoa(remote), true, "web.example.test"),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool {
		for _, r := range st.Routes {
			if r.Key() == "tcp/"+pp {
				return len(st.Routes) == 3 && len(r.Upstreams) == 2
			}
		}
		return false
	})
	if got, err := exchange(c, r, "again"); err != nil || got != "remote: again" {
		t.Fatalf("open connection across a reload: %q %v", got, err)
	}
	for i := 0; i < 3; i++ {
		c2, err := net.DialTimeout("tcp", tcpAddr, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := exchange(c2, bufio.NewReader(c2), "local?")
		c2.Close()
		if err != nil || got != "local: local?" {
			t.Fatalf("local first: %q %v", got, err)
		}
	}

	// No ready Container left: the port stops listening.
	src.set([]store.Row[store.ContainerBody]{
		tcpRow("c1", "m2", "db", false, port, remote),
		tcpRow("c2", "m1", "db", false, port, local),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && st.Routes[0].State == ingress.RoutePending })
	if _, err := net.DialTimeout("tcp", tcpAddr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("route gone pending: dial %v, want connection refused", err)
	}
	if st := readStatus(t, statusPath); len(st.Routes) != 1 || !strings.Contains(st.Routes[0].Detail, "no listener") {
		t.Fatalf("status %+v", st.Routes)
	}
}

// TestServeBusyTCPPortLeavesOtherRoutes: a tcp route on a port another
// process holds gets no listener and is reported pending, while the rest
// of the config (an HTTP route) still loads.
func TestServeBusyTCPPortLeavesOtherRoutes(t *testing.T) {
	up := echoServer(t, "db")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	listen := freePort(t)
	specPath, statusPath := filepath.Join(dir, "ingress.json"), filepath.Join(dir, "status.json")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		listen, statusPath, filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		tcpRow("c1", "m1", "db", true, port, up),
		webRow("w1", "m1", "http://127.0.0.1:"+strconv.Itoa(up), true, "web.example.test"),
	}, nil)
	loads, done, cancel := startServe(specPath, src)
	defer func() {
		cancel()
		<-done
	}()
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })
	st := readStatus(t, statusPath)
	if st.LoadError != "" || !st.Running {
		t.Fatalf("the config did not load: %+v", st)
	}
	for _, r := range st.Routes {
		if r.Protocol == "tcp" && (r.State != ingress.RoutePending || !strings.Contains(r.Detail, "in use on this Machine")) {
			t.Fatalf("busy tcp route %+v", r)
		}
		if r.Protocol == "" && r.State != ingress.RoutePublished {
			t.Fatalf("http route %+v", r)
		}
	}
}
