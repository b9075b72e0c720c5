package volumes

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/ployz/ployz/core/rpc"
)

// Caller is what List needs of a connection to an Entry Machine
// (*rpc.Client).
type Caller interface {
	Fanout(ctx context.Context, t rpc.Target, command string, payload any) (rpc.FanoutResult, error)
}

// MachineVolumes is one Machine's list_volumes answer, or why there is
// none.
type MachineVolumes struct {
	Machine   string          `json:"machine"`
	MachineID string          `json:"machine_id,omitempty"`
	List      *rpc.VolumeList `json:"list,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// NoPool reports whether the Machine answered that it has no ZFS pool,
// so no Provisioned Volumes.
func (m MachineVolumes) NoPool() bool { return m.Error == "" && m.List != nil && m.List.Pool == "" }

// Note is what a person is told about a Machine that lists no volumes
// because it cannot: it did not answer, or it has no ZFS pool (with the
// command that gives it one). Empty for a Machine with a pool.
func (m MachineVolumes) Note() string {
	switch {
	case m.Error != "":
		return "no answer: " + m.Error
	case m.List == nil:
		return "no answer"
	case m.List.Pool == "":
		return fmt.Sprintf("no ZFS pool, no Provisioned Volumes (`ployz machine update %s --zfs-pool NAME`)", m.Machine)
	}
	return ""
}

// List asks the Machines t names for their volumes; every Machine appears
// in the answer, with its error when it has none. Sorted by name.
func List(ctx context.Context, c Caller, t rpc.Target) ([]MachineVolumes, error) {
	answers, err := rpc.InvokeAll(ctx, c, t, rpc.ListVolumes, rpc.None{})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []MachineVolumes
	for _, a := range answers {
		out = append(out, MachineVolumes{Machine: a.Machine, MachineID: a.MachineID, List: a.Value, Error: a.Error})
	}
	return out, nil
}

// Holders are the Machines of ms holding volume name.
func Holders(ms []MachineVolumes, name string) []string {
	var out []string
	for _, m := range ms {
		if m.List == nil {
			continue
		}
		for _, v := range m.List.Volumes {
			if v.Name == name {
				out = append(out, m.Machine)
			}
		}
	}
	return out
}

// Unanswered names the Machines of ms that did not answer.
func Unanswered(ms []MachineVolumes) []string {
	var out []string
	for _, m := range ms {
		if m.Error != "" || m.List == nil {
			out = append(out, m.Machine)
		}
	}
	return out
}

// Mount is one Container bind-mounting a Provisioned Volume on the
// Machine holding it.
type Mount struct {
	Machine   string `json:"machine"`
	Volume    string `json:"volume"`
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Container string `json:"container"`
	State     string `json:"state"`
	// Path is the host path mounted: the volume's mountpoint or a
	// directory in it.
	Path     string `json:"path"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Mounts finds the Containers of cs (each naming the Machine holding it,
// as a deploy snapshot's do) whose bind mounts name a volume of ms on the
// same Machine: its mountpoint or a path in it. Sorted by Machine, volume,
// then Container.
func Mounts(ms []MachineVolumes, cs []rpc.ContainerObservation) []Mount {
	byID := map[string]MachineVolumes{}
	for _, m := range ms {
		if m.List != nil {
			byID[m.MachineID] = m
			if m.List.MachineID != "" {
				byID[m.List.MachineID] = m
			}
		}
	}
	var out []Mount
	for _, c := range cs {
		m, ok := byID[c.MachineID]
		if !ok || c.Spec == nil {
			continue
		}
		for _, sm := range c.Spec.Mounts {
			if sm.Type != "bind" {
				continue
			}
			if v, ok := volumeAt(m.List.Volumes, sm.Source); ok {
				out = append(out, Mount{Machine: m.Machine, Volume: v, Namespace: c.Namespace, Service: c.Service, Container: c.Name,
					State: c.State, Path: sm.Source, Target: sm.Target, ReadOnly: sm.ReadOnly})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Machine != b.Machine {
			return a.Machine < b.Machine
		}
		if a.Volume != b.Volume {
			return a.Volume < b.Volume
		}
		return a.Container < b.Container
	})
	return out
}

// volumeAt is the volume of vs whose mountpoint is host or holds it.
func volumeAt(vs []rpc.Volume, host string) (string, bool) {
	p := path.Clean(host)
	for _, v := range vs {
		if v.Mountpoint == "" {
			continue
		}
		mp := path.Clean(v.Mountpoint)
		if p == mp || strings.HasPrefix(p, mp+"/") {
			return v.Name, true
		}
	}
	return "", false
}

// BindMounts reports whether any Container of cs has a bind mount (only
// then can one mount a Provisioned Volume, and the volumes are worth
// asking for).
func BindMounts(cs []rpc.ContainerObservation) bool {
	for _, c := range cs {
		if c.Spec == nil {
			continue
		}
		for _, m := range c.Spec.Mounts {
			if m.Type == "bind" {
				return true
			}
		}
	}
	return false
}
