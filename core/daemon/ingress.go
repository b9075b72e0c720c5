package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// The Ingress Proxy is the ingress-caddy plugin (plugins/ingress-caddy);
// the daemon hands it the spec it derives here. Its contract is package
// sdk/ingress.
const (
	IngressPlugin     = "ingress-caddy"
	IngressListen     = ":80"
	IngressListenTLS  = ":443"
	ingressStatusName = "ingress-status.json"
)

func (d *Daemon) ingressStatusPath() string { return filepath.Join(d.cfg.RunDir, ingressStatusName) }

// ingressPlugin describes the Ingress Proxy as a serving plugin. It runs
// only while this Machine's ployz.accepts leaves ingress in: a Machine
// without it binds neither 80 nor 443 nor any TCP route's port.
func (d *Daemon) ingressPlugin() servingPlugin {
	return servingPlugin{name: IngressPlugin, what: "ingress", spec: d.ingressSpec,
		check:    func(b []byte) error { _, err := ingress.ParseSpec(b); return err },
		kept:     []string{ingressSpecFile, d.ingressStatusPath(), d.trustedMachinesPath()},
		accepted: d.acceptsIngress}
}

// acceptsIngress reports whether this Machine's own record accepts
// ingress (rpc.AcceptIngress; no ployz.accepts label accepts everything).
func (d *Daemon) acceptsIngress() bool { return rpc.Accepts(d.record().Labels, rpc.AcceptIngress) }

func (d *Daemon) ingressLoop(ctx context.Context) { d.keepConfigured(ctx, d.ingressPlugin()) }
func (d *Daemon) stopIngress(ctx context.Context) { d.stopServing(ctx, d.ingressPlugin()) }

// ingressSpec derives the ingress spec from the Machine record.
func (d *Daemon) ingressSpec() ([]byte, error) {
	rec := d.record()
	spec := ingress.Spec{
		Machine:    rec.ID,
		Listen:     IngressListen,
		StoreAPI:   d.storeSocket(),
		StatusFile: d.ingressStatusPath(),
		StateDir:   filepath.Join(d.cfg.DataDir, "ingress"),
	}
	// Certificate private keys are sealed with the Cluster key
	// (store.ClusterSecretPath).
	spec.ClusterSecretFile = filepath.Join(d.cfg.DataDir, "store", "cluster-secret")
	// Container addresses are bounded by the network this Machine's own
	// record holds, not by what a machines row claims (docs/security.md).
	spec.Network = clusterNetwork(rec).String()
	// Only from Machines whose machines row this Machine accepted.
	spec.TrustedMachinesFile = d.trustedMachinesPath()
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
func (d *Daemon) ingressStatus(context.Context, rpc.IngressStatusRequest) (ingress.Status, error) {
	if !d.acceptsIngress() {
		return ingress.Status{MachineID: d.record().ID, Off: true}, nil
	}
	if err := d.needCapability(ingress.CapHTTP); err != nil {
		return ingress.Status{}, err
	}
	st := ingress.Status{MachineID: d.record().ID}
	fi, _ := os.Stat(d.ingressStatusPath())
	b, err := os.ReadFile(d.ingressStatusPath())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return ingress.Status{}, rpc.Errorf(rpc.CodeUnavailable, "read %s: %v", d.ingressStatusPath(), err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return ingress.Status{}, rpc.Errorf(rpc.CodeUnavailable, "%s: %v", d.ingressStatusPath(), err)
	}
	st.MachineID = d.record().ID
	st.Stale = fi != nil && time.Since(fi.ModTime()) > ingress.StaleAfterSeconds*time.Second
	return st, nil
}
