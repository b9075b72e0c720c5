package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store/server"
)

func (d *Daemon) adminSocket() string { return filepath.Join(d.cfg.RunDir, "store-admin.sock") }

// storeSocket is the store API's unix socket (ployz-store.service's
// --api-socket): every process on the Machine reaches the store there.
func (d *Daemon) storeSocket() string { return filepath.Join(d.cfg.RunDir, "store", "api.sock") }

// adminCall sends one command to the store's admin socket and gathers the
// values it streams back before "Success".
func adminCall(ctx context.Context, socket string, cmd any) ([]json.RawMessage, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("store admin socket: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := server.WriteFrame(c, cmd); err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for {
		var f json.RawMessage
		if err := server.ReadFrame(c, &f); err != nil {
			return nil, fmt.Errorf("store admin socket: %w", err)
		}
		var s string
		if json.Unmarshal(f, &s) == nil && s == "Success" {
			return out, nil
		}
		var v struct {
			JSON  json.RawMessage       `json:"Json"`
			Error *struct{ Msg string } `json:"Error"`
		}
		if err := json.Unmarshal(f, &v); err != nil {
			return nil, fmt.Errorf("store admin socket: %w", err)
		}
		if v.Error != nil {
			return nil, fmt.Errorf("store admin: %s", v.Error.Msg)
		}
		out = append(out, v.JSON)
	}
}

// members returns the store's membership view keyed by member (Machine) ID.
func (d *Daemon) members(ctx context.Context) map[string]rpc.Member {
	out := map[string]rpc.Member{}
	states, err := adminCall(ctx, d.adminSocket(), map[string]string{"Cluster": "MembershipStates"})
	if err != nil {
		d.log.Debug("membership", "error", err)
		return out
	}
	for _, raw := range states {
		var m rpc.Member
		if json.Unmarshal(raw, &m) == nil {
			out[m.ID] = m
		}
	}
	rtts, _ := adminCall(ctx, d.adminSocket(), map[string]string{"Cluster": "Rtts"})
	for _, raw := range rtts {
		var m rpc.Member
		if json.Unmarshal(raw, &m) == nil {
			if have, ok := out[m.ID]; ok {
				have.RTTMillis = m.RTTMillis
				out[m.ID] = have
			}
		}
	}
	return out
}

func (d *Daemon) membership(ctx context.Context, _ rpc.None) (rpc.Membership, error) {
	st, err := d.storeClient()
	if err != nil {
		return rpc.Membership{}, err
	}
	ms := d.members(ctx)
	rows, _ := st.Machines().List(ctx)
	out := []rpc.Member{}
	for _, m := range ms {
		for _, r := range rows {
			if r.Body.StoreSite == m.ID {
				m.MachineID, m.MachineName = r.Key, r.Body.Name
			}
		}
		out = append(out, m)
	}
	return rpc.Membership{ObserverID: d.record().ID, Members: out}, nil
}
