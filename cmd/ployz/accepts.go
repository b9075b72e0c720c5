package main

import (
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
)

// observeBudgetFlagHelp is the help of --observe-budget on machine init,
// add and update.
var observeBudgetFlagHelp = "disk the Machine's logs and metrics may use, e.g. 512MiB or 4GiB (sets the label " +
	observe.BudgetLabel + "; default: 2GiB)"

// acceptsFlagHelp is the help of --accepts on machine init, add and update.
var acceptsFlagHelp = "kinds of work the Machine accepts: " + strings.Join(rpc.AcceptKinds, ", ") +
	" (sets the label " + rpc.MachineLabelAccepts + "; default: all)"
