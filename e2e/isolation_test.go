package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// isoService is one pinned testapp Service; networks, when set, is its
// compose networks list.
func isoService(svc, on, msg, networks string) string {
	s := fmt.Sprintf(`  %s:
    image: %s
    environment: {MESSAGE: "%s"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy:
      placement: {constraints: ["node.hostname==%s"]}
`, svc, lab.TestAppImage, msg, on)
	if networks != "" {
		s += "    networks: " + networks + "\n"
	}
	return s
}

// sharedNetwork declares the external network "payments" as "pay".
const sharedNetwork = "networks:\n  pay: {external: true, name: payments}\n"

// isolationProject is a project with a web and a db, each pinned to a
// Machine; message tells a redeploy of db apart.
func isolationProject(name, webOn, dbOn, message string) string {
	return "name: " + name + "\nservices:\n" + isoService("web", webOn, name, "") + isoService("db", dbOn, message, "")
}

// isoContainer is one Service Container as ps reports it.
type isoContainer struct{ machine, id, ip, ns string }

func isoContainerOf(t testing.TB, op *operator, project, service string) isoContainer {
	t.Helper()
	for _, c := range ps(t, op, project).Containers {
		if c.Service == service && c.State == "running" && c.Ready && c.IP != "" {
			return isoContainer{machine: c.Machine, id: c.ID, ip: c.IP, ns: c.Namespace}
		}
	}
	t.Fatalf("%s/%s: no ready Container in ps", project, service)
	return isoContainer{}
}

