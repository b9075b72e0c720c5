// Package storetest starts a real store node (core/store/server, with the
// replicated schema) on loopback for the tests of store readers: core's,
// the SDK's store client (sdk/store) and plugins'. The node is core's
// implementation of the store API; a test outside core reaches it only
// through this package, and only from test files (deps_test.go, the
// test-import rule). A plugin's code talks to the API with sdk/store.
package storetest

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
)

// DefaultToken is the bearer token a Node requires unless told otherwise.
const DefaultToken = "tok"

// Node is a running (or stopped) store node owned by one test.
type Node struct {
	t    testing.TB
	cfg  server.Config
	node *server.Node
}

// Option changes the node's configuration before it starts.
type Option func(*server.Config)

// NoAuth serves the TCP API without a bearer token.
func NoAuth() Option { return func(c *server.Config) { c.Token, c.NoAuth = "", true } }

// WithToken requires tok as the TCP API's bearer token.
func WithToken(tok string) Option { return func(c *server.Config) { c.Token = tok } }

// Addr serves the TCP API at addr (host:port) instead of a free port: a
// store restarted where its clients already point.
func Addr(addr string) Option { return func(c *server.Config) { c.APIAddr = addr } }

// Socket serves the API on a unix socket at path (no token) instead of
// TCP.
func Socket(path string) Option {
	return func(c *server.Config) { c.APISocket, c.APIAddr, c.Token = path, "", "" }
}

// Start starts a node on a free loopback port with its database in a
// temporary directory; it is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	n := &Node{t: t, cfg: server.Config{
		DBPath:    filepath.Join(t.TempDir(), "store.db"),
		SchemaSQL: schema.SQL(),
		APIAddr:   freeAddr(t),
		Token:     DefaultToken,
	}}
	for _, o := range opts {
		o(&n.cfg)
	}
	n.Restart()
	t.Cleanup(n.Stop)
	return n
}

// API is the address a client dials: the TCP address, or the socket path.
func (n *Node) API() string {
	if n.cfg.APISocket != "" {
		return n.cfg.APISocket
	}
	return n.cfg.APIAddr
}

// Token is the bearer token the TCP API requires ("" when none).
func (n *Node) Token() string { return n.cfg.Token }

// DBPath is the node's database file; its subscriptions database lies
// beside it.
func (n *Node) DBPath() string { return n.cfg.DBPath }

// Stop stops the node, keeping its database; stopping twice is harmless.
func (n *Node) Stop() {
	if n.node != nil {
		n.node.Close()
		n.node = nil
	}
}

// Restart starts the stopped node again on the same database and
// address (Start starts it the first time).
func (n *Node) Restart() {
	n.t.Helper()
	node, err := server.Start(context.Background(), n.cfg)
	if err != nil {
		n.t.Fatalf("start store node: %v", err)
	}
	n.node = node
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
