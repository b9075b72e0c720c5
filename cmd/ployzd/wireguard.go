package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/mesh"
)

// wireguardCommand is `ployzd wireguard`: the userspace WireGuard device
// under its own unit (ployz-wireguard.service), so the mesh keeps carrying
// traffic while ployzd restarts. ployzd configures it over its UAPI socket.
func wireguardCommand() *cobra.Command {
	var cfg mesh.Config
	var keyFile string
	cmd := &cobra.Command{
		Use:   "wireguard",
		Short: "Serve the mesh's userspace WireGuard device (ployz-wireguard.service)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			key, err := mesh.LoadOrCreateKey(keyFile)
			if err != nil {
				return err
			}
			cfg.PrivateKey = key
			cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "ployz-wireguard", JSONFormat: true})
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return mesh.ServeDevice(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.Interface, "interface", mesh.DefaultInterface, "interface name")
	cmd.Flags().IntVar(&cfg.ListenPort, "port", mesh.DefaultListenPort, "UDP listen port")
	cmd.Flags().StringVar(&keyFile, "key-file", "/var/lib/ployz/wireguard.key", "private key file (created when missing)")
	cmd.Flags().StringVar(&cfg.StateFile, "state-file", "/run/ployz/wireguard/peers", "where an ending process leaves its peers for the next one on the same TUN")
	return cmd
}
