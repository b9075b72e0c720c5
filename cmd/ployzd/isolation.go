package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/mesh/dockernet"
)

// isolationCommand is `ployzd isolation restore`, which Docker's drop-in
// runs before dockerd starts (dockernet.BootDropIn).
func isolationCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "isolation", Short: "Namespace isolation rules (docs/security.md)"}
	var dataDir string
	restore := &cobra.Command{
		Use:   "restore",
		Short: "Put back the isolation rules ployzd last committed (run before dockerd at boot)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log := hclog.New(&hclog.LoggerOptions{Name: "ployzd.isolation", Output: os.Stderr})
			err := dockernet.RestoreSaved(dockernet.Config{Logger: log}, filepath.Join(dataDir, dockernet.SavedFile))
			if errors.Is(err, os.ErrNotExist) {
				log.Info("no isolation saved yet: nothing to restore")
				return nil
			}
			if err != nil {
				return err
			}
			log.Info("namespace isolation restored", "file", filepath.Join(dataDir, dockernet.SavedFile))
			return nil
		},
	}
	restore.Flags().StringVar(&dataDir, "data-dir", "/var/lib/ployz", "Machine-local state (ployzd run's --data-dir)")
	cmd.AddCommand(restore)
	return cmd
}
