package client

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestServiceIngressTCP: a Service's tcp route is matched by its key
// "tcp/PORT" in each Machine's loaded routes; where it is not loaded the
// pending entry still carries protocol and port (--json).
func TestServiceIngressTCP(t *testing.T) {
	tcp := rpc.IngressState{Protocol: "tcp", Port: 8081, Owner: "d/db", State: rpc.RoutePublished, Upstreams: []string{"10.0.0.1:5432"}}
	web := rpc.IngressState{Hostname: "a.example.test", Owner: "d/db", State: rpc.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}
	ms := []MachineIngress{
		{Machine: "m1", Status: &rpc.IngressStatus{Running: true, Routes: []rpc.IngressState{web, tcp}}},
		{Machine: "m2", Status: &rpc.IngressStatus{Running: true, Routes: []rpc.IngressState{web}}},
	}
	keys := []string{"a.example.test", "tcp/8081"}
	if got, _ := ServiceIngress("d/db", keys, ms[:1]); got != rpc.RoutePublished {
		t.Errorf("published on m1: %s", got)
	}
	got, per := ServiceIngress("d/db", keys, ms)
	if got != rpc.RoutePending || len(per) != 2 || len(per[1].Routes) != 2 {
		t.Fatalf("%s %+v", got, per)
	}
	if r := per[0].Routes[1]; r.Key() != "tcp/8081" || r.State != rpc.RoutePublished {
		t.Errorf("m1 %+v", r)
	}
	r := per[1].Routes[1]
	if r.Key() != "tcp/8081" || r.State != rpc.RoutePending || r.Hostname != "" {
		t.Errorf("m2 %+v", r)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"protocol":"tcp","port":8081`) {
		t.Errorf("json %s", b)
	}
	if got, _ := ServiceIngress("d/db", keys, []MachineIngress{{Machine: "m1", Status: &rpc.IngressStatus{}}}); got != rpc.RoutePending {
		t.Errorf("proxy not running: %s", got)
	}
	if k := routeOfKey("tcp/x").Key(); k != "tcp/x" {
		t.Errorf("a hostname-like key %q", k)
	}
}
