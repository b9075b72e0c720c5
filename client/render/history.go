package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// History prints operator history entries as a table, in the order
// given (newest first from the library): when, what, where, who and how
// it ended. Times are UTC, so teammates in other zones read the same.
func History(w io.Writer, entries []rpc.HistoryEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no operations recorded")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tKIND\tNAMESPACE\tREVISION\tOUTCOME\tTOOK\tOPERATOR\tDETAIL")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", time.UnixMilli(e.StartedAt).UTC().Format("2006-01-02 15:04:05"),
			e.Kind, dash(e.Namespace), revision(e.Revision), e.Outcome, took(e), operatorOf(e), oneLine(e.Detail))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func revision(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func took(e rpc.HistoryEntry) string {
	if e.FinishedAt == 0 {
		return "-"
	}
	return (time.Duration(e.FinishedAt-e.StartedAt) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// operatorOf is "name (fingerprint)", the fingerprint shortened.
func operatorOf(e rpc.HistoryEntry) string {
	fp := e.Operator.KeyFingerprint
	if fp == "" {
		return e.Operator.Name
	}
	if len(fp) > 19 {
		fp = fp[:19] + "…"
	}
	return e.Operator.Name + " (" + fp + ")"
}

// oneLine keeps a detail on its row: a line break or tab would break
// the table.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
}
