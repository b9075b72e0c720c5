package main

import (
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

func metricsCommand() *cobra.Command {
	var project projectFlags
	var since, machine string
	var names []string
	cmd := &cobra.Command{
		Use:   "metrics [SERVICE]",
		Short: "Chart a Service's (or each Machine's) metrics history from every Machine",
		Long: `Print each Machine's metrics history as terminal sparklines: a Service's
(the sum of its Containers on that Machine), or without SERVICE each
Machine's own. Up to 24 hours back the 10 s samples are read, further back
the 5-minute Rollups (kept 90 days). A value a Machine could not read is
printed as a named gap, and a Machine that does not answer is named.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				now := time.Now()
				service := strings.Join(args, "")
				req, err := client.MetricsRequest("", service, names, since, now)
				if err != nil {
					return err
				}
				if service != "" {
					if req.Namespace, err = project.namespace(c.Context(), s); err != nil {
						return err
					}
				}
				ms, err := s.Metrics(c.Context(), client.MachineTarget(machine), req)
				return showPartial(c, map[string]any{"machines": ms}, err, false, func(w io.Writer) error {
					render.Metrics(w, c.ErrOrStderr(), ms, req.Since, now.UnixNano())
					return nil
				})
			})
		},
	}
	project.add(cmd, false)
	cmd.Flags().StringVar(&since, "since", "24h", "how far back: a duration (24h, 7d is 168h) or an RFC 3339 time")
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	cmd.Flags().StringSliceVar(&names, "metric", nil, "only these metrics (cpu.cores, mem.bytes, pids, io.read_bytes_s, io.write_bytes_s, net.rx_bytes_s, net.tx_bytes_s, ...)")
	return cmd
}
