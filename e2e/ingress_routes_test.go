package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/e2e/lab"
)

// pathsCompose splits one hostname between two Services by path, the api
// stripping its prefix, and gives the api a wildcard hostname too.
const pathsCompose = `name: paths
services:
  site:
    image: ployz-testapp:latest
    environment: {MESSAGE: "site"}
    x-ports:
      - hostname: paths.example.test
        container_port: 8080
  api:
    image: ployz-testapp:latest
    environment: {MESSAGE: "api"}
    x-ports:
      - hostname: paths.example.test
        path: /api
        strip_prefix: true
        container_port: 8080
      - hostname: "*.paths.example.test"
        container_port: 8080
`

// curlHost runs curl on the test host (outside the Cluster) for
// http://ip/path with Host host and returns the status and the body.
func curlHost(ctx context.Context, ip, host, path string) (int, string, error) {
	out, err := exec.CommandContext(ctx, "curl", "-sS", "--max-time", "5", "-H", "Host: "+host, "-w", "\n%{http_code}", "http://"+ip+path).Output()
	if err != nil {
		return 0, "", fmt.Errorf("curl %s%s via %s: %w", host, path, ip, err)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	var code int
	fmt.Sscan(s[i+1:], &code)
	return code, s[:i], nil
}

// ingressAcceptanceAndPaths takes ingress off m3 (`machine update
// --accepts services,builds`): nothing listens on its 80 or 443, the
// others keep serving, `ingress dns` points the hostnames at m1 and m2
// only, and a Deploy completes without m3's ack. That Deploy splits
// paths.example.test between two Services by path, checked with curl from
// the test host through every Machine running ingress; with ingress back
// on m3 the same requests through it get the same answers.
func ingressAcceptanceAndPaths(t *testing.T, ctx context.Context, l *lab.Lab, op *operator) {
	m3 := l.Machines[2]
	start := time.Now()
	op.must(t, "machine", "update", m3.Name, "--accepts", "services,builds")
	eventually(t, 60*time.Second, m3.Name+" stops listening on 80 and 443", func() error {
		out, err := l.Exec(ctx, m3.Name, "ss", "-Hltn", "( sport = :80 or sport = :443 )")
		if err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("listening: %q %v", out, err)
		}
		return nil
	})
	t.Logf("%s listens on neither 80 nor 443 %s after ingress was taken off it", m3.Name, time.Since(start).Round(100*time.Millisecond))
	if code, _, err := curlHost(ctx, m3.IP.String(), "hello.example.test", "/"); err == nil {
		t.Errorf("%s without ingress answered %d", m3.Name, code)
	}
	for _, m := range l.Machines[:2] {
		if code, body, err := curlHost(ctx, m.IP.String(), "hello.example.test", "/"); err != nil || code != 200 || !strings.Contains(body, "through-ingress") {
			t.Errorf("%s with ingress: %d %q %v", m.Name, code, body, err)
		}
	}
	if out := op.must(t, "ingress", "config", "--machine", m3.Name); !strings.Contains(out, "does not accept ingress") {
		t.Errorf("ingress config of %s:\n%s", m3.Name, out)
	}

	deployed := time.Now()
	doc, errs, code := deployFile(t, op, pathsCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy paths with ingress off %s (its ack is not waited for): exit %d, outcome %+v\n%s", m3.Name, code, doc.Outcome, errs)
	}
	t.Logf("paths deployed, acked by the ingress Machines only, in %s", time.Since(deployed).Round(100*time.Millisecond))
	checkPaths(t, ctx, l.Machines[:2])

	var dns client.IngressDNS
	op.json(t, &dns, "ingress", "dns")
	pointed := map[string][]string{}
	for _, r := range dns.Records {
		pointed[r.Name] = append(pointed[r.Name], r.Machine)
	}
	for _, h := range []string{"hello.example.test", "paths.example.test", "*.paths.example.test"} {
		if ms := pointed[h]; !slices.Contains(ms, "m1") || !slices.Contains(ms, "m2") || slices.Contains(ms, m3.Name) {
			t.Errorf("ingress dns points %s at %v, want m1 and m2", h, ms)
		}
	}
	t.Logf("ingress dns:\n%s", op.must(t, "ingress", "dns"))
	var insp struct {
		Ingress client.IngressStatus `json:"ingress"`
	}
	raw := op.must(t, "service", "inspect", "api", "-p", "paths", "--json")
	if err := json.Unmarshal([]byte(raw), &insp); err != nil || insp.Ingress.Status != "published" {
		t.Errorf("service inspect api with %s off: %s %v", m3.Name, raw, err)
	}

	op.must(t, "machine", "update", m3.Name, "--accepts", "services,ingress,builds")
	eventually(t, 90*time.Second, m3.Name+" serves ingress again", func() error {
		code, body, err := curlHost(ctx, m3.IP.String(), "paths.example.test", "/api/x")
		if err != nil || code != 200 || !strings.Contains(body, `"message":"api"`) {
			return fmt.Errorf("%d %q %v", code, body, err)
		}
		return nil
	})
	checkPaths(t, ctx, l.Machines)
	// m3 proxies before its daemon's catalog lists the ingress capability
	// again (ingress config says "not served right now" until then).
	eventually(t, 30*time.Second, "ingress config shows the /api route on every Machine", func() error {
		if out := op.must(t, "ingress", "config"); strings.Count(out, "paths.example.test/api (strip prefix)") != 3 {
			return fmt.Errorf("ingress config:\n%s", out)
		}
		return nil
	})
	if _, errs, code := op.run(t, "project", "rm", "paths", "-y"); code != 0 {
		t.Fatalf("project rm paths: exit %d\n%s", code, errs)
	}
}

// checkPaths curls each path of paths.example.test through every Machine
// in ms and checks which Service answered and which path it saw.
func checkPaths(t *testing.T, ctx context.Context, ms []*lab.Machine) {
	t.Helper()
	for _, m := range ms {
		for _, c := range []struct{ host, path, message, seen string }{
			{"paths.example.test", "/", "site", "/"},
			{"paths.example.test", "/apis", "site", "/apis"},
			{"paths.example.test", "/api", "api", "/"},
			{"paths.example.test", "/api/users/7", "api", "/users/7"},
			{"any.paths.example.test", "/x", "api", "/x"},
		} {
			eventually(t, 60*time.Second, c.host+c.path+" through "+m.Name, func() error {
				code, body, err := curlHost(ctx, m.IP.String(), c.host, c.path)
				if err != nil || code != 200 || !strings.Contains(body, `"message":"`+c.message+`"`) || !strings.Contains(body, `"path":"`+c.seen+`"`) {
					return fmt.Errorf("%d %q %v, want %s seeing %s", code, body, err, c.message, c.seen)
				}
				return nil
			})
		}
	}
}
