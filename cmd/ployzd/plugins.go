package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/sdk"
)

// pluginsCommand is `ployzd plugins`: list, install and verify plugins.
func pluginsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugins",
		Short: "List, install and verify plugins",
	}
	cmd.AddCommand(pluginsLsCommand(), pluginsInstallCommand(), pluginsVerifyCommand())
	return cmd
}

func pluginsLsCommand() *cobra.Command {
	var (
		dir, socketDir string
		asJSON         bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "Show each installed plugin: version, API version, lifecycle, capabilities, health, digest",
		Long: "ls observes the plugins itself: it verifies each binary, attaches to long-lived\n" +
			"plugins (without stopping them) and starts each managed plugin briefly to read its\n" +
			"Info, then reports what it saw.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := pluginhost.New(pluginhost.Config{
				Dir:       dir,
				SocketDir: socketDir,
				Logger:    hclog.New(&hclog.LoggerOptions{Name: "ployzd", Level: hclog.Error, Output: cmd.ErrOrStderr()}),
			})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := h.Start(ctx); err != nil {
				return err
			}
			st := h.Status()
			if err := h.Close(); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printPlugins(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", pluginhost.DefaultDir, "plugin directory (manifest.json, blobs/sha256)")
	cmd.Flags().StringVar(&socketDir, "socket-dir", sdk.DefaultSocketDir, "where long-lived plugins listen")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for plugins to answer")
	return cmd
}

func printPlugins(w io.Writer, st []pluginhost.PluginStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tAPI\tLIFECYCLE\tHEALTH\tCAPABILITIES\tSHA256")
	for _, s := range st {
		caps := strings.Join(s.Capabilities, ",")
		if caps == "" {
			caps = "-"
		}
		api := "-"
		if s.APIVersion != 0 {
			api = fmt.Sprintf("v%d", s.APIVersion)
		}
		version := s.Version
		if version == "" {
			version = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, version, api, s.Lifecycle, s.Health, caps, s.SHA256[:12])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st {
		if s.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Name, s.Error)
		}
		if s.RunningSHA256 != "" {
			fmt.Fprintf(w, "%s: running binary %s differs from installed %s (restart its unit to switch)\n", s.Name, s.RunningSHA256, s.SHA256)
		}
	}
	return nil
}

func pluginsInstallCommand() *cobra.Command {
	var (
		dir, name, lifecycle, configPath string
		noCheck, onDemand                bool
	)
	cmd := &cobra.Command{
		Use:   "install PATH",
		Short: "Store a plugin binary under its sha256 and add it to the manifest",
		Long: "install checks the binary first (its `info` must report NAME and a plugin-API\n" +
			"version in common with this ployzd), stores it under its sha256, points\n" +
			"<dir>/bin/NAME at it and records it in the manifest. A running long-lived plugin\n" +
			"keeps its old binary until its unit restarts.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				name = strings.TrimPrefix(filepath.Base(args[0]), "ployz-")
			}
			if !noCheck {
				info, err := pluginhost.Fingerprint(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if err := pluginhost.CheckCompatible(info, name, sdk.SupportedAPIVersions); err != nil {
					return fmt.Errorf("refusing to install %s: %w", args[0], err)
				}
			}
			var config json.RawMessage
			if configPath != "" {
				b, err := os.ReadFile(configPath)
				if err != nil {
					return fmt.Errorf("read plugin config: %w", err)
				}
				if !json.Valid(b) {
					return fmt.Errorf("plugin config %s is not JSON", configPath)
				}
				config = b
			}
			e, err := pluginhost.InstallEntry(dir, args[0], pluginhost.Entry{Name: name, Lifecycle: pluginhost.Lifecycle(lifecycle), Config: config, OnDemand: onDemand})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s (%s) sha256 %s\n", e.Name, e.Lifecycle, e.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", pluginhost.DefaultDir, "plugin directory")
	cmd.Flags().StringVar(&name, "name", "", "plugin name (default: file name without ployz-)")
	cmd.Flags().StringVar(&lifecycle, "lifecycle", string(pluginhost.LifecycleManaged), "managed or long-lived")
	cmd.Flags().StringVar(&configPath, "config", "", "JSON file handed to the plugin's Configure")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "skip running the binary's `info` before installing")
	cmd.Flags().BoolVar(&onDemand, "on-demand", false, "leave the plugin stopped until a call needs one of its capabilities (they stay advertised)")
	return cmd
}

func pluginsVerifyCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "verify NAME",
		Short: "Check an installed plugin's binary against its manifest digest (exit 1 on mismatch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := pluginhost.LoadManifest(pluginhost.ManifestPath(dir))
			if err != nil {
				return err
			}
			for _, e := range m.Plugins {
				if e.Name == args[0] {
					// The unit executes the link: it must lead to the blob,
					// hashed only when it changed since its last check (this
					// runs before every start).
					blob, err := filepath.EvalSymlinks(pluginhost.BlobPath(dir, e.SHA256))
					if err != nil {
						return fmt.Errorf("plugin %q: %w", e.Name, err)
					}
					if target, err := filepath.EvalSymlinks(pluginhost.LinkPath(dir, e.Name)); err != nil || target != blob {
						return fmt.Errorf("plugin %q: %s does not lead to %s (%s, %v)", e.Name, pluginhost.LinkPath(dir, e.Name), blob, target, err)
					}
					if err := pluginhost.VerifyInstalled(dir, e.Name, e.SHA256); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s sha256 %s ok\n", e.Name, e.SHA256)
					return nil
				}
			}
			return fmt.Errorf("plugin %q is not in %s", args[0], pluginhost.ManifestPath(dir))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", pluginhost.DefaultDir, "plugin directory")
	return cmd
}
