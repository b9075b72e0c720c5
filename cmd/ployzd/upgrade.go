package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/daemon"
	"github.com/ployz/ployz/core/rpc"
)

// upgradeCommand is `ployzd upgrade apply`, the swap ployzd starts in a
// transient unit after it verified an uploaded bundle (docs/upgrades.md).
func upgradeCommand() *cobra.Command {
	up := &cobra.Command{Use: "upgrade", Short: "Swap this Machine onto a staged release", Hidden: true}
	var cfg daemon.ApplyConfig
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Swap onto releases/<to>, health-check each step, and go back to <from> on a failure",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg.Log = hclog.New(&hclog.LoggerOptions{Name: "ployzd-upgrade", JSONFormat: true})
			return daemon.ApplyUpgrade(ctx, cfg)
		},
	}
	f := apply.Flags()
	f.StringVar(&cfg.ID, "id", "", "upgrade id")
	f.StringVar(&cfg.From, "from", "", "the running release")
	f.StringVar(&cfg.To, "to", "", "the staged release")
	f.StringVar(&cfg.DataDir, "data-dir", "/var/lib/ployz", "data directory")
	f.StringVar(&cfg.BinDir, "bin-dir", "/usr/local/bin", "where the units find ployzd")
	f.StringVar(&cfg.UnitDir, "unit-dir", "/etc/systemd/system", "systemd unit directory")
	f.StringVar(&cfg.Socket, "socket", "/run/ployz/ployz.sock", "local Machine RPC socket")
	f.StringVar(&cfg.Plugin, "plugin", "", "swap only this bundled plugin onto the staged release's binary")
	_ = apply.MarkFlagRequired("from")
	_ = apply.MarkFlagRequired("to")
	up.AddCommand(apply, stageCommand())
	return up
}

// stageCommand is `ployzd upgrade stage`: run from the new bundle's own
// ployzd over SSH, it verifies (digest and signature) and unpacks a
// bundle copied to the Machine.
func stageCommand() *cobra.Command {
	var req rpc.UpgradeRequest
	var bundle, proof, dataDir string
	c := &cobra.Command{
		Use:   "stage",
		Short: "Verify a bundle file and unpack it into DATA_DIR/releases/<version>",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			st, err := os.Stat(bundle)
			if err != nil {
				return err
			}
			req.Size = st.Size()
			if proof != "" {
				b, err := os.ReadFile(proof)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(b, &req.Proof); err != nil {
					return fmt.Errorf("--proof %s: %w", proof, err)
				}
			}
			dir, err := daemon.StageBundleFile(dataDir, bundle, req)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), dir)
			return nil
		},
	}
	c.Flags().StringVar(&bundle, "bundle", "", "bundle file")
	c.Flags().StringVar(&proof, "proof", "", "JSON of what signs the bundle (its signature, or its release's signed index)")
	c.Flags().StringVar(&req.Version, "version", "", "the bundle's version")
	c.Flags().StringVar(&req.SHA256, "sha256", "", "the bundle's sha256")
	c.Flags().StringVar(&dataDir, "data-dir", "/var/lib/ployz", "data directory")
	return c
}
