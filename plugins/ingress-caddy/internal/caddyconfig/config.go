package caddyconfig

import (
	"encoding/json"
	"path/filepath"

	"github.com/ployz/ployz/sdk/ingress"
)

// ConnWrapper is the listener wrapper counting the HTTP(S) servers'
// connections, so a stopping proxy can wait for them to finish.
const ConnWrapper = "ployz_conns"

type obj = map[string]any

// CaddyConfig is the Caddy JSON config for routes: HTTP only on listen
// (automatic HTTPS off), no admin endpoint and no autosave. ingress.VerifyPath
// answers machine on any host; a published or conflicting route proxies to
// its upstreams in order (the first available one, local Containers
// listed first); a pending route answers 502; an unknown host 404.
// stateDir holds Caddy's storage. The output is deterministic for equal
// input, so comparing bytes tells whether a reload is needed.
func CaddyConfig(listen, machine, stateDir string, routes []ingress.Route) ([]byte, error) {
	hr := []any{obj{
		"match":    []any{obj{"path": []string{ingress.VerifyPath}}},
		"handle":   []any{obj{"handler": "static_response", "status_code": 200, "body": machine + "\n"}},
		"terminal": true,
	}}
	for _, rt := range routes {
		if rt.Protocol == "tcp" {
			continue
		}
		var h obj
		switch {
		case rt.Owner == "":
			h = obj{"handler": "static_response", "status_code": 503,
				"headers": obj{"Content-Type": []string{"text/plain; charset=utf-8"}},
				"body":    "ployz: " + rt.Hostname + " is claimed by several Services; nothing is published\n"}
		case len(rt.Upstreams) == 0:
			h = obj{"handler": "static_response", "status_code": 502,
				"headers": obj{"Content-Type": []string{"text/plain; charset=utf-8"}},
				"body":    "ployz: no ready Container for " + rt.Hostname + "\n"}
		default:
			ups := make([]any, 0, len(rt.Upstreams))
			for _, u := range rt.Upstreams {
				ups = append(ups, obj{"dial": u})
			}
			// No retry or health-check tuning: a Container leaves this
			// list (the Serving Pointer moves, every proxy acks) before
			// it stops, so a dial never meets a Container that is gone.
			h = obj{"handler": "reverse_proxy", "upstreams": ups,
				"load_balancing": obj{"selection_policy": obj{"policy": "first"}}}
		}
		hr = append(hr, obj{
			"match":    []any{obj{"host": []string{rt.Hostname}}},
			"handle":   []any{h},
			"terminal": true,
		})
	}
	hr = append(hr, obj{"handle": []any{obj{"handler": "static_response", "status_code": 404,
		"body": "ployz: no route for this host\n"}}})
	cfg := obj{
		"admin":   obj{"disabled": true, "config": obj{"persist": false}},
		"logging": obj{"logs": obj{"default": obj{"level": "WARN"}}},
		"storage": obj{"module": "file_system", "root": filepath.Clean(stateDir)},
		"apps": obj{"http": obj{"servers": obj{"ingress": obj{
			"listen": []string{listen},
			// Counts connections so a stopping proxy drains them (the
			// wrapper is registered by package proxy, which loads this).
			"listener_wrappers": []any{obj{"wrapper": ConnWrapper}},
			"automatic_https":   obj{"disable": true},
			"routes":            hr,
		}}}},
	}
	if l4 := layer4App(listen, routes); l4 != nil { // tcp routes: l4.go
		cfg["apps"].(obj)["layer4"] = l4
	}
	return json.Marshal(cfg)
}
