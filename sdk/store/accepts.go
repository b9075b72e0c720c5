package store

import (
	"slices"
	"strings"
)

// Machine labels (MachineBody.Labels) an ingress, or any plugin, reads.
const (
	// LabelAccepts lists, comma-separated, the kinds of work a Machine
	// accepts ("services", "ingress", "builds"). Unset, it accepts every
	// kind, as Machines did before the label.
	LabelAccepts = "ployz.accepts"
	// AcceptIngress is the kind of a Machine that binds 80/443 and runs
	// the ingress.
	AcceptIngress = "ingress"
)

// Accepts reports whether a Machine with labels accepts work of kind.
func Accepts(labels map[string]string, kind string) bool {
	v, ok := labels[LabelAccepts]
	if !ok {
		return true
	}
	return slices.Contains(SplitAccepts(v), kind)
}

// SplitAccepts splits a ployz.accepts value into its kinds.
func SplitAccepts(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}
