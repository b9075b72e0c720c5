package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

const smokeCompose = `name: smoke
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "smoke-ok"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
    x-ports:
      - hostname: smoke.example.test
        container_port: 8080
`

// TestSmokeDebian12 runs the oldest supported Machine OS (Debian 12 with
// its Docker 20.10) through the user's path once: init, add, deploy, a
// Service name in Internal DNS, and a request through ingress. The full
// suite runs on lab.DefaultOS; this keeps the other end of the support
// matrix honest on every `make test`.
func TestSmokeDebian12(t *testing.T) {
	needLightLab(t)
	l := lab.ForTestOS(t, 2, lab.Debian12)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	for _, m := range l.Machines {
		v, err := l.Exec(ctx, m.Name, "docker", "version", "--format", "{{.Server.Version}} {{.Server.APIVersion}}")
		if err != nil || !strings.HasPrefix(v, "20.10.") {
			t.Fatalf("%s: docker %q, %v; want Debian 12's 20.10", m.Name, v, err)
		}
	}

	// init and add report the Docker they checked.
	var in rpc.Inspection
	gws := map[string]string{}
	for i, m := range l.Machines {
		verb := "add"
		if i == 0 {
			verb = "init"
		}
		out, errs, code := op.run(t, "machine", verb, "root@"+m.IP.String(), "--name", m.Name, "--json")
		if code != 0 {
			t.Fatalf("machine %s %s: exit %d\n%s%s", verb, m.Name, code, out, errs)
		}
		if !strings.Contains(errs, "docker 20.10.") {
			t.Errorf("machine %s %s does not say which Docker it found:\n%s", verb, m.Name, errs)
		}
		if err := json.Unmarshal([]byte(out), &in); err != nil {
			t.Fatalf("machine %s: %v: %q", verb, err, out)
		}
		p, err := netip.ParsePrefix(in.Subnet)
		if err != nil {
			t.Fatalf("%s subnet %q: %v", m.Name, in.Subnet, err)
		}
		gws[m.Name] = p.Masked().Addr().Next().String()
	}
	for _, m := range l.Machines {
		for _, unit := range []string{"ployz-plugin@dns.service", "ployz-plugin@ingress-caddy.service"} {
			eventually(t, 60*time.Second, m.Name+" "+unit+" active", func() error {
				out, err := l.Exec(ctx, m.Name, "systemctl", "is-active", unit)
				if err != nil || out != "active" {
					return fmt.Errorf("%s %q: %v", unit, out, err)
				}
				return nil
			})
		}
	}

	doc, errs, code := deployFile(t, op, smokeCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	var ips []string
	for _, c := range ps(t, op, "smoke").Containers {
		if c.Service == "web" && c.Ready {
			ip, err := l.Exec(ctx, c.Machine, "docker", "inspect", "-f", "{{.NetworkSettings.Networks.ployz.IPAddress}}", c.ID)
			if err != nil {
				t.Fatal(err)
			}
			ips = append(ips, ip)
		}
	}
	if len(ips) != 2 {
		t.Fatalf("web ready with addresses %v, want one on each Machine", ips)
	}
	slices.Sort(ips)

	t.Run("dns", func(t *testing.T) {
		name := "web." + doc.Plan.Namespace + ".internal"
		eventually(t, 60*time.Second, name+" from m1", func() error {
			rc, got, err := lookupFrom(ctx, l, "m1", gws["m1"]+":53", name)
			if err != nil {
				return err
			}
			slices.Sort(got)
			if rc != "NOERROR" || !slices.Equal(got, ips) {
				return fmt.Errorf("%s %v, want %v", rc, got, ips)
			}
			return nil
		})
	})

	t.Run("ingress", func(t *testing.T) {
		for _, m := range l.Machines {
			eventually(t, 60*time.Second, "smoke.example.test through "+m.Name, func() error {
				status, body, err := hostGet(m.IP.String(), "smoke.example.test", "/")
				if err != nil {
					return err
				}
				if status != 200 || !strings.Contains(body, "smoke-ok") {
					return fmt.Errorf("%d %q", status, body)
				}
				return nil
			})
		}
	})

	// The DNS process parks its port-53 socket in systemd's fd store; the
	// same socket (same inode) after a restart shows this systemd keeps it.
	// Docker 28's raw-table drops on Debian 12's iptables and Docker 20.10
	// (which also created the network with trusted_host_interfaces).
	t.Run("docker28-direct-routing", func(t *testing.T) {
		webOn := map[string]string{}
		for _, c := range ps(t, op, "smoke").Containers {
			if c.Service == "web" && c.Ready {
				webOn[c.Machine] = c.ID[:12]
			}
		}
		docker28Rules(t, ctx, l, webOn)
	})

	t.Run("fdstore", func(t *testing.T) {
		ino := func() (string, error) {
			out, err := l.Exec(ctx, "m1", "ss", "-Hlune", "src", gws["m1"]+":53")
			if err != nil {
				return "", err
			}
			for _, f := range strings.Fields(out) {
				if strings.HasPrefix(f, "ino:") {
					return f, nil
				}
			}
			return "", fmt.Errorf("no UDP socket on %s:53: %q", gws["m1"], out)
		}
		before, err := ino()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Exec(ctx, "m1", "systemctl", "restart", "ployz-plugin@dns.service"); err != nil {
			t.Fatal(err)
		}
		after, err := ino()
		if err != nil || after != before {
			t.Fatalf("port-53 socket %s before the restart, %s after (%v): not kept in the fd store", before, after, err)
		}
	})
}
