package rpc

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Machine roles and acceptance flags are Machine labels, so they travel
// with the Machine record and every Machine's admission reads them the
// same way placement does.
const (
	// MachineLabelRolePrefix: a Machine with label ployz.role.<r> (any
	// value) has role r; `x-placement: {roles: [r]}` places only there.
	MachineLabelRolePrefix = "ployz.role."
	// MachineLabelAccepts lists, comma-separated, the kinds of work a
	// Machine accepts (AcceptServices, AcceptIngress, AcceptBuilds).
	// Unset, it accepts every kind, as Machines did before the flag.
	MachineLabelAccepts = sdkstore.LabelAccepts
)

// Kinds of work a Machine may accept.
const (
	AcceptServices = "services"
	AcceptIngress  = sdkstore.AcceptIngress
	AcceptBuilds   = "builds"
)

// AcceptKinds are the kinds ployz.accepts may name.
var AcceptKinds = []string{AcceptServices, AcceptIngress, AcceptBuilds}

var roleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidRole checks a role name (it becomes part of a label key).
func ValidRole(r string) error {
	if !roleName.MatchString(r) {
		return fmt.Errorf("%q is not a role name (lowercase letters, digits, '.', '_', '-'; up to 63)", r)
	}
	return nil
}

// ConstraintMachineName is the constraint label that stands for the
// Machine's name (compose's node.hostname), not for a label it carries.
const ConstraintMachineName = "ployz.machine.name"

// ConstraintValue is the value a placement constraint on label compares
// for a Machine named name with labels: its name for
// ConstraintMachineName, else the label's value.
func ConstraintValue(name string, labels map[string]string, label string) (string, bool) {
	if label == ConstraintMachineName {
		return name, true
	}
	v, ok := labels[label]
	return v, ok
}

// HasRole reports whether a Machine with labels has role r.
func HasRole(labels map[string]string, r string) bool {
	_, ok := labels[MachineLabelRolePrefix+r]
	return ok
}

// Accepts reports whether a Machine with labels accepts work of kind
// (the rule lives in sdk/store, where plugins read it too).
func Accepts(labels map[string]string, kind string) bool { return sdkstore.Accepts(labels, kind) }

// SplitAccepts splits a ployz.accepts value into its kinds.
func SplitAccepts(v string) []string { return sdkstore.SplitAccepts(v) }

// ParseAccepts checks kinds and returns the ployz.accepts value naming
// them ("" accepts nothing new: a Machine kept for what it runs).
func ParseAccepts(kinds []string) (string, error) {
	var out []string
	for _, k := range kinds {
		for _, p := range SplitAccepts(k) {
			if !slices.Contains(AcceptKinds, p) {
				return "", fmt.Errorf("%q is not one of %s", p, strings.Join(AcceptKinds, ", "))
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ","), nil
}

// AdmitLabels is the part of Machine-local admission that reads only the
// Machine's labels: drained, accepts, roles and constraints, refused
// naming the field. ployzd applies it before it creates a Container;
// `ployz volume move` applies it to the target's labels before a run
// opens, so a move the target would refuse changes nothing.
func AdmitLabels(machine string, labels map[string]string, s ContainerSpec) error {
	if since, ok := labels[MachineLabelDrained]; ok {
		return Errorf(CodeFailedPrecond, "machine %s is drained (since %s): it admits no new Container; `ployz machine undrain %s` makes it eligible again",
			machine, since, machine).With("drained", since)
	}
	if !Accepts(labels, AcceptServices) {
		return Errorf(CodeFailedPrecond, "machine %s does not accept services (its label %s is %q)",
			machine, MachineLabelAccepts, labels[MachineLabelAccepts]).With("accepts", labels[MachineLabelAccepts])
	}
	for i, r := range s.Roles {
		if !HasRole(labels, r) {
			return Errorf(CodeFailedPrecond, "machine %s does not have role %q (no label %s%s)", machine, r, MachineLabelRolePrefix, r).
				With("role", r).With("field", fmt.Sprintf("spec.roles[%d]", i))
		}
	}
	for i, c := range s.Constraints {
		v, ok := ConstraintValue(machine, labels, c.Label)
		if (c.Op == "==") != (ok && v == c.Value) {
			have := "unset"
			if ok {
				have = fmt.Sprintf("%q", v)
			}
			return Errorf(CodeFailedPrecond, "machine %s does not satisfy constraint %s %s %q (its label %s is %s)",
				machine, c.Label, c.Op, c.Value, c.Label, have).
				With("constraint", fmt.Sprintf("%s%s%s", c.Label, c.Op, c.Value)).With("field", fmt.Sprintf("spec.constraints[%d]", i))
		}
	}
	return nil
}
