package volumerun

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/core/volumes"
	"github.com/ployz/ployz/sdk/volume"
)

// Copies is what every Machine answered about one volume, read live.
type Copies struct {
	Name    string
	Writers []string
	Mirrors []string
	Vols    map[string]rpc.Volume // by Machine
	Pools   map[string]bool       // Machines with a ZFS pool
	Missing []string              // Machines that did not answer
	// Note names the Machines that did not answer, and why, as a
	// suffix for a message (Unanswered).
	Note string
}

// CheckName refuses a volume name no Machine would accept, naming NAME.
func CheckName(name string) error {
	if err := volume.ValidName(name); err != nil {
		return fmt.Errorf("NAME: %w", err)
	}
	return nil
}

// ReadCopies asks every Machine for its copy of volume name.
func ReadCopies(ctx context.Context, ent volumes.Caller, name string) (Copies, error) {
	ms, err := volumes.List(ctx, ent, rpc.Target{All: true})
	if err != nil {
		return Copies{}, err
	}
	cp := Copies{Name: name, Vols: map[string]rpc.Volume{}, Pools: map[string]bool{}, Note: Unanswered(ms)}
	for _, m := range ms {
		if m.List == nil {
			cp.Missing = append(cp.Missing, m.Machine)
			continue
		}
		cp.Pools[m.Machine] = m.List.Pool != ""
		for _, v := range m.List.Volumes {
			if v.Name != name {
				continue
			}
			cp.Vols[m.Machine] = v
			switch Role(v) {
			case volumecopy.Writer:
				cp.Writers = append(cp.Writers, m.Machine)
			case volumecopy.Mirror:
				cp.Mirrors = append(cp.Mirrors, m.Machine)
			}
		}
	}
	return cp, nil
}

// readCopies checks name and reads every Machine's copy of it.
func (rn *Runner) readCopies(ctx context.Context, name string) (Copies, error) {
	if err := CheckName(name); err != nil {
		return Copies{}, err
	}
	return ReadCopies(ctx, rn.Entry, name)
}

// readWriter reads every Machine's copy of name and finds its one
// Writer: a refusal here opens no run.
func (rn *Runner) readWriter(ctx context.Context, name string) (Copies, string, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return cp, "", err
	}
	w, err := cp.Writer()
	return cp, w, err
}

