package daemon

import (
	"context"
	"path/filepath"
	"time"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/containers"
	"github.com/ployz/ployz/core/machine"
)

// newContainers builds the daemon's Container commands (feature/containers) from its config and record.
func (d *Daemon) newContainers() *containers.Ops {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		d.log.Error("containers: docker client", "error", err)
	}
	var api client.APIClient
	if cli != nil {
		api = cli
	}
	return containers.New(containers.Config{Docker: api, NotifyDir: filepath.Join(d.cfg.RunDir, "notify"),
		ActivateDir: filepath.Join(d.cfg.RunDir, "activate"), Launcher: containers.Launcher(d.cfg.DataDir),
		StatePath: filepath.Join(d.cfg.DataDir, "readiness.json"), Logger: d.log.Named("containers"),
		FilesDir: filepath.Join(d.cfg.DataDir, "files"), LogsHeld: d.obs().LogsHeld, Rows: featureHost{d},
		Facts: func() containers.Facts {
			rec := d.record()
			f := containers.Facts{MachineID: rec.ID, Name: rec.Name, Phase: rec.Phase, Labels: rec.Labels, Copies: d.volumes().CopyRoles()}
			if rec.Subnet.IsValid() {
				f.DNS = rec.Subnet.Masked().Addr().Next().String()
			}
			return f
		},
		// The row of a started Container is written at once, off the
		// reply path, so the Serving Pointer move that names it finds it
		// without waiting for the event loop's turn.
		Started: func(id string) {
			if cli == nil {
				return
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := d.ctrs.PublishContainer(ctx, cli, id); err != nil {
					d.log.Debug("publish started container", "container", feature.Short(id), "error", err)
				}
			}()
		}})
}

// runsLoop collects this Machine's one-off runs whose client is gone
// (containers.Ops.ReapLoop), while it participates.
func (d *Daemon) runsLoop(ctx context.Context) {
	d.ctrs.ReapLoop(ctx, func() bool { return d.record().Phase == machine.Participating })
}
