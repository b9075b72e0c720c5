package daemon

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/sdk/store"
)

// machineVerdicts reads the machines table and decides each row against
// this Machine's pins (core/machine/trust). Everything that acts on a
// Machine's keys or addresses (WireGuard peers, RPC authentication and
// forwarding) reads rows through here.
func (d *Daemon) machineVerdicts(ctx context.Context, st *store.Client) ([]trust.Verdict, error) {
	rows, err := st.Machines().List(ctx)
	if err != nil {
		return nil, err
	}
	if d.trust == nil { // tests without an identity
		out := make([]trust.Verdict, len(rows))
		for i := range rows {
			out[i] = trust.Verdict{Row: rows[i], Status: trust.Signed, Use: &rows[i]}
		}
		return out, nil
	}
	return d.trust.Check(d.record().ID, rows), nil
}

// trustedMachines is the machines rows to act on, one per Machine.
func (d *Daemon) trustedMachines(ctx context.Context, st *store.Client) ([]store.Row[store.MachineBody], error) {
	vs, err := d.machineVerdicts(ctx, st)
	if err != nil {
		return nil, err
	}
	return trust.Accepted(vs), nil
}

// selfRowStale reports whether this Machine's own row in the store is not
// one it signed (forged, refused, or still the entry's enrollment row),
// or is gone while this Machine takes part in the Cluster (any member can
// delete a row), so it is written again at once. A Machine leaving the
// Cluster is no longer Participating and stays deleted.
func (d *Daemon) selfRowStale(vs []trust.Verdict) bool {
	rec := d.record()
	for _, v := range vs {
		if v.Row.Key == rec.ID {
			return d.trust != nil && v.Status != trust.Signed
		}
	}
	return rec.Phase == machine.Participating
}

// signSelf signs this Machine's own row body before it is written.
func (d *Daemon) signSelf(b *store.MachineBody) error {
	if d.trust == nil || d.identity == nil {
		return nil
	}
	return d.trust.SignOwn(d.identity, d.record().ID, b, time.Now())
}

// publicKeyString is this Machine's WireGuard public key, empty before
// it has one.
func (d *Daemon) publicKeyString() string {
	k, err := d.publicKey()
	if err != nil {
		return ""
	}
	return k.String()
}

// importTrust starts a joiner's pins from what its entry trusts and keeps
// the endorsement the entry made of it. Both arrive through enrollment,
// the operator's authenticated path. An entry too old to send pins leaves
// this Machine accepting unsigned rows until every row is signed.
func (d *Daemon) importTrust(self string, pins *trust.Pins, e *store.Endorsement) error {
	if d.trust == nil {
		return nil
	}
	p := trust.Pins{}
	if pins != nil {
		p = *pins
	}
	if err := d.trust.Replace(p); err != nil {
		return err
	}
	if e != nil {
		return d.trust.SetSelfEndorsement(self, e)
	}
	return nil
}
