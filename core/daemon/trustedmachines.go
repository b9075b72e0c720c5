package daemon

import (
	"path/filepath"
	"reflect"

	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/sdk/serving"
)

// trustedMachinesPath is the trust list ployzd hands Internal DNS and the
// Ingress Proxy (their specs' trusted_machines_file): they cannot verify
// machines rows themselves (plugins import no core), so they take a
// Container address only from a Machine this list holds, with its subnet.
func (d *Daemon) trustedMachinesPath() string {
	return filepath.Join(d.cfg.RunDir, serving.TrustedFileName)
}

// trustedOf is the trust list of verdicts: per Machine, the subnet and
// phase of the row consumers act on (Verdict.Use: the row itself when
// accepted, the last accepted one when a newer row is refused). A Machine
// with no accepted row is left out.
func trustedOf(vs []trust.Verdict) serving.TrustedMachines {
	t := serving.TrustedMachines{Machines: map[string]serving.TrustedMachine{}}
	for _, r := range trust.Accepted(vs) {
		t.Machines[r.Key] = serving.TrustedMachine{Subnet: r.Body.Subnet, Phase: r.Body.Phase}
	}
	return t
}

// trustedWriter rewrites the trust list when the verdicts change what it
// says, and on its first call: a file left by the previous ployzd may
// hold Machines since removed.
type trustedWriter struct {
	path string
	last *serving.TrustedMachines
}

// write brings the file up to date with vs; a failure is retried on the
// next call.
func (w *trustedWriter) write(vs []trust.Verdict) error {
	t := trustedOf(vs)
	if w.last != nil && reflect.DeepEqual(t, *w.last) {
		return nil
	}
	if err := serving.WriteTrusted(w.path, t); err != nil {
		return err
	}
	w.last = &t
	return nil
}
