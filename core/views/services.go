package views

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// ServiceRow is one Service as `ployz ls` lists it.
type ServiceRow struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Desired   string `json:"desired"` // a number, "global", "job", "removing", or "-" when no saved state declares it
	Running   int    `json:"running"`
	Ready     int    `json:"ready"`
	Total     int    `json:"containers"`
	// Restarts sums Docker's restarts of the Service's Containers.
	Restarts int `json:"restarts"`
	// Below says the Service has fewer ready Containers than it declares;
	// NotReadyOn names the Machines holding a Container that is not ready.
	Below      bool     `json:"below_replicas,omitempty"`
	NotReadyOn []string `json:"not_ready_on,omitempty"`
	// DownOn names the Down Machines that hold Containers the Service's
	// Serving Pointer names: they serve nowhere (Internal DNS and the
	// ingress leave them out) until the Machine is up again or a deploy
	// replaces them.
	DownOn []string `json:"down_on,omitempty"`
}

// Judge sets Below from the declared replica count.
func (r *ServiceRow) Judge() {
	want, err := strconv.Atoi(r.Desired)
	r.Below = err == nil && r.Ready < want
	sort.Strings(r.NotReadyOn)
	r.NotReadyOn = slices.Compact(r.NotReadyOn)
	sort.Strings(r.DownOn)
	r.DownOn = slices.Compact(r.DownOn)
}

// Note is the human column for a Service below its replicas.
func (r ServiceRow) Note() string {
	if r.Ready == 0 && len(r.DownOn) > 0 {
		return "every serving replica is on a Down Machine (" + strings.Join(r.DownOn, ", ") + ")"
	}
	if !r.Below {
		return ""
	}
	note := "below replicas"
	if len(r.NotReadyOn) > 0 {
		note += "; not ready on " + strings.Join(r.NotReadyOn, ", ")
	}
	if len(r.DownOn) > 0 {
		note += "; replicas on Down " + strings.Join(r.DownOn, ", ")
	}
	return note
}

// Services joins what the latest Saved States declare (namespace ->
// service -> declaration) with the Containers snap observed in ns (""
// for every namespace). removing names namespaces with a pending removal.
// A Service observed but declared nowhere gets Desired "-".
func Services(snap deploy.Snapshot, decl map[string]map[string]deploy.Service, removing map[string]bool, ns string) []ServiceRow {
	rows := map[string]*ServiceRow{}
	for n, svcs := range decl {
		if ns != "" && n != ns {
			continue
		}
		for name, sv := range svcs {
			d := strconv.Itoa(sv.Replicas)
			if sv.Mode == deploy.ModeGlobal {
				d = "global"
			}
			if sv.Schedule != nil {
				d = deploy.ModeJob // runs per tick, never replicas: `ployz jobs ls`
			}
			if removing[n] {
				d = "removing"
			}
			rows[n+"/"+name] = &ServiceRow{Namespace: n, Service: name, Desired: d}
		}
	}
	for _, co := range snap.Containers(ns) {
		if !rpc.IsReplica(co.Labels) {
			continue
		}
		r := rows[co.Namespace+"/"+co.Service]
		if r == nil {
			r = &ServiceRow{Namespace: co.Namespace, Service: co.Service, Desired: "-"}
			rows[co.Namespace+"/"+co.Service] = r
		}
		r.Total++
		if co.State == "running" {
			r.Running++
		}
		if co.Ready {
			r.Ready++
		} else {
			r.NotReadyOn = append(r.NotReadyOn, MachineName(snap, co.MachineID))
		}
		r.Restarts += co.RestartCount
	}
	out := make([]ServiceRow, 0, len(rows))
	for _, r := range rows {
		for _, c := range snap.LostReplicas(r.Namespace, r.Service) {
			r.DownOn = append(r.DownOn, MachineName(snap, c.MachineID))
		}
		r.Judge()
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace < out[j].Namespace || out[i].Namespace == out[j].Namespace && out[i].Service < out[j].Service
	})
	return out
}

// MachineName returns a Machine's name in the snapshot, else its id.
func MachineName(snap deploy.Snapshot, id string) string {
	if m, ok := snap.Machine(id); ok && m.Name != "" {
		return m.Name
	}
	return id
}