// TestNamespaceIsolation deploys two projects, alpha and beta, each with
// a web and a db on different Machines (beta's web shares alpha's web's
// Machine and bridge), and dials from inside the Containers: each web
// reaches its own db, by address and by name, and nothing of the other
// project, across the mesh or on the same bridge; beta's db redeployed
// to a new address stays out of alpha's reach. Every Machine shows the
// rules it enforces, and service inspect the network. A network alias
// resolves for the Containers on its network only.
func TestNamespaceIsolation(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	formCluster(t, l, op)
	for _, p := range []string{isolationProject("alpha", "m1", "m2", "alpha-db-1"), isolationProject("beta", "m1", "m3", "beta-db-1")} {
		if doc, errs, code := deployFile(t, op, p); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
	}
	aWeb, aDB := isoContainerOf(t, op, "alpha", "web"), isoContainerOf(t, op, "alpha", "db")
	bWeb, bDB := isoContainerOf(t, op, "beta", "web"), isoContainerOf(t, op, "beta", "db")
	if aWeb.ns == bWeb.ns || aWeb.machine != "m1" || bWeb.machine != "m1" || aDB.machine != "m2" || bDB.machine != "m3" {
		t.Fatalf("placement: alpha web %+v db %+v, beta web %+v db %+v", aWeb, aDB, bWeb, bDB)
	}
	// testapp get (5 s timeout) rather than a newer subcommand: the
	// testapp image tag is shared by every lab on the host.
	dial := func(from isoContainer, addr string) error {
		_, err := l.Exec(ctx, from.machine, "docker", "exec", from.id, "/testapp", "get", "http://"+addr+"/")
		return err
	}
	reaches := func(from isoContainer, addr string) {
		t.Helper()
		eventually(t, 30*time.Second, from.ns+" web reaches "+addr, func() error { return dial(from, addr) })
	}
	// A refused dial is checked three times: a connection that got
	// through once would be a hole, however brief.
	refused := func(from isoContainer, addr string) {
		t.Helper()
		for range 3 {
			err := refusedOnce(t, ctx, l, from, addr, dial)
			if err == nil {
				t.Errorf("%s web (on %s) opened a TCP connection to %s", from.ns, from.machine, addr)
				return
			}
		}
	}

	t.Run("own-namespace", func(t *testing.T) {
		reaches(aWeb, aDB.ip+":8080")                 // across the mesh
		reaches(bWeb, bDB.ip+":8080")                 // across the mesh
		reaches(aWeb, "db."+aWeb.ns+".internal:8080") // by name
		reaches(bWeb, "db:8080")                      // by the search domain
	})

	t.Run("other-namespace", func(t *testing.T) {
		// Not even ICMP: a ping from alpha's web's network namespace.
		if out, err := l.Exec(ctx, "m1", append(netnsOf(t, ctx, l, aWeb), "ping", "-c", "2", "-W", "1", bDB.ip)...); err == nil {
			t.Errorf("alpha web pinged beta db %s:\n%s", bDB.ip, out)
		}
		if out, err := l.Exec(ctx, "m1", append(netnsOf(t, ctx, l, aWeb), "ping", "-c", "1", "-W", "2", aDB.ip)...); err != nil {
			t.Errorf("alpha web cannot ping its own db %s (the control): %v\n%s", aDB.ip, err, out)
		}
		refused(aWeb, bDB.ip+":8080") // across the mesh
		refused(bWeb, aDB.ip+":8080")
		refused(aWeb, bWeb.ip+":8080") // on the same bridge
		refused(bWeb, aWeb.ip+":8080")
		refused(aWeb, "db."+bWeb.ns+".internal:8080") // by name
	})

	// The control: with m1's isolation chain flushed by hand, the same
	// dial connects (the refusals above are the isolation's), and the
	// daemon's periodic pass puts the rules back.
	t.Run("flushed-rules-come-back", func(t *testing.T) {
		out, err := l.Exec(ctx, "m1", "sh", "-c", `for x in iptables-nft iptables-legacy; do $x -w 5 -S PLOYZ-ISOLATE >/dev/null 2>&1 && $x -w 5 -F PLOYZ-ISOLATE && echo $x; done; true`)
		if err != nil || strings.TrimSpace(out) == "" {
			t.Fatalf("flush PLOYZ-ISOLATE on m1: %q, %v", out, err)
		}
		reaches(aWeb, bDB.ip+":8080")
		eventually(t, 60*time.Second, "m1 restores its isolation", func() error {
			if dial(aWeb, bDB.ip+":8080") == nil {
				return fmt.Errorf("alpha web still reaches beta db")
			}
			return nil
		})
		refused(aWeb, bDB.ip+":8080")
	})

	// ployzd restarting keeps the kernel's rules: no moment opens, and
	// the new daemon takes over from the membership it saved.
	t.Run("ployzd-restart", func(t *testing.T) {
		if _, err := l.Exec(ctx, "m1", "systemctl", "restart", "ployz.service"); err != nil {
			t.Fatal(err)
		}
		refused(aWeb, bDB.ip+":8080")
		reaches(aWeb, aDB.ip+":8080")
	})

	// A reboot empties the kernel's rules and dockerd restarts alpha's and
	// beta's webs before ployzd starts. With ployzd kept from starting at
	// boot, only Docker's drop-in (ployzd isolation restore, before
	// dockerd) can keep beta's web from alpha's on their shared bridge.
	t.Run("reboot", func(t *testing.T) {
		if _, err := l.Exec(ctx, "m1", "systemctl", "disable", "ployz.service"); err != nil {
			t.Fatal(err)
		}
		if err := l.Stop(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
		if err := l.Start(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := l.Exec(ctx, "m1", "systemctl", "enable", "--now", "ployz.service"); err != nil {
				t.Fatal(err)
			}
			reaches(aWeb, aDB.ip+":8080") // the mesh is back with ployzd
			refused(aWeb, bDB.ip+":8080")
		}()
		addrOf := func(c isoContainer) string {
			var out string
			eventually(t, 60*time.Second, c.ns+" web running again on m1", func() error {
				o, err := l.Exec(ctx, "m1", "docker", "inspect", "-f", "{{.State.Running}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", c.id)
				if f := strings.Fields(o); err != nil || len(f) != 2 || f[0] != "true" {
					return fmt.Errorf("%q, %v", o, err)
				}
				out = strings.Fields(o)[1]
				return nil
			})
			return out
		}
		aIP, bIP := addrOf(aWeb), addrOf(bWeb)
		if out, _ := l.Exec(ctx, "m1", "systemctl", "is-active", "ployz.service"); strings.TrimSpace(out) == "active" {
			t.Fatalf("ployzd started at boot although disabled")
		}
		refused(bWeb, aIP+":8080")
		refused(aWeb, bIP+":8080")
	})

	t.Run("visible", func(t *testing.T) {
		for _, m := range l.Machines {
			eventually(t, 30*time.Second, m.Name+" shows its isolation", func() error {
				var in rpc.Inspection
				if err := localJSON(ctx, l, m.Name, &in, "machine", "inspect"); err != nil {
					return err
				}
				if v := in.Isolation; v == nil || v.Generation < 1 || v.ChangedAt == "" || v.Networks < 2 || v.Error != "" {
					return fmt.Errorf("isolation %+v", v)
				}
				return nil
			})
		}
		out := op.must(t, "service", "inspect", "web", "-p", "alpha")
		if !strings.Contains(out, aWeb.ns+" (shared with the Services of "+aWeb.ns+" on it)") {
			t.Errorf("service inspect names no network:\n%s", out)
		}
	})

	t.Run("redeployed-db", func(t *testing.T) {
		if doc, errs, code := deployFile(t, op, isolationProject("beta", "m1", "m3", "beta-db-2")); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("redeploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		nDB := isoContainerOf(t, op, "beta", "db")
		if nDB.id == bDB.id {
			t.Fatalf("beta's db was not replaced: %+v", nDB)
		}
		t.Logf("beta db moved from %s to %s", bDB.ip, nDB.ip)
		reaches(bWeb, nDB.ip+":8080")
		refused(aWeb, nDB.ip+":8080")
		refused(aWeb, bDB.ip+":8080") // the old address, free or reused
		reaches(aWeb, aDB.ip+":8080")
		bDB = nDB
	})

	// Both webs get an ingress route, and alpha is redeployed under a
	// no-retry keep-alive loop through every Machine's ingress: no request
	// fails, and all the while beta's web, on alpha's web's bridge, probes
	// every alpha Container there (refreshed twice a second, a probe every
	// 50 ms) and never connects, the new web included.
	t.Run("redeploy-under-load", func(t *testing.T) {
		withRoutes := func(alphaMsg string) (string, string) {
			return "name: alpha\nservices:\n" + isoRoute(isoService("web", "m1", alphaMsg, ""), "alpha.iso.test") + isoService("db", "m2", "alpha-db-1", ""),
				"name: beta\nservices:\n" + isoRoute(isoService("web", "m1", "beta", ""), "beta.iso.test") + isoService("db", "m3", "beta-db-2", "")
		}
		a, b := withRoutes("alpha")
		for _, p := range []string{a, b} {
			if doc, errs, code := deployFile(t, op, p); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
				t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
			}
		}
		aWeb, bWeb = isoContainerOf(t, op, "alpha", "web"), isoContainerOf(t, op, "beta", "web")
		for host, msg := range map[string]string{"alpha.iso.test": "alpha", "beta.iso.test": "beta"} {
			for _, m := range l.Machines {
				eventually(t, 60*time.Second, m.Name+"'s ingress serves "+host, func() error {
					code, body, err := hostGet(m.IP.String(), host, "/")
					if err != nil || code != 200 || !strings.Contains(body, `"`+msg+`"`) {
						return fmt.Errorf("%d %q, %v", code, body, err)
					}
					return nil
				})
			}
		}
		probe := startNamespaceProbe(t, ctx, l, bWeb, aWeb.ns)
		loop := startLoop(l, "alpha.iso.test")
		a2, _ := withRoutes("alpha-2")
		doc, errs, code := deployFile(t, op, a2)
		loop.end(t, "alpha's redeploy")
		hits, seen := probe.end(t)
		if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("redeploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		newWeb := isoContainerOf(t, op, "alpha", "web")
		if newWeb.id == aWeb.id || !seen[newWeb.ip] {
			t.Errorf("the probe never aimed at alpha's new web %+v (probed %v)", newWeb, seen)
		}
		for _, h := range hits {
			t.Errorf("beta's web connected to an alpha Container during the redeploy: %s", h)
		}
		aWeb = newWeb
	})

	// alpha's web and a new api of beta join the external network
	// "payments": they reach each other, and nothing else of the other
	// project; beta's web, not on it, still reaches nothing of alpha.
	t.Run("external-network", func(t *testing.T) {
		alpha := "name: alpha\n" + sharedNetwork + "services:\n" + isoService("web", "m1", "alpha", "[default, pay]") + isoService("db", "m2", "alpha-db-1", "")
		beta := "name: beta\n" + sharedNetwork + "services:\n" + isoService("web", "m1", "beta", "") + isoService("db", "m3", "beta-db-2", "") +
			isoService("api", "m3", "beta-api", "[default, pay]")
		for _, p := range []string{alpha, beta} {
			if doc, errs, code := deployFile(t, op, p); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
				t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
			}
		}
		web, api := isoContainerOf(t, op, "alpha", "web"), isoContainerOf(t, op, "beta", "api")
		bWeb = isoContainerOf(t, op, "beta", "web")  // replaced: its route is gone
		reaches(web, api.ip+":8080")                 // across the mesh, over payments
		reaches(web, "api."+api.ns+".internal:8080") // by name
		reaches(api, web.ip+":8080")                 // and back
		reaches(web, aDB.ip+":8080")                 // its own namespace still
		reaches(api, bDB.ip+":8080")
		refused(web, bDB.ip+":8080")  // nothing else of beta
		refused(api, aDB.ip+":8080")  // nothing else of alpha
		refused(bWeb, web.ip+":8080") // beta's web is not on payments
		refused(web, bWeb.ip+":8080")
		out := op.must(t, "service", "inspect", "web", "-p", "alpha")
		if !strings.Contains(out, "external:payments (shared with the Services of "+web.ns+", "+api.ns+" on it)") {
			t.Errorf("service inspect does not name the shared network:\n%s", out)
		}
	})

	// beta's api takes the alias "payapi" on payments: alpha's web, on
	// payments, resolves it (through its search domain and as
	// payapi.internal); beta's web, in api's own namespace but not on
	// payments, and alpha's db get no such name, while beta's web still
	// reaches api by its Service name (so the refusal is the name's).
	t.Run("network-alias", func(t *testing.T) {
		beta := "name: beta\n" + sharedNetwork + "services:\n" + isoService("web", "m1", "beta", "") + isoService("db", "m3", "beta-db-2", "") +
			isoService("api", "m3", "beta-api", "{default: null, pay: {aliases: [payapi]}}")
		if doc, errs, code := deployFile(t, op, beta); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		web, db := isoContainerOf(t, op, "alpha", "web"), isoContainerOf(t, op, "alpha", "db")
		reaches(web, "payapi:8080")
		reaches(web, "payapi.internal:8080")
		reaches(bWeb, "api:8080")
		// No such name: the lookup fails, not the connection.
		unknown := func(from isoContainer, name string) {
			t.Helper()
			for range 3 {
				err := dial(from, name+":8080")
				if err == nil || !strings.Contains(err.Error(), "lookup "+name) {
					t.Errorf("%s (on %s) resolving %s: %v, want a failed lookup", from.ns, from.machine, name, err)
					return
				}
			}
		}
		unknown(bWeb, "payapi")
		unknown(bWeb, "payapi.internal")
		unknown(db, "payapi")
		out := op.must(t, "service", "inspect", "api", "-p", "beta")
		if !strings.Contains(out, "external:payments (shared with the Services of "+web.ns+", "+bWeb.ns+" on it); aliases payapi") {
			t.Errorf("service inspect does not show the alias:\n%s", out)
		}
	})
}

// isoRoute adds an ingress route for host to one isoService.
func isoRoute(service, host string) string {
	return service + "    x-ports:\n      - hostname: " + host + "\n        container_port: 8080\n"
}

// netnsOf is the command prefix that runs a command on c's Machine in
// c's network namespace (the Machine's tools, the Container's address).
func netnsOf(t testing.TB, ctx context.Context, l *lab.Lab, c isoContainer) []string {
	t.Helper()
	pid, err := l.Exec(ctx, c.machine, "docker", "inspect", "-f", "{{.State.Pid}}", c.id)
	if err != nil || strings.TrimSpace(pid) == "0" {
		t.Fatalf("pid of %s on %s: %q, %v", c.id, c.machine, pid, err)
	}
	return []string{"nsenter", "-t", strings.TrimSpace(pid), "-n"}
}

// namespaceProbe connects from one Container to every Container of
// another namespace on the same Machine, without pause, until ended.
type namespaceProbe struct {
	l    *lab.Lab
	from isoContainer
	stop string
	done chan string
}

// probeScript lists the target namespace's Containers every 10th round
// and starts a connect (300 ms at most) to each every 50 ms, in the
// background so a dropped SYN never slows the pace; it prints the
// addresses it aims at ("IPS") and any connection made ("HIT").
const probeScript = `ns=$1; stop=$2; shift 2; i=0; ips=""
while [ ! -e "$stop" ]; do
  if [ $((i %% 10)) -eq 0 ]; then
    ips=$(for id in $(docker ps -q --filter label=%s="$ns"); do docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$id"; done | tr '\n' ' ')
    echo "IPS $ips"
  fi
  for ip in $ips; do ("$@" curl -s -o /dev/null -m 0.3 "http://$ip:8080/" && echo "HIT $(date +%%T.%%N) $ip") & done
  i=$((i+1)); sleep 0.05
done; wait; echo "ROUNDS $i"`

func startNamespaceProbe(t *testing.T, ctx context.Context, l *lab.Lab, from isoContainer, targetNS string) *namespaceProbe {
	p := &namespaceProbe{l: l, from: from, stop: "/tmp/probe-stop-" + from.id[:12], done: make(chan string, 1)}
	args := append([]string{"sh", "-c", fmt.Sprintf(probeScript, rpc.LabelNamespace), "probe", targetNS, p.stop}, netnsOf(t, ctx, l, from)...)
	go func() {
		out, err := l.Exec(ctx, from.machine, args...)
		if err != nil {
			out += "\nERROR " + err.Error()
		}
		p.done <- out
	}()
	return p
}

// end stops the probe and returns the connections it made and every
// address it aimed at.
func (p *namespaceProbe) end(t *testing.T) (hits []string, seen map[string]bool) {
	t.Helper()
	if _, err := p.l.Exec(context.Background(), p.from.machine, "touch", p.stop); err != nil {
		t.Fatal(err)
	}
	out := <-p.done
	seen = map[string]bool{}
	rounds := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "IPS":
			for _, ip := range f[1:] {
				seen[ip] = true
			}
		case len(f) > 0 && f[0] == "HIT":
			hits = append(hits, line)
		case len(f) > 0 && (f[0] == "ROUNDS" || f[0] == "ERROR"):
			rounds = line
		}
	}
	t.Logf("namespace probe from %s: %s, aimed at %v, %d connections", p.from.ns, rounds, seen, len(hits))
	if !strings.HasPrefix(rounds, "ROUNDS") {
		t.Errorf("probe did not finish: %q", rounds)
	}
	return hits, seen
}

