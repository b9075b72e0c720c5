package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/go-units"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumes"
	"github.com/ployz/ployz/sdk/volume"
)

// DriverZFS is the compose volume driver that declares a Provisioned
// Volume (a ZFS dataset held by the volume-zfs plugin).
const DriverZFS = "ployz-zfs"

// declaredVolumes are a compose file's ployz-zfs volumes by key.
type declaredVolumes map[string]ProvisionedVolume

// list is d sorted by key.
func (d declaredVolumes) list() []ProvisionedVolume {
	var out []ProvisionedVolume
	for _, pv := range d {
		out = append(out, pv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// provisionedVolumes reads the top-level volumes with driver ployz-zfs.
// raw is the file's model before normalization, which tells a name:
// the file sets from the one compose fills in (<project>_<key>).
func provisionedVolumes(ns string, vols types.Volumes, raw map[string]any) (declaredVolumes, error) {
	out := declaredVolumes{}
	for key, v := range vols {
		if v.Driver != DriverZFS {
			if _, ok := v.Extensions[volprotect.Extension]; ok {
				return nil, fmt.Errorf("volumes.%s.%s: only a Provisioned Volume (driver: %s) is protected on a schedule", key, volprotect.Extension, DriverZFS)
			}
			continue
		}
		pv, err := provisionedVolume(ns, key, v, explicitName(raw, key))
		if err != nil {
			return nil, fmt.Errorf("volumes.%s.%w", key, err)
		}
		out[key] = pv
	}
	names := map[string]string{}
	for _, pv := range out.list() {
		if other, ok := names[pv.Name]; ok {
			return nil, fmt.Errorf("volumes.%s.name: %q is volumes.%s's too", pv.Key, pv.Name, other)
		}
		names[pv.Name] = pv.Key
	}
	return out, nil
}

func provisionedVolume(ns, key string, v types.VolumeConfig, named bool) (ProvisionedVolume, error) {
	pv := ProvisionedVolume{Key: key, Name: ns + "-" + key}
	if named {
		pv.Name = v.Name
	}
	if err := volume.ValidName(pv.Name); err != nil {
		return ProvisionedVolume{}, fmt.Errorf("name: %w", err)
	}
	for opt, val := range v.DriverOpts {
		if opt != "size" {
			return ProvisionedVolume{}, fmt.Errorf("driver_opts.%s: %s takes only size", opt, DriverZFS)
		}
		n, err := volume.ParseSize(val)
		if err != nil {
			return ProvisionedVolume{}, fmt.Errorf("driver_opts.size: %w", err)
		}
		pv.SizeBytes = n
	}
	for k, x := range v.Extensions {
		if k != volprotect.Extension {
			continue
		}
		p, err := volprotect.Parse(x)
		if err != nil {
			return ProvisionedVolume{}, fmt.Errorf("%s.%w", k, err)
		}
		pv.Protect = &p
	}
	return pv, nil
}

// explicitName reports whether the file itself gives volumes.<key> a name.
func explicitName(raw map[string]any, key string) bool {
	vols, _ := raw["volumes"].(map[string]any)
	v, _ := vols[key].(map[string]any)
	_, ok := v["name"]
	return ok
}

// newVolume is a Provisioned Volume a plan creates.
type newVolume struct {
	ProvisionedVolume
	machine MachineState
}

// volumesToCreate are the Provisioned Volumes svc mounts that app
// declares with a size and that no observed Machine holds as the
// Writer.
func volumesToCreate(app App, svc Service, snap Snapshot) []ProvisionedVolume {
	var out []ProvisionedVolume
	for _, pv := range app.Provisioned {
		if pv.SizeBytes == 0 || !slices.Contains(svc.Provisioned, pv.Name) {
			continue
		}
		if _, err := provisionedWriter(pv.Name, snap); errors.Is(err, errNoWriter) {
			out = append(out, pv)
		}
	}
	return out
}

// placeNewVolumes picks the Machine that creates svc's new volumes: an
// eligible Machine with a ZFS pool (the Writer's, when svc mounts a
// volume that exists), least loaded first. It refuses a name another
// Machine holds a copy of (a Mirror whose Writer is gone is restored,
// never replaced by an empty volume) and holds the Service while a
// Machine's volumes are unknown.
func placeNewVolumes(ns string, app App, svc Service, snap Snapshot, load map[string]int) ([]newVolume, error) {
	create := volumesToCreate(app, svc, snap)
	if len(create) == 0 {
		return nil, nil
	}
	for _, pv := range create {
		if err := checkUnheld(app, svc, snap, pv); err != nil {
			return nil, err
		}
	}
	probe := svc
	probe.Provisioned = slices.DeleteFunc(slices.Clone(svc.Provisioned), func(n string) bool {
		return slices.ContainsFunc(create, func(pv ProvisionedVolume) bool { return pv.Name == n })
	})
	ms, _, err := eligible(ns, probe, snap)
	if err != nil {
		return nil, err
	}
	var pooled []MachineState
	for _, m := range ms {
		if m.Labels[volume.PoolLabel] != "" {
			pooled = append(pooled, m)
		}
	}
	if len(pooled) == 0 {
		return nil, fmt.Errorf("volume %s: no eligible Machine (%s) has a ZFS pool to create it in: give one with `ployz machine update NAME --zfs-pool POOL`", create[0].Name, names(ms))
	}
	at := slices.MinFunc(pooled, func(a, b MachineState) int {
		if load[a.ID] != load[b.ID] {
			return load[a.ID] - load[b.ID]
		}
		return strings.Compare(a.Name, b.Name)
	})
	var out []newVolume
	for _, pv := range create {
		out = append(out, newVolume{ProvisionedVolume: pv, machine: at})
	}
	return out, nil
}

// checkUnheld refuses creating pv when a Machine holds a copy of it or
// when another Service mounts it too (their Containers could be created
// before the volume is).
func checkUnheld(app App, svc Service, snap Snapshot, pv ProvisionedVolume) error {
	var holders []string
	for _, m := range snap.Machines {
		if slices.Contains(m.Held, pv.Name) {
			holders = append(holders, m.Name)
		}
	}
	if len(holders) > 0 {
		return fmt.Errorf("volume locality: Provisioned Volume %s has no Writer but %s holds a copy: a deploy never creates an empty one in its place (`ployz volume ls %s`; `ployz volume restore %s --from MACHINE` makes a copy the Writer)",
			pv.Name, strings.Join(holders, ", "), pv.Name, pv.Name)
	}
	if len(snap.VolumesUnlisted) > 0 || !snap.VolumesListed {
		return fmt.Errorf("Provisioned Volume %s does not exist on the Machines that answered, and %s did not list their volumes: a copy may be there, so it is not created (retry when they answer, or `ployz volume create %s`)",
			pv.Name, unobservedNames(snap.VolumesUnlisted), pv.Name)
	}
	for _, other := range app.Services {
		if other.Name != svc.Name && slices.Contains(other.Provisioned, pv.Name) {
			return fmt.Errorf("volume %s does not exist yet and services %q and %q both mount it: create it first (`ployz volume create %s --machine MACHINE --size SIZE`)",
				pv.Name, svc.Name, other.Name, pv.Name)
		}
	}
	return nil
}

// withWriters is snap with m holding the Writer of vs, as the plan's
// create-volume rows will make it: the Service is then placed there.
func (s Snapshot) withWriters(vs []newVolume) Snapshot {
	s.Machines = slices.Clone(s.Machines)
	for _, v := range vs {
		for i := range s.Machines {
			if s.Machines[i].ID == v.machine.ID {
				s.Machines[i].Writers = append(slices.Clone(s.Machines[i].Writers), v.Name)
			}
		}
	}
	return s
}

// createVolumeRows are the plan rows creating vs, ahead of svc's
// Container rows on the same Machine.
func createVolumeRows(svc Service, vs []newVolume) []Row {
	var out []Row
	for _, v := range vs {
		out = append(out, Row{
			MachineID: v.machine.ID, Machine: v.machine.Name, Service: svc.Name, Op: OpCreateVolume,
			Volume: v.Name, SizeBytes: v.SizeBytes,
			Reason: fmt.Sprintf("Provisioned Volume %s (%s) does not exist: created here as its Writer", v.Name, units.BytesSize(float64(v.SizeBytes))),
		})
	}
	return out
}

// ObserveVolumes lists every Machine's Provisioned Volumes into snap when
// app declares one a plan may create (sized, no Writer observed), so the
// plan never creates a name a Machine holds a copy of. Per-Machine
// failures are recorded in VolumesUnlisted.
func ObserveVolumes(ctx context.Context, c Caller, app App, snap *Snapshot) error {
	need := false
	for _, svc := range app.Services {
		need = need || len(volumesToCreate(app, svc, *snap)) > 0 || writerMaybeDown(svc, *snap)
	}
	if !need {
		return nil
	}
	ms, err := volumes.List(ctx, c, rpc.Target{All: true})
	if err != nil {
		return err
	}
	idx := map[string]int{}
	for i, m := range snap.Machines {
		idx[m.ID] = i
	}
	for _, mv := range ms {
		i, ok := idx[mv.MachineID]
		switch {
		case mv.List == nil:
			snap.VolumesUnlisted = append(snap.VolumesUnlisted, Unobserved{MachineID: mv.MachineID, Name: mv.Machine, Reason: mv.Note()})
		case ok:
			for _, v := range mv.List.Volumes {
				snap.Machines[i].Held = append(snap.Machines[i].Held, v.Name)
			}
		}
	}
	snap.VolumesListed = true
	return nil
}

func unobservedNames(us []Unobserved) string {
	var parts []string
	for _, u := range us {
		n := u.Name
		if n == "" {
			n = u.MachineID
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n, u.Reason))
	}
	return strings.Join(parts, ", ")
}
