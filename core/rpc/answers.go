package rpc

import (
	"encoding/json"
	"sort"
)

// Answer is one Machine's decoded answer to a fan-out, or why it has
// none: the per-Machine row every "ask all Machines" view is made of.
type Answer[T any] struct {
	MachineID string
	// Machine names the Machine for people: its name, else its id.
	Machine string
	// Value is the decoded payload; nil when Error is set.
	Value *T
	// Error says why there is no Value: the call's error, a malformed
	// payload, or the reason the fan-out left the Machine out.
	Error string
	// Err is the call's own error, for callers reading its details; nil
	// for a malformed payload or an omitted Machine.
	Err *Error
}

// Answers decodes each result of fr as T and adds one Answer per omitted
// Machine, sorted by Machine then id. cmd names the command in the error
// of a payload that does not decode, so a Machine answering garbage is
// reported, not dropped.
func Answers[T any](fr FanoutResult, cmd string) []Answer[T] {
	out := make([]Answer[T], 0, len(fr.Results)+len(fr.Omitted))
	for _, r := range fr.Results {
		a := Answer[T]{MachineID: r.MachineID, Machine: r.Machine(), Err: r.Error}
		if r.Error != nil {
			a.Error = r.Error.Error()
		} else {
			var v T
			if err := json.Unmarshal(r.Payload, &v); err != nil {
				a.Error = "malformed " + cmd + " answer: " + err.Error()
			} else {
				a.Value = &v
			}
		}
		out = append(out, a)
	}
	for _, o := range fr.Omitted {
		out = append(out, Answer[T]{MachineID: o.MachineID, Machine: o.Machine(), Error: o.Reason})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Machine != out[j].Machine {
			return out[i].Machine < out[j].Machine
		}
		return out[i].MachineID < out[j].MachineID
	})
	return out
}
