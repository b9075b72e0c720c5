package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/store/server"
)

// storeCommand runs the replicated store (Ployz's Corrosion-compatible
// server) in the foreground; ployz-store.service runs it so it outlives
// ployzd.
func storeCommand() *cobra.Command {
	var (
		configPath, dbPath, apiAddr, gossipAddr, gossipExt, tokenFile, keyFile, adminPath, label, logLevel string
		schemaPaths, bootstrap                                                                             []string
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Run the replicated store (Corrosion-compatible API, SWIM gossip)",
		Long: `Run the replicated store. Settings come from --config (a Corrosion-style TOML
file: [db] path, schema_paths; [gossip] addr, external_addr, bootstrap;
[api] addr, authz.bearer-token; [admin] path) and are overridden by flags.
Without schema paths the store uses Ployz's embedded schema.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg server.Config
			if configPath != "" {
				fc, err := server.LoadFileConfig(configPath)
				if err != nil {
					return err
				}
				fc.Apply(&cfg)
			}
			flags := cmd.Flags()
			set := func(name string, dst *string, v string) {
				if flags.Changed(name) || *dst == "" {
					*dst = v
				}
			}
			set("db", &cfg.DBPath, dbPath)
			set("api-addr", &cfg.APIAddr, apiAddr)
			set("gossip-addr", &cfg.GossipAddr, gossipAddr)
			set("gossip-external-addr", &cfg.GossipExtAddr, gossipExt)
			set("admin-socket", &cfg.AdminPath, adminPath)
			set("cluster-label", &cfg.Label, label)
			if flags.Changed("schema") {
				cfg.SchemaPaths = schemaPaths
			}
			if flags.Changed("bootstrap") {
				cfg.Bootstrap = bootstrap
			}
			if tokenFile != "" {
				tok, err := server.ReadTokenFile(tokenFile)
				if err != nil {
					return err
				}
				cfg.Token = tok
			}
			if keyFile != "" {
				key, err := store.ReadClusterSecretFile(keyFile)
				if err != nil {
					return err
				}
				cfg.GossipKey = key.GossipKey()
			}
			if len(cfg.SchemaPaths) == 0 {
				cfg.SchemaSQL = store.SchemaSQL()
			}
			if cfg.DBPath == "" {
				return fmt.Errorf("no database path: pass --db or [db] path in --config")
			}
			cfg.Log = hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.LevelFromString(logLevel), Output: os.Stderr})
			if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
				return fmt.Errorf("create database directory: %w", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := server.Start(ctx, cfg)
			if err != nil {
				return err
			}
			cfg.Log.Info("store running", "site", n.Engine().Site(), "api", n.APIAddr(), "gossip", n.GossipAddr(),
				"bootstrap", cfg.Bootstrap, "admin", cfg.AdminPath)
			<-ctx.Done()
			cfg.Log.Info("stopping store")
			return n.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "Corrosion-style TOML config file")
	f.StringVar(&dbPath, "db", "/var/lib/ployz/store/store.db", "SQLite database file")
	f.StringSliceVar(&schemaPaths, "schema", nil, "schema .sql file or directory (repeatable; default: embedded Ployz schema)")
	f.StringVar(&apiAddr, "api-addr", "127.0.0.1:7571", "HTTP API listen address")
	f.StringVar(&gossipAddr, "gossip-addr", "0.0.0.0:7570", "gossip bind address (UDP and TCP)")
	f.StringVar(&gossipExt, "gossip-external-addr", "", "gossip address advertised to peers (default: the bind address)")
	f.StringSliceVar(&bootstrap, "bootstrap", nil, "peer gossip addresses to join (host:port, repeatable or comma-separated)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the API bearer token")
	f.StringVar(&keyFile, "gossip-key-file", "", "file holding the Cluster secret that keys gossip (required with a gossip address)")
	f.StringVar(&adminPath, "admin-socket", "/run/ployz/store-admin.sock", "admin unix socket path")
	f.StringVar(&label, "cluster-label", "", "gossip label keeping Clusters apart")
	f.StringVar(&logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	return cmd
}
