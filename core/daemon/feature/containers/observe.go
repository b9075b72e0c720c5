package containers

// The observe loop: this Machine's containers and volumes rows follow
// Docker, written by this Machine only (docs/architecture.md bet 6).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Rows is where the observe loop publishes: the daemon.
type Rows interface {
	// RowStore is the store client while this Machine is a Cluster
	// member that is not resetting, nil otherwise: a Machine being
	// forgotten never re-inserts its rows.
	RowStore() *sdkstore.Client
	// MachineID is this Machine's ID, the owner of the rows.
	MachineID() string
	// CredentialSealer seals basic_auth hashes in the rows, or is nil
	// to write them plain.
	CredentialSealer(ctx context.Context, st *sdkstore.Client) *sdkstore.Sealer
}

// rowStore is Rows' store, nil without Rows.
func (o *Ops) rowStore() *sdkstore.Client {
	if o.rows == nil {
		return nil
	}
	return o.rows.RowStore()
}

// sealCredentials seals b's basic_auth hashes when s is set.
func sealCredentials(id string, b *sdkstore.ContainerBody, s *sdkstore.Sealer) error {
	if s == nil {
		return nil
	}
	return ingress.SealCredentials(id, b, s)
}

// Observation timing: Docker events trigger a rescan after a short
// debounce; a periodic rescan catches anything an event stream missed.
const (
	observeDebounce = 100 * time.Millisecond
	rescanPeriod    = 30 * time.Second
	// rescanGap spaces event-triggered rescans during a burst (a deploy
	// starting many Containers): each inspects every Container, competing
	// with the starts for Docker, while the rows that routing depends on
	// are written at once by the event itself (containerEvent) and by
	// start_container.
	rescanGap = time.Second
)

// ObserveLoop publishes this Machine's own containers and volumes rows
// from Docker, and nothing about other Machines (docs/architecture.md bet 6).
func (o *Ops) ObserveLoop(ctx context.Context) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		o.log.Error("observe: docker client", "error", err)
		return
	}
	defer cli.Close()
	// Docker's client negotiates its API version on first use and Events
	// reads that version unguarded (a data race with rescan's first
	// request): the event stream gets a client of its own.
	evCli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		o.log.Error("observe: docker client", "error", err)
		return
	}
	defer evCli.Close()
	trigger := make(chan struct{}, 1)
	go o.watchEvents(ctx, evCli, trigger)
	tick := time.NewTicker(rescanPeriod)
	defer tick.Stop()
	var readyChanged <-chan struct{} // a notify verdict changes no Docker state
	if o.docker != nil {
		o.restore(ctx)
		readyChanged = o.ready.changed
	}
	for {
		last := time.Now()
		if err := o.rescan(ctx, cli); err != nil && ctx.Err() == nil {
			o.log.Warn("observe: rescan", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-readyChanged:
		case <-trigger:
			time.Sleep(max(observeDebounce, rescanGap-time.Since(last)))
		}
	}
}

func (o *Ops) watchEvents(ctx context.Context, cli *client.Client, trigger chan<- struct{}) {
	for ctx.Err() == nil {
		f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("type", string(events.VolumeEventType)))
		msgs, errs := cli.Events(ctx, events.ListOptions{Filters: f})
	loop:
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-msgs:
				if !changesRows(m) {
					continue // a healthcheck's exec every second, an attach…: nothing to rescan
				}
				o.containerEvent(ctx, cli, m)
				select {
				case trigger <- struct{}{}:
				default:
				}
			case err := <-errs:
				o.log.Debug("observe: docker events ended; reconnecting", "error", err)
				break loop
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// changesRows reports whether a Docker event can change what rescan
// records: a Container's lifecycle or health, or a volume's. Execs
// (every healthcheck runs one), attaches, resizes and copies cannot.
func changesRows(m events.Message) bool {
	if m.Type != events.ContainerEventType {
		return true
	}
	switch m.Action {
	case events.ActionCreate, events.ActionStart, events.ActionRestart, events.ActionDie, events.ActionKill,
		events.ActionOOM, events.ActionStop, events.ActionPause, events.ActionUnPause, events.ActionDestroy,
		events.ActionRename, events.ActionUpdate:
		return true
	}
	return strings.HasPrefix(string(m.Action), string(events.ActionHealthStatus))
}

// containerEvent acts on an event that may end a Container's readiness
// before the debounced rescan: the Container's own row is rewritten at
// once, so every proxy following the store stops routing to it within
// milliseconds (a crashed replica is routed around, not waited out).
func (o *Ops) containerEvent(ctx context.Context, cli client.APIClient, m events.Message) {
	if m.Type != events.ContainerEventType {
		return
	}
	o.exits.event(m)
	if !withdraws(m.Action) {
		return
	}
	if _, ok := m.Actor.Attributes[rpc.LabelNamespace]; !ok {
		return // not a Service Container: nothing routes to it
	}
	if err := o.publishAfterEvent(ctx, cli, m.Actor.ID, m.Action); err != nil && ctx.Err() == nil {
		o.log.Warn("observe: publish after "+string(m.Action), "container", feature.Short(m.Actor.ID), "error", err)
	}
}

// withdraws reports whether a container event can end readiness (or, for
// a start or a healthy verdict, bring it back).
func withdraws(a events.Action) bool {
	switch a {
	case events.ActionDie, events.ActionOOM, events.ActionKill, events.ActionStop, events.ActionPause, events.ActionStart:
		return true
	}
	return strings.HasPrefix(string(a), string(events.ActionHealthStatus))
}

// publishLocks order the publishes of one Container (the event loop's
// and start_container's): inspection and write under one lock, so the
// later inspection's state is the one written last.
var publishLocks [32]sync.Mutex

func publishLock(id string) *sync.Mutex {
	h := 0
	for i := 0; i < len(id); i++ {
		h = h*31 + int(id[i])
	}
	return &publishLocks[(h&0x7fffffff)%len(publishLocks)]
}

// PublishContainer rewrites one Service Container's row from Docker now.
func (o *Ops) PublishContainer(ctx context.Context, cli client.APIClient, id string) error {
	return o.publishAfterEvent(ctx, cli, id, "")
}

// publishAfterEvent is PublishContainer after Docker's event action. A
// process's end (die, oom) is written as not ready even when Docker
// restarted the Container before this inspection (a loaded host delivers
// the event late): the row's readers see the crash, then the restart,
// never a row that stayed ready across it.
func (o *Ops) publishAfterEvent(ctx context.Context, cli client.APIClient, id string, action events.Action) error {
	mu := publishLock(id)
	mu.Lock()
	defer mu.Unlock()
	st := o.rowStore()
	if st == nil {
		return nil
	}
	in, err := cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil // removed: the rescan deletes its row
	}
	if err != nil {
		return fmt.Errorf("inspect container %s: %w", feature.Short(id), err)
	}
	b := ServiceRow(o.observe(in, ""), in)
	b.Session = feature.Session()
	if err := sealCredentials(in.ID, &b, o.rows.CredentialSealer(ctx, st)); err != nil {
		return err
	}
	if ended(action) && b.Ready {
		down := b
		down.Ready = false
		if _, err := st.Containers().Put(ctx, sdkstore.Row[sdkstore.ContainerBody]{Key: in.ID, Owner: o.rows.MachineID(), Body: down}); err != nil {
			return err
		}
	}
	_, err = st.Containers().Put(ctx, sdkstore.Row[sdkstore.ContainerBody]{Key: in.ID, Owner: o.rows.MachineID(), Body: b})
	return err
}

