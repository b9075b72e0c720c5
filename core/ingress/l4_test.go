package ingress

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// layer4Of decodes a Caddy config and returns its layer4 servers (nil
// when the config has no layer4 app) and the http app's JSON.
func layer4Of(t *testing.T, cfg []byte) (map[string]any, string) {
	t.Helper()
	var c struct {
		Apps struct {
			HTTP   json.RawMessage `json:"http"`
			Layer4 *struct {
				Servers map[string]any `json:"servers"`
			} `json:"layer4"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	if c.Apps.Layer4 == nil {
		return nil, string(c.Apps.HTTP)
	}
	return c.Apps.Layer4.Servers, string(c.Apps.HTTP)
}

// TestLayer4Config: a tcp route with an owner and upstreams is one
// layer4 server on its port (the HTTP listen address's host), proxying to
// its upstreams in order, one upstream per address, first available; a
// pending route and an ownerless conflict get no listener; tcp routes
// never reach the http app; with no tcp listener there is no layer4 app.
func TestLayer4Config(t *testing.T) {
	routes := []Route{
		{Hostname: "a.example.test", Owner: "demo/a", State: rpc.RoutePublished, Upstreams: []string{"10.0.0.2:80"}},
		{Protocol: "tcp", Port: 8081, Owner: "demo/db", State: rpc.RoutePublished, Upstreams: []string{"10.0.0.9:5432", "10.0.0.1:5432"}},
		{Protocol: "tcp", Port: 9000, Owner: "demo/pending", State: rpc.RoutePending},
		{Protocol: "tcp", Port: 9001, State: rpc.RouteConflict, Claimants: []string{"a/x", "b/y"}},
		{Protocol: "tcp", Port: 9002, Owner: "demo/kept", State: rpc.RouteConflict, Claimants: []string{"demo/kept", "z/z"}, Upstreams: []string{"10.0.0.3:22"}},
	}
	for listen, host := range map[string]string{":80": "", "127.0.0.1:18080": "127.0.0.1", "[::1]:80": "[::1]"} {
		cfg, err := CaddyConfig(listen, "m1", "/tmp/x", routes)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := CaddyConfig(listen, "m1", "/tmp/x", routes)
		if string(cfg) != string(again) {
			t.Fatal("config not deterministic")
		}
		servers, httpApp := layer4Of(t, cfg)
		want := map[string]any{}
		if err := json.Unmarshal([]byte(`{
			"tcp_8081": {"listen": ["`+host+`:8081"], "routes": [{"handle": [{"handler": "proxy",
				"upstreams": [{"dial": ["10.0.0.9:5432"]}, {"dial": ["10.0.0.1:5432"]}],
				"load_balancing": {"selection": {"policy": "first"}}}]}]},
			"tcp_9002": {"listen": ["`+host+`:9002"], "routes": [{"handle": [{"handler": "proxy",
				"upstreams": [{"dial": ["10.0.0.3:22"]}],
				"load_balancing": {"selection": {"policy": "first"}}}]}]}
		}`), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(servers, want) {
			got, _ := json.Marshal(servers)
			t.Errorf("listen %s: layer4 servers\n%s", listen, got)
		}
		if strings.Contains(httpApp, "5432") || strings.Contains(httpApp, "9000") || !strings.Contains(httpApp, "a.example.test") {
			t.Errorf("http app carries tcp routes or lost the hostname: %s", httpApp)
		}
	}
	cfg, _ := CaddyConfig(":80", "m1", "/tmp/x", []Route{routes[0], routes[2], routes[3]})
	if strings.Contains(string(cfg), "layer4") {
		t.Errorf("no tcp listener, yet a layer4 app: %s", cfg)
	}
	// HTTPS keeps the layer4 app.
	tlsCfg, err := CaddyConfigTLS(":80", "m1", "/tmp/x", routes, TLS{Listen: ":443"})
	if err != nil {
		t.Fatal(err)
	}
	if servers, _ := layer4Of(t, tlsCfg); len(servers) != 2 {
		t.Errorf("CaddyConfigTLS dropped the layer4 servers: %s", tlsCfg)
	}
}

// TestComputeTCPRoutes: tcp rows become "tcp/PORT" routes whose
// upstreams are ip:container_port, local first; a pending one says it has
// no listener; a row claiming a port Ployz uses is skipped with the field.
func TestComputeTCPRoutes(t *testing.T) {
	db := store.IngressRoute{Protocol: "tcp", Port: 8081, ContainerPort: 5432}
	rows := []store.Row[store.ContainerBody]{
		row("a", "m2", "demo", "db", "10.210.2.5", true, db),
		row("b", "m1", "demo", "db", "10.210.1.9", true, db, hello(8080)),
		row("c", "m1", "demo", "cache", "10.210.1.7", false, store.IngressRoute{Protocol: "tcp", Port: 6379, ContainerPort: 6379}),
		row("d", "m1", "demo", "evil", "10.210.1.8", true, store.IngressRoute{Protocol: "tcp", Port: 443, ContainerPort: 443}),
	}
	got := Compute(Input{Containers: rows, Machine: "m1"})
	keys := []string{}
	for _, r := range got.Routes {
		keys = append(keys, r.Key())
	}
	if strings.Join(keys, " ") != "hello.example.test tcp/6379 tcp/8081" {
		t.Fatalf("routes %v", keys)
	}
	if r := got.Routes[2]; r.Owner != "demo/db" || r.State != rpc.RoutePublished || strings.Join(r.Upstreams, ",") != "10.210.1.9:5432,10.210.2.5:5432" {
		t.Errorf("tcp/8081 %+v", r)
	}
	if r := got.Routes[1]; r.State != rpc.RoutePending || !strings.Contains(r.Detail, "no listener") {
		t.Errorf("tcp/6379 %+v", r)
	}
	if len(got.Skipped) != 1 || got.Skipped[0].Container != "d" || !strings.Contains(got.Skipped[0].Reason, `field "ingress[0].port" is 443, used by HTTPS ingress`) {
		t.Errorf("skipped %+v", got.Skipped)
	}
}
