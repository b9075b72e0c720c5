package daemon

import (
	"context"
	"encoding/json"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/store"
)

// Observation timing: Docker events trigger a rescan after a short
// debounce; a periodic rescan catches anything an event stream missed.
const (
	observeDebounce = 100 * time.Millisecond
	rescanPeriod    = 30 * time.Second
)

// observeLoop publishes this Machine's own containers and volumes rows
// from Docker, and nothing about other Machines (DESIGN.md bet 6).
func (d *Daemon) observeLoop(ctx context.Context) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		d.log.Error("observe: docker client", "error", err)
		return
	}
	defer cli.Close()
	trigger := make(chan struct{}, 1)
	go d.watchEvents(ctx, cli, trigger)
	tick := time.NewTicker(rescanPeriod)
	defer tick.Stop()
	for {
		if err := d.rescan(ctx, cli); err != nil && ctx.Err() == nil {
			d.log.Warn("observe: rescan", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-trigger:
			time.Sleep(observeDebounce)
		}
	}
}

func (d *Daemon) watchEvents(ctx context.Context, cli *client.Client, trigger chan<- struct{}) {
	for ctx.Err() == nil {
		f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("type", string(events.VolumeEventType)))
		msgs, errs := cli.Events(ctx, events.ListOptions{Filters: f})
	loop:
		for {
			select {
			case <-ctx.Done():
				return
			case <-msgs:
				select {
				case trigger <- struct{}{}:
				default:
				}
			case err := <-errs:
				d.log.Debug("observe: docker events ended; reconnecting", "error", err)
				break loop
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// rescan makes this Machine's containers and volumes rows match Docker,
// writing only rows whose body changed.
func (d *Daemon) rescan(ctx context.Context, cli *client.Client) error {
	a := d.act()
	if a == nil {
		return nil
	}
	self := d.record().ID
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return err
	}
	want := map[string]store.ContainerBody{}
	for _, c := range list {
		want[c.ID] = containerBody(c)
	}
	if err := syncOwned(ctx, a.store.Containers(), self, want); err != nil {
		return err
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		return err
	}
	wantVol := map[string]store.VolumeBody{}
	for _, v := range vols.Volumes {
		wantVol[self+"/"+v.Name] = store.VolumeBody{Name: v.Name, Driver: v.Driver}
	}
	return syncOwned(ctx, a.store.Volumes(), self, wantVol)
}

// syncOwned makes the rows owner wrote in t exactly want.
func syncOwned[B any](ctx context.Context, t store.Table[B], owner string, want map[string]B) error {
	rows, err := t.ListByOwner(ctx, owner)
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, r := range rows {
		b, _ := json.Marshal(r.Body)
		have[r.Key] = string(b)
		if _, ok := want[r.Key]; !ok {
			if _, err := t.Delete(ctx, r.Key); err != nil {
				return err
			}
		}
	}
	for k, body := range want {
		b, _ := json.Marshal(body)
		if h, ok := have[k]; ok && h == string(b) {
			continue
		}
		if _, err := t.Put(ctx, store.Row[B]{Key: k, Owner: owner, Body: body}); err != nil {
			return err
		}
	}
	return nil
}

// containerBody is a container as its Machine reports it. Environment
// values never leave the Machine: only names are published.
func containerBody(c container.Summary) store.ContainerBody {
	b := store.ContainerBody{
		Image: c.Image,
		State: c.State,
	}
	if c.Labels != nil {
		b.Service = c.Labels["ployz.service"]
		b.Deployment = c.Labels["ployz.deployment"]
	}
	if c.NetworkSettings != nil {
		if n, ok := c.NetworkSettings.Networks["ployz"]; ok && n != nil {
			b.IP = n.IPAddress
		}
	}
	return b
}
