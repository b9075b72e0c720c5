package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

func ingressCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ingress", Short: "Inspect the Ingress Proxies"}
	var machine string
	config := &cobra.Command{
		Use:   "config",
		Short: "Show each Machine's loaded ingress routes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ms, err := client.IngressOn(c.Context(), s.Entry(), client.MachineTarget(machine))
				return show(c, ms, err, func(w io.Writer) error { return render.IngressConfig(w, ms) })
			})
		},
	}
	config.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	dns := &cobra.Command{
		Use:   "dns",
		Short: "Show the DNS records the routed hostnames need: each points at every Machine that accepts ingress",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				d, err := s.IngressDNS(c.Context())
				return show(c, d, err, func(w io.Writer) error { return render.IngressDNS(w, d) })
			})
		},
	}
	cmd.AddCommand(config, dns)
	return cmd
}
