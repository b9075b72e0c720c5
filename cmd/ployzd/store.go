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

	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	"github.com/ployz/ployz/sdk/store"
)

// storeCommand runs the replicated store (Ployz's Corrosion-compatible
// server) in the foreground; ployz-store.service runs it so it outlives
// ployzd.
func storeCommand() *cobra.Command {
	var (
		configPath, dbPath, apiAddr, apiSocket, gossipAddr, gossipExt, tokenFile, keyFile, adminPath, label, logLevel string
		schemaPaths, bootstrap                                                                                        []string
	)
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Run the replicated store (Corrosion-compatible API, SWIM gossip)",
		Long: `Run the replicated store. Settings come from --config (a Corrosion-style TOML
file: [db] path, schema_paths; [gossip] addr, external_addr, bootstrap;
[api] addr, socket, authz.bearer-token; [admin] path) and are overridden
by flags. Without schema paths the store uses Ployz's embedded schema.

Processes on the Machine use the API's unix socket (--api-socket): its
directory is 0700 and it answers root and the store's own uid only, with
no token. --api-addr also serves the API on TCP for outside Corrosion
clients; that needs a bearer token, which --token-file mints afresh at
every start.`,
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
			set("api-socket", &cfg.APISocket, apiSocket)
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
			if tokenFile != "" && cfg.APIAddr != "" {
				tok, err := server.RotateTokenFile(tokenFile)
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
				cfg.SchemaSQL = schema.SQL()
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
			cfg.Log.Info("store running", "site", n.Engine().Site(), "api", n.APIAddr(), "socket", n.APISocket(), "gossip", n.GossipAddr(),
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
	f.StringVar(&apiAddr, "api-addr", "", "HTTP API TCP listen address for outside Corrosion clients (default off; needs --token-file or a config token)")
	f.StringVar(&apiSocket, "api-socket", "/run/ployz/store/api.sock", "HTTP API unix socket (root and the store's uid only); empty disables it")
	f.StringVar(&gossipAddr, "gossip-addr", "0.0.0.0:7570", "gossip bind address (UDP and TCP)")
	f.StringVar(&gossipExt, "gossip-external-addr", "", "gossip address advertised to peers (default: the bind address)")
	f.StringSliceVar(&bootstrap, "bootstrap", nil, "peer gossip addresses to join (host:port, repeatable or comma-separated)")
	f.StringVar(&tokenFile, "token-file", "", "file the store writes a fresh TCP API bearer token to (0600) at every start")
	f.StringVar(&keyFile, "gossip-key-file", "", "file holding the Cluster secret that keys gossip (required with a gossip address)")
	f.StringVar(&adminPath, "admin-socket", "/run/ployz/store-admin.sock", "admin unix socket path")
	f.StringVar(&label, "cluster-label", "", "gossip label keeping Clusters apart")
	f.StringVar(&logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	return cmd
}