// refusedOnce dials addr once from c and returns the error that kept it
// from connecting (nil: it connected). An address is dialled with curl in
// c's network namespace (2 s: a dropped SYN is not waited on for the
// testapp's 5 s); a name goes through dial, inside the Container, which
// resolves it with the Container's own resolver. Either way the dial must
// have been made: a Container gone since its lookup fails the test rather
// than refusing anything.
func refusedOnce(t *testing.T, ctx context.Context, l *lab.Lab, c isoContainer, addr string, dial func(isoContainer, string) error) error {
	t.Helper()
	if _, err := netip.ParseAddrPort(addr); err != nil {
		err := dial(c, addr)
		if err != nil && (strings.Contains(err.Error(), "No such container") || strings.Contains(err.Error(), "is not running")) {
			t.Fatalf("%s web (on %s) could not dial %s: %v", c.ns, c.machine, addr, err)
		}
		return err
	}
	cmd := strings.Join(netnsOf(t, ctx, l, c), " ") + " curl -s -o /dev/null -m 2 http://" + addr + "/; echo rc=$?"
	out, err := l.Exec(ctx, c.machine, "sh", "-c", cmd)
	switch rc := strings.TrimSpace(out[strings.LastIndex(out, "rc=")+3:]); {
	case err != nil || !strings.Contains(out, "rc="):
		t.Fatalf("dial %s from %s's network namespace: %q, %v", addr, c.id, out, err)
	case rc == "0":
		return nil
	case rc == "28" || rc == "7": // timed out (dropped) or refused
		return fmt.Errorf("curl exit %s", rc)
	default:
		t.Fatalf("dial %s from %s's network namespace: curl exit %s", addr, c.id, rc)
	}
	return nil
}
