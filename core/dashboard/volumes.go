package dashboard

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumes"
)

// volumesPage reads the Volumes page and judges each Machine: a pool, no
// pool (named with the command that gives it one, as `ployz volume ls`
// says) or no answer.
func (s *Server) volumesPage(ctx context.Context) (Volumes, error) {
	v, err := s.src.Volumes(ctx)
	if err != nil {
		return Volumes{}, err
	}
	for i, m := range v.Machines {
		v.Machines[i] = judgeVolumeMachine(m.MachineVolumes)
		for name, p := range m.Protection {
			if v.Machines[i].Protection == nil {
				v.Machines[i].Protection = map[string]VolumeProtection{}
			}
			v.Machines[i].Protection[name] = judgeProtection(p)
		}
	}
	if v.Machines == nil {
		v.Machines = []VolumeMachine{}
	}
	if v.Mounts == nil {
		v.Mounts = []volumes.Mount{}
	}
	return v, nil
}

func judgeVolumeMachine(m volumes.MachineVolumes) VolumeMachine {
	vm := VolumeMachine{MachineVolumes: m, State: "pool", Note: m.Note()}
	switch {
	case m.Error != "" || m.List == nil:
		vm.State = "no_answer"
	case m.NoPool():
		vm.State = "no_pool"
	}
	return vm
}

// volumeDetail is one volume of the Volumes page: machine and name pick
// it (names are unique in a Cluster, but a received copy or a clash may
// hold one name on two Machines, so the Machine is part of its URL).
func (s *Server) volumeDetail(ctx context.Context, machine, name string) (VolumeDetail, error) {
	if machine == "" {
		return VolumeDetail{}, &FieldError{Field: "machine", Msg: "required"}
	}
	if name == "" {
		return VolumeDetail{}, &FieldError{Field: "name", Msg: "required"}
	}
	v, err := s.volumesPage(ctx)
	if err != nil {
		return VolumeDetail{}, err
	}
	var ms []volumes.MachineVolumes
	for _, m := range v.Machines {
		ms = append(ms, m.MachineVolumes)
	}
	var at *VolumeMachine
	for i, m := range v.Machines {
		if m.Machine == machine || m.MachineID == machine {
			at = &v.Machines[i]
		}
	}
	if at == nil {
		return VolumeDetail{}, &FieldError{Field: "machine", Msg: fmt.Sprintf("no Machine %q answered or was asked (Machines: %s)", machine, machineNames(ms))}
	}
	if at.State == "no_answer" {
		return VolumeDetail{}, fmt.Errorf("volume %s on %s: %s did not answer: %s", name, at.Machine, at.Machine, at.Error)
	}
	d := VolumeDetail{Machine: at.Machine, Pool: at.List.Pool, Mounts: []volumes.Mount{}, MountsError: v.MountsError, Unanswered: volumes.Unanswered(ms)}
	found := false
	for _, vol := range at.List.Volumes {
		if vol.Name == name {
			d.Volume, found = vol, true
		}
	}
	if !found {
		msg := fmt.Sprintf("no volume %q on %s", name, at.Machine)
		if at.State == "no_pool" {
			msg += ": it has no ZFS pool"
		}
		if hs := volumes.Holders(ms, name); len(hs) > 0 {
			msg += "; it is on " + strings.Join(hs, ", ")
		}
		return VolumeDetail{}, &FieldError{Field: "name", Msg: msg}
	}
	for _, m := range v.Mounts {
		if m.Machine == at.Machine && m.Volume == name {
			d.Mounts = append(d.Mounts, m)
		}
	}
	d.Copies = snapshotCopies(ms, at.Machine, d.Volume.Name, d.Volume.Snapshots)
	if p, ok := at.Protection[name]; ok {
		d.Protection = &p
	}
	return d, nil
}

// judgeProtection says p as `ployz volume inspect` does (the library's
// own strings) and what needs a look: a Mirror more than twice its
// declared interval behind, or a scheduled run that did not end done.
func judgeProtection(p VolumeProtection) VolumeProtection {
	every, _ := time.ParseDuration(p.MirrorEvery) // a stored policy was checked; unparsable: no interval
	p.Snapshots, p.Lines, p.FailedRun, p.Alert = p.SnapshotsLine(), nil, "", false
	for _, m := range p.Mirrors {
		l := MirrorLine{Machine: m.Machine, Text: m.String(), Overdue: m.Overdue(every)}
		p.Lines = append(p.Lines, l)
		p.Alert = p.Alert || l.Overdue
	}
	// A run still going is no failure (inspect says it; the page waits).
	if r := p.NotDone(); r != nil && r.State != operator.RunOpen {
		p.FailedRun, p.Alert = r.String(), true
	}
	return p
}

// snapshotCopies finds, for each snapshot, the snapshots on other
// Machines (or in other volumes) with its GUID: the same point in time.
func snapshotCopies(ms []volumes.MachineVolumes, machine, volume string, snaps []rpc.VolumeSnapshot) map[string][]SnapshotCopy {
	byGUID := map[string][]SnapshotCopy{}
	for _, m := range ms {
		if m.List == nil {
			continue
		}
		for _, v := range m.List.Volumes {
			if m.Machine == machine && v.Name == volume {
				continue
			}
			for _, sn := range v.Snapshots {
				if sn.GUID != "" {
					byGUID[sn.GUID] = append(byGUID[sn.GUID], SnapshotCopy{Machine: m.Machine, Volume: v.Name, Snapshot: sn.Name})
				}
			}
		}
	}
	out := map[string][]SnapshotCopy{}
	for _, sn := range snaps {
		if cs := byGUID[sn.GUID]; sn.GUID != "" && len(cs) > 0 {
			out[sn.Name] = cs
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func machineNames(ms []volumes.MachineVolumes) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Machine)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
