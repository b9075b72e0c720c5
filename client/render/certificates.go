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

// Certificates prints `ployz cert ls`: one line per certificate, its
// expiry warning in the last column.
func Certificates(out io.Writer, cs client.Certificates) error {
	rows := make([][]string, 0, len(cs.Certificates))
	for _, c := range cs.Certificates {
		rows = append(rows, []string{dash(c.ID), c.Source, strings.Join(c.Names, ","), dash(c.Issuer), unixUTC(c.NotAfter), c.Warning})
	}
	return table(out, "no certificates", "ID\tSOURCE\tNAMES\tISSUER\tNOT AFTER\tWARNING", rows)
}

// CertificateAdded prints `ployz cert add`: the certificate's line and
// the notes naming the ingress Machines that will not serve it.
func CertificateAdded(out io.Writer, c client.Certificate) error {
	return withNotes(out, Certificates(out, client.Certificates{Certificates: []client.Certificate{c}}), c.Notes)
}

// DNSProviders prints the DNS providers: settings shown, secrets named
// only ("tsig_secret=(sealed)").
func DNSProviders(out io.Writer, ps client.DNSProviders) error {
	rows := make([][]string, 0, len(ps.Providers))
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
		rows = append(rows, []string{p.Name, dash(p.Provider), dash(p.Zone), dash(strings.Join(kv, " ")), unixUTC(p.AddedAt)})
	}
	return table(out, "no DNS providers (ployz cert dns-provider set)", "NAME\tPROVIDER\tZONE\tSETTINGS\tADDED", rows)
}

// DNSProviderSet prints `ployz cert dns-provider set`: the provider's
// line and the notes naming the ingress Machines that will not use it.
func DNSProviderSet(out io.Writer, p client.DNSProvider) error {
	return withNotes(out, DNSProviders(out, client.DNSProviders{Providers: []client.DNSProvider{p}}), p.Notes)
}

// table prints header and rows (tab-separated cells) aligned, or empty
// alone when there are no rows.
func table(out io.Writer, empty, header string, rows [][]string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, empty)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

// withNotes prints each note after a table that printed without err.
func withNotes(out io.Writer, err error, notes []string) error {
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	return nil
}

// unixUTC is a Unix time in RFC 3339 (UTC), or "-" when unset.
func unixUTC(sec int64) string {
	if sec <= 0 {
		return "-"
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}
