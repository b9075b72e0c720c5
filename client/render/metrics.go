package render

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

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

// MetricValue is a value in the metric's unit.
func MetricValue(metric string, v float64) string {
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

// Metrics charts each Machine's metrics history over [from, to] as
// sparklines with the last, least and greatest value, then its gaps and
// markers; a Machine that did not answer is a warning on errw.
func Metrics(w, errw io.Writer, ms []observe.MachineMetrics, from, to int64) {
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
				sparkline(s.Points, from, to, sparkWidth), MetricValue(s.Metric, last), MetricValue(s.Metric, lo), MetricValue(s.Metric, hi))
		}
		tw.Flush()
		for _, gp := range m.Answer.Gaps {
			who := "the whole Machine"
			if gp.Subject != nil {
				who = subjectName(*gp.Subject)
			}
			fmt.Fprintf(w, "  gap %s .. %s  %s %s: %s\n", time.Unix(0, gp.From).Format("Jan 02 15:04:05"), time.Unix(0, gp.To).Format("15:04:05"), who, gp.Metric, gp.Reason)
		}
		for _, mk := range m.Answer.Markers {
			fmt.Fprintf(w, "  %s  %s %s %s\n", time.Unix(0, mk.Time).Format("Jan 02 15:04:05"), subjectName(mk.Subject), mk.Kind, mk.Detail)
		}
	}
}
