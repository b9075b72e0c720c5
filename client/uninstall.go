package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ployz/ployz/core/footprint"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// PlanResetMachine plans `ployz machine reset`: the Machine leaves the
// Cluster (as `machine rm` does) and keeps its software, so it can be
// added again. The Entry Machine is refused while other Machines exist
// (reset it through one of them); the Cluster's only Machine resets
// itself and the Cluster ends (MachineRemoval.Last).
func (s *Session) PlanResetMachine(ctx context.Context, ref string) (*MachineRemoval, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return nil, err
	}
	p, err := rpc.Resolve(machinePeers(list), ref)
	if err != nil {
		return nil, err
	}
	if p.ID != list.ObserverID || len(list.Machines) != 1 {
		return s.PlanRemoveMachine(ctx, p.ID)
	}
	mr := &MachineRemoval{Machine: p, Last: true, Subnet: list.Machines[0].Subnet}
	s.askHolds(ctx, mr, rpc.Target{})
	return mr, nil
}

func machinePeers(list rpc.MachineList) []rpc.Peer {
	peers := make([]rpc.Peer, len(list.Machines))
	for i, m := range list.Machines {
		peers[i] = rpc.Peer{ID: m.ID, Name: m.Name}
	}
	return peers
}

// HostUninstall is a planned `ployz machine uninstall`: the host reached
// over SSH, and the Cluster removal that goes first when the host is a
// Machine of the Session's Cluster.
type HostUninstall struct {
	// Host is the ssh:// URL the footprint is removed through.
	Host string
	// Leave is nil when the host is in no Cluster (a host reset already,
	// or never initialized).
	Leave *MachineRemoval
	// shell opens the SSH shell the footprint is removed through (a
	// fake host in tests).
	shell func(ctx context.Context) (footprint.Shell, func(), error)
}

// HostOutcome is what `machine reset` and `machine uninstall` did (or,
// with --dry-run, would do): Cluster says how the Machine stands with the
// Cluster (left, ended: it was the only Machine, not-a-member, would-leave,
// or reset-failed), Items the uninstall's outcome per footprint item.
type HostOutcome struct {
	Host      string             `json:"host,omitempty"`
	Machine   string             `json:"machine,omitempty"`
	MachineID string             `json:"machine_id,omitempty"`
	Cluster   string             `json:"cluster"`
	Items     []footprint.Result `json:"items,omitempty"`
	Removed   int                `json:"removed"`
	Kept      int                `json:"kept"`
	Failed    int                `json:"failed"`
	Error     string             `json:"error,omitempty"`
	// ConnectionRemoved: the context's connection to the host went with
	// it, so no later command dials a host without Ployz.
	ConnectionRemoved bool `json:"connection_removed,omitempty"`
}

// Nothing reports an uninstall that found no Cluster to leave and no
// Ployz footprint to remove (volume data it keeps aside).
func (o HostOutcome) Nothing() bool {
	return o.Cluster == ClusterNotMember && len(footprint.Leftovers(o.Items, true)) == 0
}

// Cluster standings of a HostOutcome.
const (
	ClusterLeft      = "left"
	ClusterEnded     = "ended"
	ClusterNotMember = "not-a-member"
	ClusterWouldLeft = "would-leave"
	ClusterResetFail = "reset-failed"
)

// isDest says whether target names a host ([user@]host, ssh://...)
// rather than a Machine.
func isDest(target string) bool {
	return strings.Contains(target, "@") || strings.Contains(target, "://")
}

// whoAnswers bounds the call asking a host's ployzd who it is.
const whoAnswers = 10 * time.Second

// PlanUninstall resolves target: a Machine of the Cluster (name, id or
// prefix), reached over sshDest when given or else over the context's
// ssh:// connection to it; or a host ([user@]host, ssh://...) whose
// ployzd, when it answers, says which Machine it is. A host that is a
// Machine of another Cluster is refused: it must leave that one first.
func (s *Session) PlanUninstall(ctx context.Context, target, sshDest string) (*HostUninstall, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return nil, err
	}
	var want rpc.Peer
	dest := sshDest
	if isDest(target) {
		if dest != "" {
			return nil, fmt.Errorf("--ssh %q: the target %q is a host already", sshDest, target)
		}
		dest = target
	} else {
		p, err := rpc.Resolve(machinePeers(list), target)
		if err != nil {
			return nil, err
		}
		want = p
	}
	conn, err := s.hostConnection(ctx, want, dest)
	if err != nil {
		return nil, err
	}
	hu := &HostUninstall{Host: conn.URL, shell: func(ctx context.Context) (footprint.Shell, func(), error) {
		sh, done, err := s.sshShell(ctx, conn)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, cmd string) (string, error) { return sh(ctx, cmd, nil) }, done, nil
	}}
	in, answered := s.whoIs(ctx, conn)
	switch {
	case answered && want.ID != "" && in.ID != want.ID:
		return nil, fmt.Errorf("--ssh %s reaches Machine %s (%s), not %s", sshDest, in.Name, shortID(in.ID, 8), want.Name)
	case want.ID == "" && answered && in.Phase != machine.Uninitialized && !inList(list, in.ID):
		return nil, fmt.Errorf("host %s is Machine %s (%s) of a Cluster this context does not list (phase %s): remove it from that Cluster first",
			dest, in.Name, shortID(in.ID, 8), in.Phase)
	case want.ID == "" && answered && inList(list, in.ID):
		want = rpc.Peer{ID: in.ID, Name: in.Name}
	}
	if want.ID != "" {
		if hu.Leave, err = s.PlanResetMachine(ctx, want.ID); err != nil {
			return nil, err
		}
	}
	return hu, nil
}

