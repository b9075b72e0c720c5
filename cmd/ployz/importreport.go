package main

import (
	"fmt"
	"io"

	"github.com/ployz/ployz/client"
)

// importReport prints on w, once per context, what the first contact
// with its Cluster imported from this computer's operator store; a
// failed import warns and is tried again by the next command.
func importReport(w io.Writer) func(client.ImportReport, error) {
	return func(rep client.ImportReport, err error) {
		switch {
		case err != nil:
			fmt.Fprintf(w, "warning: this computer's Saved State, deploy records, Volume Runs, allocations and removal marks are not imported into the Cluster yet (the next command tries again): %v\n", err)
		case rep.Done && rep.Moved():
			fmt.Fprintln(w, rep.String())
		}
	}
}
