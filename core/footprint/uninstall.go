package footprint

import (
	"context"
	"fmt"
	"strings"
)

// Shell runs one command on the host (over SSH) and returns its combined
// output; a non-zero exit is an error.
type Shell func(ctx context.Context, cmd string) (string, error)

// State is where one item stands.
type State string

// States: a survey says present or absent; an uninstall says removed,
// kept (user data not purged), failed, absent, or would-remove (dry run).
const (
	Present     State = "present"
	Absent      State = "absent"
	Removed     State = "removed"
	Kept        State = "kept"
	Failed      State = "failed"
	WouldRemove State = "would-remove"
)

// Result is one item's outcome. Found is what the probe named (unit
// names, container ids, iptables binaries holding a chain, paths).
type Result struct {
	Kind  Kind     `json:"kind"`
	Name  string   `json:"name"`
	State State    `json:"state"`
	Found []string `json:"found,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Options steer Uninstall.
type Options struct {
	// PurgeVolumes removes the volumes of Ployz's Containers too.
	PurgeVolumes bool
	// DryRun probes and reports what would go, changing nothing.
	DryRun bool
	// Progress gets one line per item acted on.
	Progress func(format string, args ...any)
}

// probe runs the item's probe: the lines it printed, none when absent.
func (it Item) probe(ctx context.Context, sh Shell) ([]string, error) {
	out, err := sh(ctx, it.Probe)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", it.Name, err)
	}
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			found = append(found, l)
		}
	}
	return found, nil
}

// Survey probes every item: the leftover check.
func Survey(ctx context.Context, sh Shell) []Result {
	var out []Result
	for _, it := range Items() {
		r := Result{Kind: it.Kind, Name: it.Name, State: Absent}
		found, err := it.probe(ctx, sh)
		switch {
		case err != nil:
			r.State, r.Error = Failed, err.Error()
		case len(found) > 0:
			r.State, r.Found = Present, found
		}
		out = append(out, r)
	}
	return out
}

// Leftovers are the results that are not absent (present, or not
// probed), the kept user data aside when keepUserData.
func Leftovers(rs []Result, keepUserData bool) []Result {
	var out []Result
	for _, r := range rs {
		if r.State == Absent || (keepUserData && r.Kind == KindVolume) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Uninstall removes every present item in order, item by item: a failure
// is reported on its item and the next one is still tried.
func Uninstall(ctx context.Context, sh Shell, o Options) []Result {
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	var out []Result
	for _, it := range Items() {
		out = append(out, it.uninstall(ctx, sh, o, progress))
	}
	return out
}

func (it Item) uninstall(ctx context.Context, sh Shell, o Options, progress func(string, ...any)) Result {
	r := Result{Kind: it.Kind, Name: it.Name}
	found, err := it.probe(ctx, sh)
	switch {
	case err != nil:
		r.State, r.Error = Failed, err.Error()
		return r
	case len(found) == 0:
		r.State = Absent
		return r
	}
	r.Found = found
	switch {
	case it.UserData && !o.PurgeVolumes:
		r.State = Kept
		progress("keeping %s: %s (--purge-volumes removes them)", it.Name, strings.Join(found, ", "))
		return r
	case o.DryRun:
		r.State = WouldRemove
		return r
	}
	progress("removing %s %s", it.Kind, it.Name)
	out, rerr := sh(ctx, it.Remove)
	left, err := it.probe(ctx, sh)
	switch {
	case err != nil:
		r.State, r.Error = Failed, err.Error()
	case len(left) > 0:
		r.State, r.Error = Failed, fmt.Sprintf("still present: %s", strings.Join(left, ", "))
		if rerr != nil {
			r.Error += fmt.Sprintf(" (%v: %s)", rerr, strings.TrimSpace(out))
		}
	default:
		r.State = Removed
	}
	return r
}

// Count is how many results are in state s.
func Count(rs []Result, s State) int {
	n := 0
	for _, r := range rs {
		if r.State == s {
			n++
		}
	}
	return n
}