func inList(list rpc.MachineList, id string) bool {
	for _, m := range list.Machines {
		if m.ID == id {
			return true
		}
	}
	return false
}

// hostConnection is the SSH connection to uninstall through: dest when
// given, else the context's connection that reaches Machine p.
func (s *Session) hostConnection(ctx context.Context, p rpc.Peer, dest string) (operator.Connection, error) {
	if dest != "" {
		url := operator.NormalizeDest(dest)
		if !strings.HasPrefix(url, "ssh://") {
			return operator.Connection{}, fmt.Errorf("host %q: uninstall needs SSH to the host ([user@]host or ssh://...)", dest)
		}
		return operator.Connection{URL: url, SSHKey: s.opts.SSHKey}, nil
	}
	if conn, ok := s.sshConnections(ctx)[p.ID]; ok {
		return conn, nil
	}
	return operator.Connection{}, fmt.Errorf("no ssh:// connection of this context reaches machine %s; pass --ssh [user@]host", p.Name)
}

// whoIs asks the host's ployzd who it is; answered is false when none
// answers (not installed, or stopped).
func (s *Session) whoIs(ctx context.Context, conn operator.Connection) (in rpc.Inspection, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, whoAnswers)
	defer cancel()
	c, err := operator.Dial(ctx, conn, s.opts.Dial)
	if err != nil {
		return in, false
	}
	defer c.Close()
	return in, rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.Inspect, rpc.None{}, &in) == nil && in.ID != ""
}

// Leave applies a planned reset (PlanResetMachine) and says how it went.
func (s *Session) Leave(ctx context.Context, mr *MachineRemoval) (HostOutcome, error) {
	out := HostOutcome{Machine: mr.Machine.Name, MachineID: mr.Machine.ID, Cluster: ClusterLeft}
	if mr.Last {
		out.Cluster = ClusterEnded
	}
	wasReset, err := s.ApplyRemoveMachine(ctx, mr, true)
	if !wasReset {
		out.Cluster = ClusterResetFail
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// Uninstall removes the host's footprint over SSH, after the Machine
// leaves the Cluster (when it is in it). Each item is reported; any
// failed item makes the result a *PartialError. A failed leave stops
// before the host is touched, unless the Machine was forgotten and only
// its reset failed: the uninstall then stops what the reset would have.
func (s *Session) Uninstall(ctx context.Context, hu *HostUninstall, o footprint.Options) (HostOutcome, error) {
	out := HostOutcome{Host: hu.Host, Cluster: ClusterNotMember}
	var leaveErr error
	if hu.Leave != nil {
		out.Machine, out.MachineID = hu.Leave.Machine.Name, hu.Leave.Machine.ID
		out.Cluster = ClusterWouldLeft
		if !o.DryRun {
			var left HostOutcome
			left, leaveErr = s.Leave(ctx, hu.Leave)
			out.Cluster = left.Cluster
			if leaveErr != nil && !IsPartial(leaveErr) {
				out.Error = leaveErr.Error()
				return out, leaveErr
			}
		}
	}
	sh, done, err := hu.shell(ctx)
	if err != nil {
		out.Error = err.Error()
		return out, fmt.Errorf("ssh %s: %w", hu.Host, err)
	}
	defer done()
	out.Items = footprint.Uninstall(ctx, sh, o)
	out.Removed, out.Kept, out.Failed = footprint.Count(out.Items, footprint.Removed), footprint.Count(out.Items, footprint.Kept), footprint.Count(out.Items, footprint.Failed)
	if out.Failed > 0 {
		err := partial(fmt.Errorf("uninstall on %s: %d of the footprint's items failed", hu.Host, out.Failed))
		out.Error = err.Error()
		return out, err
	}
	if !o.DryRun && s.name != "" && (hu.Leave == nil || !hu.Leave.Last) {
		out.ConnectionRemoved, _ = s.st.RemoveConnection(s.name, hu.Host) // bookkeeping only
	}
	return out, leaveErr
}