// Unanswered names the Machines that did not answer a list, each with
// its error, as a suffix: " (no answer from m3: down)", or "".
func Unanswered(ms []volumes.MachineVolumes) string {
	var parts []string
	for _, m := range ms {
		switch {
		case m.Error != "":
			parts = append(parts, m.Machine+": "+m.Error)
		case m.List == nil:
			parts = append(parts, m.Machine)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (no answer from " + strings.Join(parts, "; ") + ")"
}

// Role is v's copy role, "?" from a daemon that does not report it.
func Role(v rpc.Volume) string {
	if v.Copy == nil {
		return "?"
	}
	return v.Copy.Role
}

// Writer is the one Writer, or why a run cannot start.
func (cp Copies) Writer() (string, error) {
	switch len(cp.Writers) {
	case 1:
		return cp.Writers[0], nil
	case 0:
		held := ""
		for m, v := range cp.Vols {
			held += fmt.Sprintf(" %s (%s)", m, Role(v))
		}
		if held == "" {
			return "", rpc.Errorf(rpc.CodeNotFound, "NAME: no Machine holds a volume %q%s", cp.Name, cp.Note).With("field", "name")
		}
		return "", rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has no Writer (held by%s)%s", cp.Name, held, cp.Note).With("field", "name")
	}
	return "", rpc.Errorf(rpc.CodeConflict, "NAME: volume %q has two Writers, %s: a run refuses to choose; `ployz volume restore %s --from MACHINE` (the newer epoch) demotes the other to a Mirror, losing its writes since",
		cp.Name, cp.writerList(), cp.Name).With("field", "name").With("writers", cp.Writers)
}

// floor is the highest floor any Machine reported for the volume.
func (cp Copies) floor() uint64 {
	var f uint64
	for _, v := range cp.Vols {
		if v.Copy != nil {
			f = max(f, v.Copy.Floor)
		}
	}
	return f
}

// oneWriterAtMost refuses a volume two Machines answer Writer for.
func (cp Copies) oneWriterAtMost() error {
	if len(cp.Writers) > 1 {
		_, err := cp.Writer()
		return err
	}
	return nil
}

// writerList names each Writer with its epoch.
func (cp Copies) writerList() string {
	var out []string
	for _, w := range cp.Writers {
		out = append(out, fmt.Sprintf("%s (epoch %d)", w, epochOf(cp.Vols[w])))
	}
	return strings.Join(out, " and ")
}

// epochOf is v's Writer epoch (0 for a copy that reports none).
func epochOf(v rpc.Volume) int64 {
	if v.Copy == nil {
		return 0
	}
	return v.Copy.Epoch
}

// copyOn is Machine m's copy of cp's volume, or why a run cannot use it:
// m did not answer, or holds no such volume.
func (cp Copies) copyOn(flag, m string) (rpc.Volume, error) {
	if v, ok := cp.Vols[m]; ok {
		return v, nil
	}
	if slices.Contains(cp.Missing, m) {
		return rpc.Volume{}, rpc.Errorf(rpc.CodeUnavailable, "%s: %s did not answer", flag, m).With("field", flag)
	}
	if _, answered := cp.Pools[m]; !answered {
		return rpc.Volume{}, rpc.Errorf(rpc.CodeNotFound, "%s: no Machine %q answered (`ployz machine ls`)", flag, m).With("field", flag)
	}
	return rpc.Volume{}, rpc.Errorf(rpc.CodeNotFound, "%s: %s holds no volume %q", flag, m, cp.Name).With("field", flag)
}

// target checks --to before a run opens: another Machine that answered,
// has a ZFS pool and holds the volume with one of the roles (none: not
// at all, or with no role). Nothing changes on a refusal.
func (cp Copies) target(writer, to string, roles ...string) (string, error) {
	has, answered := cp.Pools[to]
	switch {
	case to == writer:
		return "", rpc.InvalidField("--to", "%s holds the Writer of %s", to, cp.Name)
	case !answered && slices.Contains(cp.Missing, to):
		return "", rpc.Errorf(rpc.CodeUnavailable, "--to: %s did not answer", to).With("field", "--to")
	case !answered:
		return "", rpc.Errorf(rpc.CodeNotFound, "--to: no Machine %q answered (`ployz machine ls`)", to).With("field", "--to")
	case !has:
		return "", rpc.Errorf(rpc.CodeFailedPrecond, "--to: Machine %s has no ZFS pool: set one with `ployz machine update %s --zfs-pool NAME`", to, to).
			With("field", "--to").With("label", volume.PoolLabel)
	}
	if v, ok := cp.Vols[to]; ok && !slices.Contains(roles, Role(v)) {
		return "", rpc.Errorf(rpc.CodeConflict, "--to: %s already holds %s as its %s: `ployz volume sync %s` refreshes a Mirror", to, cp.Name, Role(v), cp.Name).With("field", "--to")
	}
	return to, nil
}

// Locate is the Machine holding volume name: machine when given, or the
// only one that holds it.
func (rn *Runner) Locate(ctx context.Context, name, machine string) (string, error) {
	if machine != "" {
		return machine, nil
	}
	ms, err := volumes.List(ctx, rn.Entry, rpc.Target{All: true})
	if err != nil {
		return "", err
	}
	hs := volumes.Holders(ms, name)
	switch len(hs) {
	case 1:
		return hs[0], nil
	case 0:
		return "", rpc.Errorf(rpc.CodeNotFound, "name: no Machine holds a volume %q%s", name, Unanswered(ms)).With("field", "name")
	}
	return "", rpc.Errorf(rpc.CodeAmbiguous, "name: volume %q is on %s: pass --machine", name, strings.Join(hs, ", ")).With("field", "name")
}

// MountsVolume reports whether spec bind-mounts the Provisioned Volume
// name.
func MountsVolume(spec *rpc.ContainerSpec, name string) bool {
	if spec == nil {
		return false
	}
	for _, m := range spec.Mounts {
		if n, ok := volume.MountedVolume(m.Source); ok && m.Type == "bind" && n == name {
			return true
		}
	}
	return false
}

// containers lists the Containers on machine.
func (rn *Runner) containers(ctx context.Context, machine string) ([]rpc.ContainerObservation, error) {
	var l rpc.ContainerList
	if err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.ListContainers, rpc.ListContainersRequest{}, &l); err != nil {
		return nil, fmt.Errorf("list Containers on %s: %w", machine, err)
	}
	return l.Containers, nil
}
