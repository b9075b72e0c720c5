package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/sdk/observe"
	sdkstore "github.com/ployz/ployz/sdk/store"
	"github.com/ployz/ployz/sdk/volume"
)

func (d *Daemon) routes() {
	for _, r := range []rpc.Route{
		rpc.Bind(rpc.Inspect, d.inspect),
		rpc.Bind(rpc.Initialize, d.initialize),
		rpc.Bind(rpc.Join, d.join),
		rpc.Bind(rpc.PublishMachine, d.publishMachine),
		rpc.Bind(rpc.ListMachines, d.listMachines),
		rpc.Bind(rpc.UpdateMachine, d.updateMachine),
		rpc.Bind(rpc.ForgetMachine, d.forgetMachine),
		rpc.Bind(rpc.Reset, d.reset),
		rpc.Bind(rpc.ReadMembership, d.membership),
		rpc.Bind(rpc.SaltSpecHashes, d.saltSpecHashes),
	} {
		d.rpc.Handle(r)
	}
	if d.ctrs == nil {
		d.ctrs = d.newContainers()
	}
	for _, r := range d.ctrs.Routes() {
		d.rpc.Handle(r)
	}
	d.featureRoutes()
	for _, r := range d.ctrs.Streams() {
		d.rpc.HandleStream(r)
	}
}

func (d *Daemon) inspect(ctx context.Context, _ rpc.None) (rpc.Inspection, error) {
	rec := d.record()
	k, err := d.publicKey()
	if err != nil {
		return rpc.Inspection{}, err
	}
	in := rpc.Inspection{ID: rec.ID, Name: rec.Name, Phase: rec.Phase, PublicKey: k.String(), RPCKey: d.rpcKey(),
		ManagementIP: meshaddr.ManagementIP(k).String(), Labels: rec.Labels,
		DaemonVersion: version.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Capabilities: d.rpc.Capabilities(), Endpoints: []string{},
		StoreEventsDropped: sdkstore.DroppedEvents(), Isolation: d.isolationView()}
	in.Hostname, _ = os.Hostname()
	for _, p := range d.plugins.Status() {
		in.Plugins = append(in.Plugins, rpc.PluginView{Name: p.Name, Kind: p.Kind, Version: p.Version, APIVersion: p.APIVersion,
			Lifecycle: string(p.Lifecycle), Health: string(p.Health), Error: p.Error, Capabilities: p.Capabilities,
			SHA256: p.SHA256, RunningSHA256: p.RunningSHA256, SwitchError: p.SwitchError, Pid: p.Pid, Restarts: p.Restarts,
			StoreEventsDropped: p.StoreEventsDropped, RefusedContainerRows: p.RefusedContainerRows})
	}
	if rec.Subnet.IsValid() {
		in.Subnet, in.Network = rec.Subnet.String(), rec.Network.String()
	}
	eps := rec.Endpoints
	if len(eps) == 0 {
		eps = discoverEndpoints(d.cfg.WireGuardPort)
	}
	for _, e := range eps {
		in.Endpoints = append(in.Endpoints, e.String())
	}
	if st, err := d.storeClient(); err == nil {
		if h, err := st.Health(ctx); err == nil {
			in.StoreVersions = h.Vector
		}
		if rows, err := st.Machines().List(ctx); err == nil {
			in.ClusterMachines = len(rows)
		}
	}
	return in, nil
}

// discoverEndpoints lists this host's global unicast addresses that peers
// may reach WireGuard on; container and mesh interfaces are skipped.
func discoverEndpoints(port int) []netip.AddrPort {
	ifs, _ := net.Interfaces()
	var out []netip.AddrPort
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || skipIface(ifc.Name) {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || !p.Addr().IsGlobalUnicast() || p.Addr().Is6() && p.Addr().IsPrivate() {
				continue
			}
			if p.Addr().Is4() {
				out = append(out, netip.AddrPortFrom(p.Addr(), uint16(port)))
			}
		}
	}
	return out
}

