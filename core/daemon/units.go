package daemon

import (
	"context"
	"fmt"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// Units starts and stops the systemd units the daemon owns but does not
// host (docs/architecture.md, "Serving outlives the daemon").
type Units interface {
	// Start starts name unless it is already running.
	Start(ctx context.Context, name string) error
	// Restart restarts name, e.g. when its configuration changed.
	Restart(ctx context.Context, name string) error
	// Stop stops name; only a reset does this.
	Stop(ctx context.Context, name string) error
	// Reload makes systemd re-read unit files (daemon-reload), needed
	// after writing one.
	Reload(ctx context.Context) error
}

// Systemd drives units through systemd's own socket (no D-Bus daemon needed).
type Systemd struct{}

func (Systemd) job(ctx context.Context, name, verb string, f func(*sd.Conn, chan<- string) (int, error)) error {
	c, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer c.Close()
	done := make(chan string, 1)
	if _, err := f(c, done); err != nil {
		return fmt.Errorf("systemd %s %s: %w", verb, name, err)
	}
	select {
	case res := <-done:
		if res != "done" {
			return fmt.Errorf("systemd %s %s: job %s (see journalctl -u %s)", verb, name, res, name)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start implements Units.
func (s Systemd) Start(ctx context.Context, name string) error {
	return s.job(ctx, name, "start", func(c *sd.Conn, ch chan<- string) (int, error) {
		return c.StartUnitContext(ctx, name, "replace", ch)
	})
}

// Restart implements Units.
func (s Systemd) Restart(ctx context.Context, name string) error {
	return s.job(ctx, name, "restart", func(c *sd.Conn, ch chan<- string) (int, error) {
		return c.RestartUnitContext(ctx, name, "replace", ch)
	})
}

// Stop implements Units.
func (s Systemd) Stop(ctx context.Context, name string) error {
	return s.job(ctx, name, "stop", func(c *sd.Conn, ch chan<- string) (int, error) {
		return c.StopUnitContext(ctx, name, "replace", ch)
	})
}

// Reload implements Units.
func (Systemd) Reload(ctx context.Context) error {
	c, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer c.Close()
	if err := c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("systemd daemon-reload: %w", err)
	}
	return nil
}
