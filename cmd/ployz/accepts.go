package main

import (
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
)

// observeBudgetFlagHelp is the help of --observe-budget on machine init,
// add and update.
var observeBudgetFlagHelp = "disk the Machine's logs and metrics may use, e.g. 512MiB or 4GiB (sets the label " +
	observe.BudgetLabel + "; default: 2GiB)"

// withObserveBudget adds the ployz.observe.budget label --observe-budget
// asks for to labels (set is whether the flag was given at all).
func withObserveBudget(labels map[string]string, size string, set bool) (map[string]string, error) {
	if !set {
		return labels, nil
	}
	if _, err := observe.ParseBudget(size); err != nil {
		return nil, fmt.Errorf("--observe-budget: %w", err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[observe.BudgetLabel] = strings.TrimSpace(size)
	return labels, nil
}

// acceptsFlagHelp is the help of --accepts on machine init, add and update.
var acceptsFlagHelp = "kinds of work the Machine accepts: " + strings.Join(rpc.AcceptKinds, ", ") +
	" (sets the label " + rpc.MachineLabelAccepts + "; default: all)"

// withAccepts adds the ployz.accepts label --accepts asks for to labels
// (set is whether the flag was given at all).
func withAccepts(labels map[string]string, kinds []string, set bool) (map[string]string, error) {
	if !set {
		return labels, nil
	}
	v, err := rpc.ParseAccepts(kinds)
	if err != nil {
		return nil, fmt.Errorf("--accepts: %w", err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[rpc.MachineLabelAccepts] = v
	return labels, nil
}

// acceptsColumn is a Machine's ACCEPTS in `machine ls`.
func acceptsColumn(labels map[string]string) string {
	v, ok := labels[rpc.MachineLabelAccepts]
	switch {
	case !ok:
		return "all"
	case v == "":
		return "none"
	}
	return v
}
