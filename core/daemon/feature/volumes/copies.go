package volumes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/container"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// volumeCopies opens the copy records in the data directory once.
func (f *Feature) volumeCopies() (*volumecopy.Store, error) {
	f.copiesMu.Lock()
	defer f.copiesMu.Unlock()
	if f.copies != nil {
		return f.copies, nil
	}
	s, err := volumecopy.Open(filepath.Join(f.host.DataDir(), volumecopy.FileName))
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	f.copies = s
	return s, nil
}

// CopyRoles is every recorded copy, for admission; a file that cannot be
// read admits no Provisioned Volume mount.
func (f *Feature) CopyRoles() map[string]volumecopy.Copy {
	cs, err := f.volumeCopies()
	if err != nil {
		f.log.Warn("volume copies unreadable: Containers mounting Provisioned Volumes are refused", "error", err)
		return nil
	}
	return cs.All()
}

func (f *Feature) volumeCreated(name string) error {
	cs, err := f.volumeCopies()
	if err != nil {
		return err
	}
	c, err := cs.Created(name)
	if err == nil {
		f.log.Info("volume copy", "volume", name, "role", c.RoleOf(), "epoch", c.Epoch)
	}
	return err
}

func (f *Feature) volumeRemoved(name string) error {
	cs, err := f.volumeCopies()
	if err != nil {
		return err
	}
	return cs.Removed(name)
}

// setVolumeCopy takes one step of a Volume Run through the transition
// table (core/volumecopy) against this Machine's own copy and facts.
func (f *Feature) setVolumeCopy(ctx context.Context, req rpc.SetVolumeCopyRequest) (rpc.VolumeCopySet, error) {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.VolumeCopySet{}, rpc.InvalidField("volume", "%v", err)
	}
	if _, err := f.needPool(); err != nil {
		return rpc.VolumeCopySet{}, err
	}
	cs, err := f.volumeCopies()
	if err != nil {
		return rpc.VolumeCopySet{}, err
	}
	c, changed, err := cs.Set(ctx, req, func() (volumecopy.Facts, error) {
		facts, err := f.copyFacts(ctx, req.Volume)
		// Read in the volume's turn, as a task's admission is.
		facts.Busy = f.tasks.Running(req.Volume)
		return facts, err
	})
	if err != nil {
		return rpc.VolumeCopySet{}, err
	}
	if changed {
		f.log.Info("volume copy set", "volume", req.Volume, "gen", req.Gen, "role", c.RoleOf(), "epoch", c.Epoch, "floor", c.Floor)
	}
	// Also on a replay: a run retried after this failed finishes it.
	if err := f.matchReadOnly(ctx, req.Volume, c); err != nil {
		return rpc.VolumeCopySet{}, err
	}
	return rpc.VolumeCopySet{MachineID: f.host.MachineID(), Volume: req.Volume, Copy: c.View(), Changed: changed}, nil
}

// readOnlyFor is the ZFS readonly a copy's dataset must have: a Mirror
// refuses writes on disk too (not only through admission), the Writer
// takes them; none leaves the dataset as it is (set is false).
func readOnlyFor(c volumecopy.Copy) (readOnly, set bool) {
	switch c.RoleOf() {
	case volumecopy.Mirror:
		return true, true
	case volumecopy.Writer:
		return false, true
	}
	return false, false
}

// matchReadOnly sets the dataset's readonly to c's role. A plugin without
// SetReadOnly (older than this daemon) is logged and left: admission
// still keeps Containers off a Mirror.
func (f *Feature) matchReadOnly(ctx context.Context, name string, c volumecopy.Copy) error {
	ro, set := readOnlyFor(c)
	if !set {
		return nil
	}
	if !f.available(volume.CapReadOnly) {
		f.log.Warn("volume plugin cannot set readonly: the copy's dataset keeps its own", "volume", name, "role", c.RoleOf(), "capability", volume.CapReadOnly)
		return nil
	}
	err := f.callVolume(ctx, volume.CapReadOnly, func(ctx context.Context, vc volumev1.VolumeClient) error {
		_, err := vc.SetReadOnly(ctx, &volumev1.SetReadOnlyRequest{Name: name, ReadOnly: ro})
		return err
	})
	if err != nil {
		return fmt.Errorf("volume %q is now this Machine's %s but its dataset's readonly=%v was not set (run the step again): %w", name, c.RoleOf(), ro, err)
	}
	return nil
}

// refuseReceiveIntoWriter: a stream into the Writer would overwrite the
// live data the Writer's Containers write, so receive_volume refuses it.
func refuseReceiveIntoWriter(name string, c volumecopy.Copy) error {
	if c.RoleOf() != volumecopy.Writer {
		return nil
	}
	return rpc.Errorf(rpc.CodeFailedPrecond,
		"volume: this Machine's copy of volume %q is the Writer (epoch %d): a stream into it would overwrite its live data. Receive into a Machine with no copy or a Mirror (`ployz volume mirror %s --to MACHINE`), or make this copy a Mirror first",
		name, c.Epoch, name).With("field", "volume").With("copy", c.View())
}

// copyFacts reads whether the volume is here (the plugin) and which
// running Containers mount it (Docker).
func (f *Feature) copyFacts(ctx context.Context, name string) (volumecopy.Facts, error) {
	var facts volumecopy.Facts
	err := f.callVolume(ctx, volume.CapInspect, func(ctx context.Context, c volumev1.VolumeClient) error {
		_, err := c.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: name})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		facts.Exists = err == nil
		return err
	})
	if err != nil {
		return facts, err
	}
	docker := f.host.Docker()
	if docker == nil {
		return facts, rpc.Errorf(rpc.CodeUnavailable, "docker is not available on this Machine: cannot tell which Containers mount volume %q", name)
	}
	list, err := docker.ContainerList(ctx, container.ListOptions{})
	if err != nil {
		return facts, feature.DockerErr(err, "list containers")
	}
	for _, c := range list {
		for _, m := range c.Mounts {
			if n, ok := volume.MountedVolume(m.Source); ok && (n == name || n == "") {
				facts.MountedBy = append(facts.MountedBy, strings.TrimPrefix(firstName(c.Names), "/"))
			}
		}
	}
	return facts, nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
