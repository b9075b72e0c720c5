package serving

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// The Ingress Proxy is the ingress-caddy plugin (plugins/ingress-caddy);
// the daemon hands it the spec derived here. Its contract is package
// sdk/ingress.
const (
	IngressPlugin     = "ingress-caddy"
	IngressListen     = ":80"
	IngressListenTLS  = ":443"
	ingressStatusName = "ingress-status.json"
)

// IngressStatusPath is where the proxy writes its status.
func (f *Feature) IngressStatusPath() string {
	return filepath.Join(f.host.RunDir(), ingressStatusName)
}

// IngressPlugin describes the Ingress Proxy as a serving plugin. It runs
// only while this Machine's ployz.accepts leaves ingress in: a Machine
// without it binds neither 80 nor 443 nor any TCP route's port.
func (f *Feature) IngressPlugin() Plugin {
	return Plugin{Name: IngressPlugin, What: "ingress", Spec: f.IngressSpec,
		Check:    func(b []byte) error { _, err := ingress.ParseSpec(b); return err },
		Kept:     []string{f.files.IngressSpec, f.IngressStatusPath(), f.host.TrustedMachinesPath()},
		Accepted: f.acceptsIngress}
}

// acceptsIngress reports whether this Machine's own record accepts
// ingress (rpc.AcceptIngress; no ployz.accepts label accepts everything).
func (f *Feature) acceptsIngress() bool {
	return rpc.Accepts(f.host.Machine().Labels, rpc.AcceptIngress)
}

// IngressSpec derives the ingress spec from the Machine record.
func (f *Feature) IngressSpec() ([]byte, error) {
	rec := f.host.Machine()
	spec := ingress.Spec{
		Machine:    rec.ID,
		Listen:     IngressListen,
		StoreAPI:   f.host.StoreSocket(),
		StatusFile: f.IngressStatusPath(),
		StateDir:   filepath.Join(f.host.DataDir(), "ingress"),
	}
	// Certificate private keys are sealed with the Cluster key
	// (store.ClusterSecretPath).
	spec.ClusterSecretFile = filepath.Join(f.host.DataDir(), "store", "cluster-secret")
	// Container addresses are bounded by the network this Machine's own
	// record holds, not by what a machines row claims (docs/security.md).
	spec.Network = feature.ClusterNetwork(rec).String()
	// Only from Machines whose machines row this Machine accepted.
	spec.TrustedMachinesFile = f.host.TrustedMachinesPath()
	// HTTPS from the daemon's environment (ployz.service's
	// EnvironmentFile): PLOYZ_ACME_DIRECTORY unset is Let's Encrypt,
	// empty is off. ParseSpec checks the values.
	acme, err := ingress.ACMEFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if acme != nil {
		spec.ACME, spec.ListenTLS = acme, IngressListenTLS
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	return append(b, '\n'), err
}

// ingressStatus answers ingress_status from the status file the proxy
// writes; no file means the proxy has loaded nothing on this Machine. A
// Machine that does not accept ingress says so (Off) and nothing else. It
// needs the ingress plugin: while no healthy plugin serves CapHTTP it is
// refused naming that capability.
func (f *Feature) ingressStatus(context.Context, rpc.IngressStatusRequest) (ingress.Status, error) {
	self := f.host.Machine().ID
	if !f.acceptsIngress() {
		return ingress.Status{MachineID: self, Off: true}, nil
	}
	if err := f.needCapability(ingress.CapHTTP); err != nil {
		return ingress.Status{}, err
	}
	path := f.IngressStatusPath()
	st := ingress.Status{MachineID: self}
	fi, _ := os.Stat(path)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return ingress.Status{}, rpc.Errorf(rpc.CodeUnavailable, "read %s: %v", path, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return ingress.Status{}, rpc.Errorf(rpc.CodeUnavailable, "%s: %v", path, err)
	}
	st.MachineID = self
	st.Stale = fi != nil && time.Since(fi.ModTime()) > ingress.StaleAfterSeconds*time.Second
	return st, nil
}
