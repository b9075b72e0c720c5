package dockertest

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/internal/prereq"
)

// Client is a Docker API client closed when tb ends, or tb ends through
// prereq when no Docker daemon answers.
func Client(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		prereq.Missing(tb, "a Docker client", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		prereq.Missing(tb, "a Docker daemon", err)
	}
	// Negotiated now, before tests share the client between goroutines
	// (Events reads the negotiated version unguarded).
	cli.NegotiateAPIVersion(ctx)
	tb.Cleanup(func() { cli.Close() })
	return cli
}