// ended reports whether an event says the Container's process ended (a
// kill event may be a signal it survives, such as SIGHUP).
func ended(a events.Action) bool { return a == events.ActionDie || a == events.ActionOOM }

// rescan makes this Machine's containers and volumes rows match Docker,
// writing only rows whose body changed.
func (o *Ops) rescan(ctx context.Context, cli *client.Client) error {
	st := o.rowStore()
	if st == nil {
		return nil // being forgotten: never re-insert its rows
	}
	self := o.rows.MachineID()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return err
	}
	want := map[string]sdkstore.ContainerBody{}
	exist := map[string]bool{}
	for _, c := range list {
		exist[c.ID] = true
	}
	o.ready.prune(exist)
	creds := o.rows.CredentialSealer(ctx, st)
	for _, c := range list {
		b, err := o.containerBody(ctx, cli, c)
		if err != nil {
			return err
		}
		if err := sealCredentials(c.ID, &b, creds); err != nil {
			return err
		}
		want[c.ID] = b
	}
	if err := syncOwned(ctx, st.Containers(), self, want); err != nil {
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
	return syncOwned(ctx, store.Volumes(st), self, wantVol)
}

// syncOwned makes the rows owner wrote in t exactly want.
func syncOwned[B any](ctx context.Context, t sdkstore.Table[B], owner string, want map[string]B) error {
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
		if _, err := t.Put(ctx, sdkstore.Row[B]{Key: k, Owner: owner, Body: body}); err != nil {
			return err
		}
	}
	return nil
}

// containerBody is a container as its Machine reports it. Environment
// values never leave the Machine: only names are published. A Service
// Container (label ployz.namespace) is inspected for its health, readiness
// and identity; any other container is reported from its summary.
func (o *Ops) containerBody(ctx context.Context, cli client.APIClient, c container.Summary) (sdkstore.ContainerBody, error) {
	b := sdkstore.ContainerBody{Image: c.Image, State: c.State, ImageID: c.ImageID, CreatedAt: c.Created}
	if len(c.Names) > 0 {
		b.Name = strings.TrimPrefix(c.Names[0], "/")
	}
	if c.Labels != nil {
		b.Service = c.Labels[rpc.LabelService]
		b.Deployment = c.Labels[rpc.LabelDeployment]
	}
	network := o.network
	if c.NetworkSettings != nil {
		if n, ok := c.NetworkSettings.Networks[network]; ok && n != nil {
			b.IP = n.IPAddress
		}
	}
	if _, ok := c.Labels[rpc.LabelNamespace]; !ok {
		return b, nil
	}
	in, err := cli.ContainerInspect(ctx, c.ID)
	if cerrdefs.IsNotFound(err) {
		return b, nil // removed since the listing; the next scan drops it
	}
	if err != nil {
		return b, fmt.Errorf("inspect container %s: %w", feature.Short(c.ID), err)
	}
	b = ServiceRow(o.observe(in, ""), in)
	b.Session = feature.Session()
	return b, nil
}
