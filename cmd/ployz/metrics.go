package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// machineTarget is every Machine, or the one --machine names.
func machineTarget(machine string) rpc.Target {
	if machine != "" {
		return rpc.Target{Set: []string{machine}}
	}
	return rpc.Target{All: true}
}

// partialMetrics exits 3 naming the Machines without an answer.
func partialMetrics(ms []observe.MachineMetrics) error {
	return exitFor(client.MetricsPartial(ms), false)
}

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
			return withSession(c, func(s session) error {
				now := time.Now()
				from, err := parseWhen("since", since, now)
				if err != nil {
					return err
				}
				req := rpc.QueryMetricsRequest{Machine: len(args) == 0, Metrics: names, Since: from}
				if now.Sub(time.Unix(0, from)) > 24*time.Hour {
					req.StepSeconds = 300
				}
				if len(args) == 1 {
					p, err := project.resolveProject(c.Context(), s.st, s.ctx)
					if err != nil {
						return err
					}
					req.Namespace, req.Service = deploy.Namespace(p, project.env), args[0]
				}
				ms, err := s.client().Metrics(c.Context(), machineTarget(machine), req)
				if err != nil && !client.IsPartial(err) {
					return err
				}
				if g.json {
					if err := printJSON(c.OutOrStdout(), map[string]any{"machines": ms}); err != nil {
						return err
					}
				} else {
					printMetrics(c.OutOrStdout(), c.ErrOrStderr(), ms, from, now.UnixNano())
				}
				return exitFor(err, false)
			})
		},
	}
	project.add(cmd, false)
	cmd.Flags().StringVar(&since, "since", "24h", "how far back: a duration (24h, 7d is 168h) or an RFC 3339 time")
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	cmd.Flags().StringSliceVar(&names, "metric", nil, "only these metrics (cpu.cores, mem.bytes, pids, io.read_bytes_s, io.write_bytes_s, net.rx_bytes_s, net.tx_bytes_s, ...)")
	return cmd
}

const sparkWidth = 60

var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// sparkline averages points into width buckets over [from, to]; a bucket
// with no value is a space, so gaps show.
func sparkline(ps []rpc.MetricPoint, from, to int64, width int) string {
	if to <= from || width <= 0 {
		return ""
	}
	sum := make([]float64, width)
	n := make([]int, width)
	for _, p := range ps {
		i := int(float64(p.Time-from) / float64(to-from) * float64(width))
		if i < 0 || i >= width {
			continue
		}
		sum[i] += p.Value
		n[i]++
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range sum {
		if n[i] > 0 {
			v := sum[i] / float64(n[i])
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	var b strings.Builder
	for i := range sum {
		if n[i] == 0 {
			b.WriteRune(' ')
			continue
		}
		v := sum[i] / float64(n[i])
		lvl := 0
		if hi > lo {
			lvl = int((v - lo) / (hi - lo) * float64(len(sparkLevels)-1))
		}
		b.WriteRune(sparkLevels[lvl])
	}
	return b.String()
}

// fmtValue prints a value in the metric's unit.
func fmtValue(metric string, v float64) string {
	switch {
	case strings.HasSuffix(metric, "bytes") || strings.HasSuffix(metric, "bytes_s"):
		units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
		i := 0
		for math.Abs(v) >= 1024 && i < len(units)-1 {
			v /= 1024
			i++
		}
		s := fmt.Sprintf("%.1f%s", v, units[i])
		if strings.HasSuffix(metric, "_s") {
			s += "/s"
		}
		return s
	case metric == "cpu.cores":
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func subjectName(s rpc.MetricSubject) string {
	switch {
	case s.ContainerName != "":
		return s.ContainerName
	case s.Deployment != "":
		return s.Service + "@" + s.Deployment
	case s.Service != "":
		return s.Service
	}
	return "machine"
}

func printMetrics(w, errw io.Writer, ms []observe.MachineMetrics, from, to int64) {
	for _, m := range ms {
		if m.Error != "" {
			fmt.Fprintf(errw, "warning: machine %s did not answer: %s\n", m.Machine, m.Error)
			continue
		}
		fmt.Fprintf(w, "%s  (%s .. %s, every %ds)\n", m.Machine, time.Unix(0, from).Format("Jan 02 15:04"), time.Unix(0, to).Format("15:04"), m.Answer.ResolutionSeconds)
		if len(m.Answer.Series) == 0 {
			fmt.Fprintln(w, "  no samples in this range")
		}
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		for _, s := range m.Answer.Series {
			if len(s.Points) == 0 {
				continue
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, p := range s.Points {
				lo, hi = math.Min(lo, p.Value), math.Max(hi, p.Value)
			}
			last := s.Points[len(s.Points)-1].Value
			fmt.Fprintf(tw, "  %s\t%s\t%s\tlast %s\tmin %s\tmax %s\n", subjectName(s.Subject), s.Metric,
				sparkline(s.Points, from, to, sparkWidth), fmtValue(s.Metric, last), fmtValue(s.Metric, lo), fmtValue(s.Metric, hi))
		}
		tw.Flush()
		for _, g := range m.Answer.Gaps {
			who := "the whole Machine"
			if g.Subject != nil {
				who = subjectName(*g.Subject)
			}
			fmt.Fprintf(w, "  gap %s .. %s  %s %s: %s\n", time.Unix(0, g.From).Format("Jan 02 15:04:05"), time.Unix(0, g.To).Format("15:04:05"), who, g.Metric, g.Reason)
		}
		for _, mk := range m.Answer.Markers {
			fmt.Fprintf(w, "  %s  %s %s %s\n", time.Unix(0, mk.Time).Format("Jan 02 15:04:05"), subjectName(mk.Subject), mk.Kind, mk.Detail)
		}
	}
}
