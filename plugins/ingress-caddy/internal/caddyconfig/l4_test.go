package caddyconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
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
// the ployz_tcp handler with its port (upstreams come from the table); a
// pending route and an ownerless conflict get no listener; tcp routes
// never reach the http app; with no tcp listener there is no layer4 app.
func TestLayer4Config(t *testing.T) {
	routes := []ingress.Route{
		{Hostname: "a.example.test", Owner: "demo/a", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.2:80"}},
		{Protocol: "tcp", Port: 8081, Owner: "demo/db", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.9:5432", "10.0.0.1:5432"}},
		{Protocol: "tcp", Port: 9000, Owner: "demo/pending", State: ingress.RoutePending},
		{Protocol: "tcp", Port: 9001, State: ingress.RouteConflict, Claimants: []string{"a/x", "b/y"}},
		{Protocol: "tcp", Port: 9002, Owner: "demo/kept", State: ingress.RouteConflict, Claimants: []string{"demo/kept", "z/z"}, Upstreams: []string{"10.0.0.3:22"}},
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
			"tcp_8081": {"listen": ["`+host+`:8081"], "routes": [{"handle": [{"handler": "ployz_tcp", "port": 8081}]}]},
			"tcp_9002": {"listen": ["`+host+`:9002"], "routes": [{"handle": [{"handler": "ployz_tcp", "port": 9002}]}]}
		}`), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(servers, want) {
			got, _ := json.Marshal(servers)
			t.Errorf("listen %s: layer4 servers\n%s", listen, got)
		}
		if strings.Contains(httpApp, "5432") || strings.Contains(httpApp, "9000") || strings.Contains(string(cfg), "10.0.0.") {
			t.Errorf("the config carries upstreams or tcp routes in the http app: %s", httpApp)
		}
	}
	cfg, _ := CaddyConfig(":80", "m1", "/tmp/x", []ingress.Route{routes[0], routes[2], routes[3]})
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
