package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/sdk/ingress"
)

// tcpIngressCompose publishes testapp's HTTP port as the plain TCP
// ingress port 8081 of every Machine; one replica, so two of the three
// Machines reach it across the mesh.
const tcpIngressCompose = `name: tcpecho
services:
  echo:
    image: ployz-testapp:latest
    environment: {MESSAGE: "through-tcp-ingress"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: REPLICAS}
    x-ports:
      - ingress_port: 8081
        container_port: 8080
        protocol: tcp
`

// rawGet sends a plain HTTP/1.0 GET over a raw TCP connection to addr
// (the proxy only moves bytes) and returns what came back.
func rawGet(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: anything\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// ingressTCP deploys a Service with an x-ports ingress_port (a tcp route)
// into the running lab and reaches it through port 8081 of every
// Machine, including the two without its Container; `service inspect`
// and `ingress config` show the route as tcp/8081; with the Service at
// zero replicas no Machine listens on 8081 any more.
func ingressTCP(t *testing.T, ctx context.Context, l *lab.Lab, op *operator) {
	compose := func(replicas int) string {
		return strings.Replace(tcpIngressCompose, "REPLICAS", fmt.Sprint(replicas), 1)
	}
	start := time.Now()
	doc, errs, code := deployFile(t, op, compose(1))
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy tcpecho: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	var echo, on string
	for _, c := range ps(t, op, "tcpecho").Containers {
		if c.Service == "echo" && c.Ready {
			echo, on = c.ID[:12], c.Machine
		}
	}
	if echo == "" {
		t.Fatal("no ready echo Container")
	}
	for _, m := range l.Machines {
		addr := net.JoinHostPort(m.IP.String(), "8081")
		eventually(t, 60*time.Second, "tcp/8081 through "+m.Name, func() error {
			out, err := rawGet(addr)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(out, "HTTP/1.0 200") || !strings.Contains(out, `"message":"through-tcp-ingress"`) ||
				!strings.Contains(out, `"hostname":"`+echo+`"`) {
				return fmt.Errorf("answer %q", out)
			}
			return nil
		})
		t.Logf("%s (echo here: %t): raw TCP GET through :8081 answered, %s after the deploy started",
			m.Name, m.Name == on, time.Since(start).Round(100*time.Millisecond))
	}

	var insp struct {
		Ingress struct {
			Status string `json:"status"`
			Routes []struct {
				Protocol      string `json:"protocol"`
				Port          int    `json:"port"`
				ContainerPort int    `json:"container_port"`
			} `json:"routes"`
			Machines []struct {
				Machine string          `json:"machine"`
				Routes  []ingress.Route `json:"routes"`
			} `json:"machines"`
		} `json:"ingress"`
	}
	eventually(t, 30*time.Second, "service inspect reports tcp/8081 published", func() error {
		out := op.must(t, "service", "inspect", "echo", "-p", "tcpecho", "--json")
		if err := json.Unmarshal([]byte(out), &insp); err != nil {
			return err
		}
		in := insp.Ingress
		if in.Status != ingress.RoutePublished || len(in.Routes) != 1 || in.Routes[0].Protocol != "tcp" ||
			in.Routes[0].Port != 8081 || in.Routes[0].ContainerPort != 8080 || len(in.Machines) != 3 {
			return fmt.Errorf("ingress %s: %s", in.Status, out)
		}
		for _, m := range in.Machines {
			if len(m.Routes) != 1 || m.Routes[0].Key() != "tcp/8081" || m.Routes[0].State != ingress.RoutePublished ||
				!strings.HasSuffix(m.Routes[0].Owner, "/echo") {
				return fmt.Errorf("%s routes %+v", m.Machine, m.Routes)
			}
		}
		return nil
	})
	text := op.must(t, "service", "inspect", "echo", "-p", "tcpecho")
	if !strings.Contains(text, "tcp/8081 -> :8080") {
		t.Errorf("service inspect:\n%s", text)
	}
	t.Logf("service inspect:\n%s", text)
	out := op.must(t, "ingress", "config")
	if strings.Count(out, "tcp/8081") != 3 {
		t.Errorf("ingress config shows tcp/8081 %d times, want 3:\n%s", strings.Count(out, "tcp/8081"), out)
	}
	t.Logf("ingress config:\n%s", out)

	// Zero replicas: the route has no claimant left, no Machine listens.
	doc, errs, code = deployFile(t, op, compose(0))
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy tcpecho at 0 replicas: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	for _, m := range l.Machines {
		addr := net.JoinHostPort(m.IP.String(), "8081")
		eventually(t, 60*time.Second, m.Name+" stops listening on :8081", func() error {
			out, err := rawGet(addr)
			if errors.Is(err, syscall.ECONNREFUSED) {
				return nil
			}
			return fmt.Errorf("still answered: %q %v", out, err)
		})
	}
}
