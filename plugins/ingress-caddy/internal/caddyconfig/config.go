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

// Module names the proxy registers (package proxy) and the config names.
const (
	// RouteHandler looks each request's hostname up in the proxy's
	// routing table, answers unknown, pending and conflicting hostnames
	// itself and proxies the rest to their upstreams (with the retry
	// and passive health policy of package proxy).
	RouteHandler = "ployz_route"
	// TCPHandler proxies a layer4 connection to its port's upstreams.
	TCPHandler = "ployz_tcp"
	// VerifyHandler answers ingress.VerifyPath (ingress.VerifyAnswer).
	VerifyHandler = "ployz_verify"
)

// CaddyConfig is the Caddy JSON config for routes: HTTP only on listen
// (automatic HTTPS off), no admin endpoint and no autosave. It names
// listeners, not routes: every request goes through RouteHandler, which
// looks its hostname up in the proxy's routing table and proxies it, so
// routing changes never change the config. ingress.VerifyPath is answered by VerifyHandler on any host. Each
// tcp route with upstreams gets a layer4 listener on its port (l4.go):
// only the set of those ports changes the config. stateDir holds Caddy's
// storage. The output is deterministic for equal input, so comparing
// bytes tells whether a reload is needed.
func CaddyConfig(listen, machine, stateDir string, routes []ingress.Route) ([]byte, error) {
	cfg := obj{
		"admin":   obj{"disabled": true, "config": obj{"persist": false}},
		"logging": obj{"logs": obj{"default": obj{"level": "WARN"}}},
		"storage": obj{"module": "file_system", "root": filepath.Clean(stateDir)},
		"apps": obj{"http": obj{"servers": obj{httpServer: obj{
			"listen": []string{listen},
			// Counts connections so a stopping proxy drains them (the
			// wrapper is registered by package proxy, which loads this).
			"listener_wrappers": []any{obj{"wrapper": ConnWrapper}},
			"automatic_https":   obj{"disable": true},
			// h2c: HTTP/2 without TLS (prior knowledge), so gRPC
			// clients reach a Service over plain HTTP too.
			"protocols": []string{"h1", "h2c"},
			"routes":    serverRoutes(machine, true, 0),
		}}}},
	}
	if l4 := layer4App(listen, routes); l4 != nil { // tcp routes: l4.go
		cfg["apps"].(obj)["layer4"] = l4
	}
	return json.Marshal(cfg)
}

// serverRoutes are an HTTP server's routes: the verify path, then every
// request to RouteHandler (answering HTTP-01 challenges when challenges,
// redirecting to HTTPS on httpsPort when it is not 0).
func serverRoutes(machine string, challenges bool, httpsPort int) []any {
	route := obj{"handler": RouteHandler}
	if challenges {
		route["challenges"] = true
	}
	if httpsPort != 0 {
		route["https_port"] = httpsPort
	}
	return []any{
		obj{
			"match":    []any{obj{"path": []string{ingress.VerifyPath}}},
			"handle":   []any{obj{"handler": VerifyHandler, "machine": machine}},
			"terminal": true,
		},
		obj{"handle": []any{route}},
	}
}
