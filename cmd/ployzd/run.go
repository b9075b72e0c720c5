package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/daemon"
	"github.com/ployz/ployz/core/rpc"
)

// runCommand is `ployzd run`, what ployz.service starts.
func runCommand() *cobra.Command {
	var cfg daemon.Config
	var level string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the Machine daemon (ployz.service)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "ployzd", JSONFormat: true, Level: hclog.LevelFromString(level)})
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return daemon.Run(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.DataDir, "data-dir", "/var/lib/ployz", "Machine-local state")
	cmd.Flags().StringVar(&cfg.RunDir, "run-dir", "/run/ployz", "runtime sockets")
	cmd.Flags().StringVar(&level, "log-level", "info", "trace, debug, info, warn or error")
	cmd.Flags().StringVar(&cfg.UnitDir, "unit-dir", "/etc/systemd/system", "systemd unit directory (Docker's drop-in restoring namespace isolation at boot)")
	cmd.Flags().BoolVar(&cfg.UserspaceWireGuard, "userspace-wireguard", false, "run the mesh on wireguard-go (ployz-wireguard.service) even where the kernel has WireGuard")
	return cmd
}

// dialStdioCommand bridges stdin/stdout to the daemon socket, so the CLI
// can reach Machine RPC over SSH.
func dialStdioCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "dial-stdio",
		Short: "Bridge stdin/stdout to the local Machine RPC socket (for SSH)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return rpc.DialStdio(socket, os.Stdin, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", rpc.DefaultSocket, "Machine RPC socket")
	return cmd
}
