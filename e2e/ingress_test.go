package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/sdk/ingress"
)

const ingressCompose = `name: hello
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "through-ingress"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
    x-ports:
      - hostname: hello.example.test
        container_port: 8080
`

// oneShot sends one request with Host host to ip:80 through c and reads
// the answer, the way a counting loop must: the request is a POST whose
// body cannot be rewound, so net/http never resends it on a dropped
// keep-alive connection (it silently retries a GET, or any request it
// could replay). Keep-alive stays on: connections that outlive a proxy
// restart are part of what the loops test.
func oneShot(c *http.Client, ip, host, path string) (int, string, error) {
	return oneShotURL(c, "http://"+ip+path, host)
}

// oneShotURL is oneShot for any URL (an https one too).
func oneShotURL(c *http.Client, url, host string) (int, string, error) {
	var reused, answered bool
	trace := &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { reused = i.Reused },
		GotFirstResponseByte: func() { answered = true },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", url, strings.NewReader("one shot"))
	if err != nil {
		return 0, "", err
	}
	req.GetBody = nil // not replayable: a failure is the caller's to count
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		if reused && !answered {
			err = fmt.Errorf("%w: %w", errIdleClosed, err)
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(b), fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// errIdleClosed marks a request sent on a reused keep-alive connection
// that the proxy closed without answering a byte: the request was never
// processed (the case net/http itself retries for idempotent requests).
// Ingress config reloads close idle connections this way (issue #15).
var errIdleClosed = errors.New("keep-alive connection closed before any answer")

// hostGet sends GET path with Host host to ip:80 from the test host.
func hostGet(ip, host, path string) (int, string, error) {
	req, err := http.NewRequest("GET", "http://"+ip+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestIngressHTTP deploys a Service with an x-ports hostname on three
// Machines (two run it) and reaches it by hostname through every
// Machine's :80, including the Machine without a web Container (the
// request crosses the mesh); /.ployz-verify answers a nonce keyed by each
// Machine's id without naming it, and
// `service inspect` reports ingress published on every Machine apart from
// execution status.
func TestIngressHTTP(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	ids := map[string]string{} // lab IP -> Machine id
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", l.Machines[0].Name)
	ids[l.Machines[0].IP.String()] = in.ID
	m1Subnet := in.Subnet
	for _, m := range l.Machines[1:] {
		op.json(t, &in, "machine", "add", "root@"+m.IP.String(), "--name", m.Name)
		ids[m.IP.String()] = in.ID
	}
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" ingress unit active", func() error {
			out, err := l.Exec(ctx, m.Name, "systemctl", "is-active", "ployz-plugin@ingress-caddy.service")
			if err != nil || out != "active" {
				return fmt.Errorf("ployz-plugin@ingress-caddy.service %q: %v", out, err)
			}
			return nil
		})
	}

	start := time.Now()
	doc, errs, code := deployFile(t, op, ingressCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	webOn := map[string]string{} // Machine name -> its web Container's hostname (short id)
	for _, c := range ps(t, op, "hello").Containers {
		if c.Service == "web" && c.Ready {
			webOn[c.Machine] = c.ID[:12]
		}
	}
	if len(webOn) != 2 {
		t.Fatalf("web ready on %v, want 2 Machines", webOn)
	}

	var insp struct {
		Execution struct {
			Status string `json:"status"`
		} `json:"execution"`
		Ingress struct {
			Status   string `json:"status"`
			Machines []struct {
				Machine string          `json:"machine"`
				Routes  []ingress.Route `json:"routes"`
				Error   string          `json:"error"`
			} `json:"machines"`
		} `json:"ingress"`
	}
	eventually(t, 30*time.Second, "service inspect reports ingress published", func() error {
		out := op.must(t, "service", "inspect", "web", "-p", "hello", "--json")
		if err := json.Unmarshal([]byte(out), &insp); err != nil {
			return err
		}
		if insp.Ingress.Status != ingress.RoutePublished || insp.Execution.Status != "ready" || len(insp.Ingress.Machines) != 3 {
			return fmt.Errorf("execution %s, ingress %s: %s", insp.Execution.Status, insp.Ingress.Status, out)
		}
		// Execution is ready from live Docker; each proxy routes from the
		// store's rows, which follow each Machine's observation.
		for _, m := range insp.Ingress.Machines {
			if len(m.Routes) != 1 || len(m.Routes[0].Upstreams) != 2 {
				return fmt.Errorf("%s has not loaded both web Containers yet: %+v", m.Machine, m.Routes)
			}
		}
		return nil
	})
	t.Logf("every proxy routes to both web Containers %s after the deploy started", time.Since(start).Round(100*time.Millisecond))
	for _, m := range insp.Ingress.Machines {
		if len(m.Routes) != 1 || m.Routes[0].State != ingress.RoutePublished || len(m.Routes[0].Upstreams) != 2 || m.Routes[0].Owner != "hello-prod/web" && !strings.HasSuffix(m.Routes[0].Owner, "/web") {
			t.Errorf("%s routes %+v", m.Machine, m.Routes)
		}
	}

	for _, m := range l.Machines {
		ip := m.IP.String()
		eventually(t, 60*time.Second, "hello.example.test through "+m.Name, func() error {
			code, body, err := hostGet(ip, "hello.example.test", "/")
			if err != nil {
				return err
			}
			if code != 200 || !strings.Contains(body, `"message":"through-ingress"`) {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		t.Logf("%s (web here: %t): 200 from web, %s after the deploy started", m.Name, webOn[m.Name] != "", time.Since(start).Round(100*time.Millisecond))
		// Local Containers first: a Machine running web answers from its own.
		if local := webOn[m.Name]; local != "" {
			for i := 0; i < 5; i++ {
				if _, body, err := hostGet(ip, "hello.example.test", "/"); err != nil || !strings.Contains(body, `"hostname":"`+local+`"`) {
					t.Errorf("%s: answered by %s %v, want its local Container %s", m.Name, body, err, local)
				}
			}
		}
		code, body, err := hostGet(ip, "anything.example", "/.ployz-verify?n=e2e-"+m.Name)
		if want := ingress.VerifyAnswer(ids[ip], "e2e-"+m.Name); err != nil || code != 200 || strings.TrimSpace(body) != want || strings.Contains(body, ids[ip]) {
			t.Errorf("%s /.ployz-verify: %d %q %v, want %s (keyed by %s, not naming it)", m.Name, code, body, err, want, ids[ip])
		}
		if code, _, _ := hostGet(ip, "unknown.example.test", "/"); code != 404 {
			t.Errorf("%s unknown host: %d, want 404", m.Name, code)
		}
	}

	// Docker 28's raw-table drops on every Machine: the mesh still works.
	t.Run("docker28-direct-routing", func(t *testing.T) { docker28Rules(t, ctx, l, webOn) })

	out := op.must(t, "ingress", "config")
	if strings.Count(out, "hello.example.test") != 3 || strings.Count(out, "published") != 3 {
		t.Errorf("ingress config:\n%s", out)
	}
	t.Logf("ingress config:\n%s", out)
	// The text form keeps the two statuses on their own lines.
	// An ingress plugin that restarts (it does once after its first
	// configuration) withdraws its capability until ployzd reattaches it:
	// meanwhile inspect says "unknown" with that reason, so it is asked
	// again for a few seconds.
	var text string
	eventually(t, 20*time.Second, "service inspect shows web ready and published", func() error {
		text = op.must(t, "service", "inspect", "web", "-p", "hello")
		if !regexp.MustCompile(`(?m)^execution\s+ready \(`).MatchString(text) || !regexp.MustCompile(`(?m)^ingress\s+published$`).MatchString(text) {
			t.Logf("service inspect (asking again):\n%s", text)
			return fmt.Errorf("not ready and published yet")
		}
		return nil
	})
	t.Logf("service inspect:\n%s", text)

	// The proxy outlives the daemon: with ployzd stopped on m3 (no store
	// API there either way) m3 keeps routing, and ployzd's return does not
	// restart the proxy.
	m3 := l.Machines[2]
	pid := func() string {
		out, err := l.Exec(ctx, m3.Name, "systemctl", "show", "-p", "MainPID", "--value", "ployz-plugin@ingress-caddy.service")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := pid()
	if _, err := l.Exec(ctx, m3.Name, "systemctl", "stop", "ployz.service"); err != nil {
		t.Fatal(err)
	}
	ok, failed := 0, 0
	var fails []string
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	for i := 0; i < 20; i++ {
		if code, body, err := oneShot(c, m3.IP.String(), "hello.example.test", "/"); err == nil && code == 200 {
			ok++
		} else {
			failed++
			fails = append(fails, fmt.Sprintf("%d %q %v", code, body, err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.CloseIdleConnections()
	if _, err := l.Exec(ctx, m3.Name, "systemctl", "start", "ployz.service"); err != nil {
		t.Fatal(err)
	}
	t.Logf("through m3 with ployzd stopped: %d ok, %d failed", ok, failed)
	if failed != 0 {
		t.Errorf("ingress on m3 failed %d of 20 requests while ployzd was stopped: %v", failed, fails)
	}
	eventually(t, 30*time.Second, "m3 answers after ployzd's return", func() error {
		if code, _, err := hostGet(m3.IP.String(), "hello.example.test", "/"); err != nil || code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	if after := pid(); after != before {
		t.Errorf("ployz-plugin@ingress-caddy.service restarted with ployzd: pid %s -> %s", before, after)
	}

	// Plain TCP ingress routes (x-ports ingress_port): ingress_tcp_test.go.
	t.Run("tcp-route", func(t *testing.T) { ingressTCP(t, ctx, l, op) })
	// Ingress off one Machine, and one hostname split by path between two
	// Services: ingress_routes_test.go.
	t.Run("acceptance-and-paths", func(t *testing.T) { ingressAcceptanceAndPaths(t, ctx, l, op) })

	ingressZeroGap(t, ctx, l, op)
	ingressConflict(t, ctx, l, op)
	// Last: they cut m2 off, then power it off, and bring it back; then
	// m2 is powered off and forgotten for good.
	for _, how := range []machineCut{partition, powerCut} {
		t.Run("machine-loss-"+how.name, func(t *testing.T) { machineLoss(t, ctx, l, op, ids, gateway(t, m1Subnet), how) })
	}
	t.Run("machine-forget", func(t *testing.T) { machineForget(t, ctx, l, op, ids) })
}
