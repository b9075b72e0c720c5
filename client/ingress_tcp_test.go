package client

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
)

// TestServiceIngressTCP: a Service's tcp route is matched by its key
// "tcp/PORT" in each Machine's loaded routes; where it is not loaded the
// pending entry still carries protocol and port (--json).
func TestServiceIngressTCP(t *testing.T) {
	tcp := ingress.Route{Protocol: "tcp", Port: 8081, Owner: "d/db", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.1:5432"}}
	web := ingress.Route{Hostname: "a.example.test", Owner: "d/db", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}
	ms := []MachineIngress{
		{Machine: "m1", Status: &ingress.Status{Running: true, Routes: []ingress.Route{web, tcp}}},
		{Machine: "m2", Status: &ingress.Status{Running: true, Routes: []ingress.Route{web}}},
	}
	keys := []string{"a.example.test", "tcp/8081"}
	if got, _ := ServiceIngress("d/db", keys, ms[:1]); got != ingress.RoutePublished {
		t.Errorf("published on m1: %s", got)
	}
	got, per := ServiceIngress("d/db", keys, ms)
	if got != ingress.RoutePending || len(per) != 2 || len(per[1].Routes) != 2 {
		t.Fatalf("%s %+v", got, per)
	}
	if r := per[0].Routes[1]; r.Key() != "tcp/8081" || r.State != ingress.RoutePublished {
		t.Errorf("m1 %+v", r)
	}
	r := per[1].Routes[1]
	if r.Key() != "tcp/8081" || r.State != ingress.RoutePending || r.Hostname != "" {
		t.Errorf("m2 %+v", r)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"protocol":"tcp","port":8081`) {
		t.Errorf("json %s", b)
	}
	if got, _ := ServiceIngress("d/db", keys, []MachineIngress{{Machine: "m1", Status: &ingress.Status{}}}); got != ingress.RoutePending {
		t.Errorf("proxy not running: %s", got)
	}
	if k := routeOfKey("tcp/x").Key(); k != "tcp/x" {
		t.Errorf("a hostname-like key %q", k)
	}
}
