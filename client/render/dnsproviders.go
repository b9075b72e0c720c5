package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/client"
)

// DNSProviders prints the DNS providers: settings shown, secrets named
// only ("tsig_secret=(sealed)").
func DNSProviders(out io.Writer, ps client.DNSProviders) error {
	if len(ps.Providers) == 0 {
		_, err := fmt.Fprintln(out, "no DNS providers (ployz cert dns-provider set)")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tPROVIDER\tZONE\tSETTINGS\tADDED")
	for _, p := range ps.Providers {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(p.Settings)) {
			kv = append(kv, k+"="+p.Settings[k])
		}
		for _, k := range p.Secrets {
			kv = append(kv, k+"=(sealed)")
		}
		if p.Error != "" {
			kv = append(kv, "error: "+p.Error)
		}
		added := "-"
		if p.AddedAt > 0 {
			added = time.Unix(p.AddedAt, 0).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, dash(p.Provider), dash(p.Zone), dash(strings.Join(kv, " ")), added)
	}
	return w.Flush()
}