func skipIface(name string) bool {
	for _, p := range []string{"docker", "br-", "veth", "ployz"} {
		if len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}

func (d *Daemon) initialize(ctx context.Context, req rpc.InitializeRequest) (rpc.Inspection, error) {
	rec := d.record()
	if rec.Phase != machine.Uninitialized {
		return rpc.Inspection{}, rpc.Errorf(rpc.CodeConflict, "machine %s (%s) is already %s; `ployz machine rm` it or reset it first", rec.Name, rec.ID, rec.Phase).With("phase", rec.Phase)
	}
	network, subnet, eps, err := parseEnrollment(req.Name, req.Network, req.Subnet, req.Endpoints)
	if err != nil {
		return rpc.Inspection{}, err
	}
	if err := d.volumes().CheckPoolLabel(ctx, "labels."+volume.PoolLabel, req.Labels); err != nil {
		return rpc.Inspection{}, err
	}
	// The founding Machine mints the Cluster secret; joiners receive it.
	secret, err := sdkstore.NewClusterSecret()
	if err != nil {
		return rpc.Inspection{}, err
	}
	if err := d.saveClusterSecret(secret); err != nil {
		return rpc.Inspection{}, err
	}
	if d.trust != nil {
		// A new Cluster: every row is signed from the start.
		if err := d.trust.Replace(trust.Pins{Strict: true}); err != nil {
			return rpc.Inspection{}, err
		}
	}
	rec.Name, rec.Network, rec.Subnet, rec.Endpoints, rec.Labels = req.Name, network, subnet, eps, req.Labels
	rec.Phase = machine.Participating
	if err := d.setRecord(rec); err != nil {
		return rpc.Inspection{}, err
	}
	if err := d.activate(ctx); err != nil {
		return rpc.Inspection{}, rpc.Errorf(rpc.CodeUnavailable, "machine %s is participating but its Cluster parts did not start: %v", rec.Name, err)
	}
	st, _ := d.storeClient()
	if _, err := store.Cluster(st).Put(ctx, sdkstore.Row[store.ClusterBody]{Key: "network", Owner: rec.ID, Body: store.ClusterBody{Network: network.String(), ProtocolMajor: version.ProtocolMajor}}); err != nil {
		return rpc.Inspection{}, fmt.Errorf("write cluster network: %w", err)
	}
	if err := d.publishSelf(ctx); err != nil {
		return rpc.Inspection{}, err
	}
	return d.inspect(ctx, rpc.None{})
}

// saveClusterSecret replaces whatever secret a previous Cluster left (an
// uninitialized Machine has none of its own) with this Cluster's.
func (d *Daemon) saveClusterSecret(s sdkstore.ClusterSecret) error {
	path := store.ClusterSecretPath(d.cfg.DataDir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove a previous Cluster's secret: %w", err)
	}
	return store.WriteClusterSecretFile(path, s)
}

func parseEnrollment(name, network, subnet string, endpoints []string) (netip.Prefix, netip.Prefix, []netip.AddrPort, error) {
	if name == "" {
		return netip.Prefix{}, netip.Prefix{}, nil, rpc.InvalidField("name", "is empty")
	}
	n, err := netip.ParsePrefix(network)
	if err != nil {
		return n, n, nil, rpc.InvalidField("network", "%q is not a CIDR prefix", network)
	}
	s, err := netip.ParsePrefix(subnet)
	if err != nil || s.Bits() != 24 || !n.Contains(s.Addr()) {
		return n, s, nil, rpc.InvalidField("subnet", "%q is not a /24 inside %s", subnet, n)
	}
	var eps []netip.AddrPort
	for _, e := range endpoints {
		ap, err := netip.ParseAddrPort(e)
		if err != nil {
			return n, s, nil, rpc.InvalidField("endpoints", "%q is not host:port", e)
		}
		eps = append(eps, ap)
	}
	return n, s.Masked(), eps, nil
}

func (d *Daemon) publishMachine(ctx context.Context, req rpc.PublishMachineRequest) (rpc.MachinePublished, error) {
	st, err := d.storeClient()
	if err != nil {
		return rpc.MachinePublished{}, err
	}
	if req.ID == "" {
		return rpc.MachinePublished{}, rpc.InvalidField("id", "is empty")
	}
	k, err := wgtypes.ParseKey(req.PublicKey)
	if err != nil {
		return rpc.MachinePublished{}, rpc.InvalidField("public_key", "not a WireGuard key: %v", err)
	}
	if _, err := netip.ParsePrefix(req.Subnet); err != nil {
		return rpc.MachinePublished{}, rpc.InvalidField("subnet", "%q is not a prefix", req.Subnet)
	}
	body := sdkstore.MachineBody{Name: req.Name, PublicKey: req.PublicKey, Subnet: req.Subnet, Endpoints: req.Endpoints,
		ManagementIP: meshaddr.ManagementIP(k).String(), Phase: string(machine.Joining), RPCKey: req.RPCKey}
	if req.RPCKey != "" {
		if _, err := rpc.ParseRPCKey(req.RPCKey); err != nil {
			return rpc.MachinePublished{}, rpc.InvalidField("rpc_key", "%v", err)
		}
		// The entry vouches for the joiner's keys and signs its first
		// row; the joiner repeats the endorsement in its own rows.
		if d.trust != nil {
			if err := trust.SignEnrollment(d.identity, d.record().ID, req.ID, &body, time.Now()); err != nil {
				return rpc.MachinePublished{}, rpc.InvalidField("rpc_key", "%v", err)
			}
		}
	}
	// The joiner needs the Cluster secret to reach the store's gossip; it
	// travels back over this (operator-authorised) call, never in a row.
	// Read before the row is written: a refused call leaves nothing.
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		return rpc.MachinePublished{}, rpc.Errorf(rpc.CodeFailedPrecond, "this Machine has no Cluster secret to hand the joiner: %v", err)
	}
	if _, err := st.Machines().Put(ctx, sdkstore.Row[sdkstore.MachineBody]{Key: req.ID, Owner: req.ID, Body: body}); err != nil {
		return rpc.MachinePublished{}, err
	}
	h, err := st.Health(ctx)
	if err != nil {
		return rpc.MachinePublished{}, err
	}
	out := rpc.MachinePublished{StoreVersions: h.Vector, ClusterSecret: secret.Hex()}
	if d.trust != nil {
		// What this Machine trusts becomes the joiner's starting pins.
		pins := d.trust.Export(d.record().ID, d.publicKeyString())
		out.TrustedMachines, out.Endorsement = &pins, body.Endorsement
	}
	return out, nil
}

