// Command ployz-metrics is Ployz's metrics plugin. ployzd installs it into
// the plugin store by digest and runs it long-lived under
// ployz-plugin@metrics.service (`ployz-metrics serve`): every 10 s it reads
// this Machine's and its Containers' counters from files, keeps samples
// for 24 h and 5-minute Rollups for 90 days, answers QueryMetrics
// (contract: sdk/observe), and serves Prometheus' text format when its
// spec names an address.
package main

import (
	"os"

	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/plugins/metrics/internal/metrics"
)

func main() { os.Exit(metrics.Main(version.Version, os.Args[1:], os.Stderr)) }
