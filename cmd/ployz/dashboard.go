package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/dashsource"
	"github.com/ployz/ployz/core/dashboard"
)

func dashboardCommand() *cobra.Command {
	listen := dashboard.DefaultListen
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a local web UI of the Cluster: Machines, Services, Deploys, Volumes, logs and metrics; scale and restart",
		Long: `Serve a web UI on this computer that reads and acts on the Cluster through the
current context, exactly as the CLI does: no listener is added on any Machine.
It listens on 127.0.0.1 by default and prints a one-time launch link: the
first browser to open it is given a session cookie, and only that browser can
read the Cluster or act; the link does not work a second time (run the command
again for a new one). A button is the confirmation of its action (as -y is for
the CLI).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			defer ln.Close()
			if host, _, _ := net.SplitHostPort(listen); host != "localhost" && !(net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()) {
				fmt.Fprintf(c.ErrOrStderr(), "warning: --listen %s is not loopback; the launch link and session cookie cross the network unencrypted\n", listen)
			}
			opts := g.clientOptions()
			src := dashsource.New(func(ctx context.Context) (*client.Session, error) { return client.Open(ctx, opts) })
			defer src.Close()
			log := hclog.New(&hclog.LoggerOptions{Name: "ployz", Output: c.ErrOrStderr(), Level: hclog.Info})
			srv, err := dashboard.New(src, dashboard.Options{Listen: ln.Addr().String(), Logger: log})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "dashboard at %s (open it once, in your browser; Ctrl-C stops it)\n", srv.LaunchURL())
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", listen, "address to serve on (host:port)")
	return cmd
}