func (d *Daemon) join(ctx context.Context, req rpc.JoinRequest) (rpc.Inspection, error) {
	rec := d.record()
	network, subnet, eps, err := parseEnrollment(req.Name, req.Network, req.Subnet, req.Endpoints)
	if err != nil {
		return rpc.Inspection{}, err
	}
	if err := d.volumes().CheckPoolLabel(ctx, "labels."+volume.PoolLabel, req.Labels); err != nil {
		return rpc.Inspection{}, err
	}
	switch {
	case rec.Phase == machine.Joining && rec.Subnet == subnet:
		// A retry of the same join: resume waiting.
	case rec.Phase != machine.Uninitialized:
		return rpc.Inspection{}, rpc.Errorf(rpc.CodeConflict, "machine %s (%s) is already %s", rec.Name, rec.ID, rec.Phase).With("phase", rec.Phase)
	default:
		if len(req.Peers) == 0 {
			return rpc.Inspection{}, rpc.InvalidField("peers", "is empty: a joiner needs at least one Machine to reach")
		}
		for i, p := range req.Peers {
			if _, err := wgtypes.ParseKey(p.PublicKey); err != nil {
				return rpc.Inspection{}, rpc.InvalidField(fmt.Sprintf("peers[%d].public_key", i), "not a WireGuard key")
			}
		}
		secret, err := sdkstore.ParseClusterSecret(req.ClusterSecret)
		if err != nil {
			return rpc.Inspection{}, rpc.InvalidField("cluster_secret", "%v (the entry Machine hands it out in publish_machine)", err)
		}
		if err := d.saveClusterSecret(secret); err != nil {
			return rpc.Inspection{}, err
		}
		if err := d.importTrust(rec.ID, req.TrustedMachines, req.Endorsement); err != nil {
			return rpc.Inspection{}, err
		}
		rec.Name, rec.Network, rec.Subnet, rec.Endpoints, rec.Labels = req.Name, network, subnet, eps, req.Labels
		rec.JoinPeers, rec.TargetVersions = req.Peers, req.TargetVersions
		rec.Phase = machine.Joining
		if err := d.setRecord(rec); err != nil {
			return rpc.Inspection{}, err
		}
		if err := d.activate(ctx); err != nil {
			return rpc.Inspection{}, rpc.Errorf(rpc.CodeUnavailable, "machine %s is joining but its Cluster parts did not start: %v", rec.Name, err)
		}
	}
	wait := time.Duration(req.WaitSeconds) * time.Second
	if wait <= 0 {
		wait = 60 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	waitFor(wctx, func() bool { return d.record().Phase == machine.Participating })
	return d.inspect(ctx, rpc.None{})
}

func waitFor(ctx context.Context, cond func() bool) {
	wait(ctx, 200*time.Millisecond, cond) // the caller reports the phase reached
}

func (d *Daemon) listMachines(ctx context.Context, _ rpc.None) (rpc.MachineList, error) {
	st, err := d.storeClient()
	if err != nil {
		return rpc.MachineList{}, err
	}
	vs, err := d.machineVerdicts(ctx, st)
	if err != nil {
		return rpc.MachineList{}, err
	}
	members := d.members(ctx)
	rec := d.record()
	out := rpc.MachineList{ObserverID: rec.ID, ObserverName: rec.Name, ObservedAt: time.Now().UTC(), Machines: []rpc.MachineView{}}
	for _, vd := range vs {
		// A refused row is shown as the store holds it, flagged: this
		// Machine acts on its last accepted row instead.
		r := vd.Row
		v := rpc.MachineView{Trust: string(vd.Status), TrustReason: vd.Reason,
			ID: r.Key, Name: r.Body.Name, Phase: r.Body.Phase, Subnet: r.Body.Subnet, ManagementIP: r.Body.ManagementIP,
			PublicKey: r.Body.PublicKey, Endpoints: r.Body.Endpoints, Labels: r.Body.Labels, Version: r.Body.Version,
			Capabilities: r.Body.Capabilities, Membership: "unknown", UpdatedAt: r.UpdatedAt}
		if m, ok := members[r.Body.StoreSite]; ok && r.Body.StoreSite != "" {
			v.Membership, v.RTTMillis = m.State, m.RTTMillis
		}
		if r.Key == rec.ID {
			v.Membership = "self"
		}
		out.Machines = append(out.Machines, v)
	}
	return out, nil
}

func (d *Daemon) updateMachine(ctx context.Context, req rpc.UpdateMachineRequest) (rpc.Inspection, error) {
	rec := d.record()
	// A copy: the current record's map must not change under the loops
	// that compare it with this one (recordChange).
	rec.Labels = maps.Clone(rec.Labels)
	if req.Name != nil {
		if *req.Name == "" {
			return rpc.Inspection{}, rpc.InvalidField("name", "is empty")
		}
		rec.Name = *req.Name
	}
	for k, v := range req.LabelsAdd {
		if k == "" {
			return rpc.Inspection{}, rpc.InvalidField("labels_add", "a label key is empty")
		}
		if k == rpc.MachineLabelAccepts {
			if _, err := rpc.ParseAccepts([]string{v}); err != nil {
				return rpc.Inspection{}, rpc.InvalidField("labels_add."+k, "%v", err)
			}
		}
		if k == observe.BudgetLabel {
			if _, err := observe.ParseBudget(v); err != nil {
				return rpc.Inspection{}, rpc.InvalidField("labels_add."+k, "%v", err)
			}
		}
		if k == volume.PoolLabel {
			if err := d.volumes().CheckPoolLabel(ctx, "labels_add."+k, req.LabelsAdd); err != nil {
				return rpc.Inspection{}, err
			}
		}
		if rec.Labels == nil {
			rec.Labels = map[string]string{}
		}
		rec.Labels[k] = v
	}
	for _, k := range req.LabelsRemove {
		delete(rec.Labels, k)
	}
	if err := d.setRecord(rec); err != nil {
		return rpc.Inspection{}, err
	}
	if err := d.publishSelf(ctx); err != nil {
		return rpc.Inspection{}, err
	}
	if _, set := req.LabelsAdd[observe.BudgetLabel]; set || slices.Contains(req.LabelsRemove, observe.BudgetLabel) {
		obs := d.obs()
		d.serving().Apply(ctx, "observe budget", logStorePlugin(obs), metricsPlugin(obs))
	}
	if _, set := req.LabelsAdd[volume.PoolLabel]; set || slices.Contains(req.LabelsRemove, volume.PoolLabel) {
		d.serving().Apply(ctx, "zfs pool", volumePlugin(d.volumes()))
	}
	return d.inspect(ctx, rpc.None{})
}

func (d *Daemon) forgetMachine(ctx context.Context, req rpc.ForgetMachineRequest) (rpc.MachineForgotten, error) {
	if req.ID == "" {
		return rpc.MachineForgotten{}, rpc.InvalidField("id", "is empty")
	}
	st, err := d.storeClient()
	if err != nil {
		return rpc.MachineForgotten{}, err
	}
	stmts := []sdkstore.Statement{
		sdkstore.Stmt(`DELETE FROM machines WHERE id = ?`, req.ID),
		sdkstore.Stmt(`DELETE FROM containers WHERE owner = ?`, req.ID),
		sdkstore.Stmt(`DELETE FROM volumes WHERE owner = ?`, req.ID),
		sdkstore.Stmt(`DELETE FROM serving_acks WHERE id = ?`, req.ID),
	}
	if _, err := st.Exec(ctx, stmts...); err != nil {
		return rpc.MachineForgotten{}, err
	}
	return rpc.MachineForgotten{Forgotten: req.ID}, nil
}

// reset returns this Machine to uninitialized: durable first (phase
// resetting is saved), then the store, mesh and local state go. A daemon
// that restarts mid-reset finishes it.
func (d *Daemon) reset(ctx context.Context, _ rpc.None) (rpc.Inspection, error) {
	rec := d.record()
	rec.Phase = machine.Resetting
	if err := d.setRecord(rec); err != nil {
		return rpc.Inspection{}, err
	}
	in, err := d.inspect(ctx, rpc.None{})
	// The teardown stops the mesh this answer may be travelling over, so
	// it runs after the answer is on its way; the saved phase makes it
	// durable either way.
	go func() {
		time.Sleep(500 * time.Millisecond)
		d.deactivate()
		if err := d.finishReset(context.Background()); err != nil {
			d.log.Error("reset", "error", err)
		}
	}()
	return in, err
}

func (d *Daemon) finishReset(ctx context.Context) error {
	releaseMeshPorts()
	sv := d.serving()
	for _, p := range []servingfeature.Plugin{sv.DNSPlugin(), sv.IngressPlugin(), metricsPlugin(d.obs())} {
		sv.Stop(ctx, p)
	}
	if err := d.cfg.Units.Stop(ctx, StoreUnit); err != nil {
		d.log.Warn("reset: stop store", "error", err)
	}
	if err := d.cfg.Units.Stop(ctx, WireGuardUnit); err != nil {
		d.log.Warn("reset: stop wireguard", "error", err)
	}
	if err := mesh.RemoveKernelLink(mesh.DefaultInterface); err != nil {
		d.log.Warn("reset: remove kernel wireguard interface", "error", err)
	}
	if err := dockernet.RemoveInput(dockernet.Config{ChainPrefix: inputChainPrefix}); err != nil {
		d.log.Warn("reset: remove input filter", "error", err)
	}
	if err := dockernet.RemoveDirectRouting(dockernet.Config{ChainPrefix: inputChainPrefix}); err != nil {
		d.log.Warn("reset: remove direct routing exemption", "error", err)
	}
	if sub := d.record().Subnet; sub.IsValid() {
		if err := dockernet.RemoveForwarding(dockernet.Config{Subnet: sub, ChainPrefix: inputChainPrefix}); err != nil {
			d.log.Warn("reset: remove forwarding rules", "error", err)
		}
	}
	d.iso.forget()
	for _, p := range []string{filepath.Join(d.cfg.DataDir, "store"), filepath.Join(d.cfg.DataDir, "endpoints.json"), d.keyPath(),
		filepath.Join(d.cfg.DataDir, isolationFile),
		filepath.Join(d.cfg.DataDir, trust.PinsFile)} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if d.trust != nil {
		if err := d.trust.Forget(); err != nil {
			return err
		}
	}
	rec := machine.Record{ID: machine.NewID(), Phase: machine.Uninitialized}
	return d.setRecord(rec)
}

func (d *Daemon) peers(ctx context.Context) ([]rpc.Peer, error) {
	st, err := d.storeClient()
	if err != nil {
		rec := d.record()
		return []rpc.Peer{{ID: rec.ID, Name: rec.Name}}, nil
	}
	rows, err := d.trustedMachines(ctx, st)
	if err != nil {
		return nil, err
	}
	var out []rpc.Peer
	for _, r := range rows {
		addr := ""
		if ip, err := netip.ParseAddr(r.Body.ManagementIP); err == nil {
			addr = netip.AddrPortFrom(ip, uint16(d.cfg.RPCPort)).String()
		}
		out = append(out, rpc.Peer{ID: r.Key, Name: r.Body.Name, Address: addr, RPCKey: r.Body.RPCKey, Phase: r.Body.Phase})
	}
	if !slices.ContainsFunc(out, func(p rpc.Peer) bool { return p.ID == d.record().ID }) {
		rec := d.record()
		out = append(out, rpc.Peer{ID: rec.ID, Name: rec.Name})
	}
	return out, nil
}
