package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// The Ingress Proxy runs under a runtime unit the daemon writes, like
// Internal DNS: the daemon is the only writer of the unit and its spec and
// never stops it outside a reset, so ingress keeps serving while ployzd
// restarts.
const (
	IngressUnit       = "ployz-ingress.service"
	IngressUnitPath   = "/run/systemd/system/" + IngressUnit
	IngressBinary     = "/usr/local/bin/ployz-ingress-caddy"
	IngressListen     = ":80"
	IngressListenTLS  = ":443"
	ingressSpecName   = "ingress.json"
	ingressStatusName = "ingress-status.json"
)

func (d *Daemon) ingressSpecPath() string   { return filepath.Join(d.cfg.RunDir, ingressSpecName) }
func (d *Daemon) ingressStatusPath() string { return filepath.Join(d.cfg.RunDir, ingressStatusName) }

// ingressUnit describes the Ingress Proxy as a serving unit.
func (d *Daemon) ingressUnit() servingUnit {
	return servingUnit{what: "ingress", unit: IngressUnit, unitPath: IngressUnitPath, specPath: d.ingressSpecPath(),
		spec:     d.ingressSpec,
		check:    func(b []byte) error { _, err := ingress.ParseSpec(b); return err },
		unitFile: func() string { return ingressUnitFile(d.ingressSpecPath(), binaryDigest(IngressBinary)) },
		extra:    []string{d.ingressStatusPath()}}
}

func (d *Daemon) ingressLoop(ctx context.Context) { d.keepServing(ctx, d.ingressUnit()) }
func (d *Daemon) stopIngress(ctx context.Context) { d.stopServing(ctx, d.ingressUnit()) }

// ingressSpec derives ingress.json from the Machine record.
func (d *Daemon) ingressSpec() ([]byte, error) {
	rec := d.record()
	spec := ingress.Spec{
		Machine:        rec.ID,
		Listen:         IngressListen,
		StoreAPI:       "127.0.0.1:" + strconv.Itoa(StoreAPIPort),
		StoreTokenFile: filepath.Join(d.cfg.DataDir, "store", "token"),
		StatusFile:     d.ingressStatusPath(),
		StateDir:       filepath.Join(d.cfg.DataDir, "ingress"),
	}
	// Certificate private keys are sealed with the Cluster key
	// (store.ClusterSecretPath).
	spec.ClusterSecretFile = filepath.Join(d.cfg.DataDir, "store", "cluster-secret")
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
// writes; no file means the proxy has loaded nothing on this Machine.
func (d *Daemon) ingressStatus(context.Context, json.RawMessage) (any, error) {
	st := rpc.IngressStatus{MachineID: d.record().ID}
	fi, _ := os.Stat(d.ingressStatusPath())
	b, err := os.ReadFile(d.ingressStatusPath())
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "read %s: %v", d.ingressStatusPath(), err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "%s: %v", d.ingressStatusPath(), err)
	}
	st.MachineID = d.record().ID
	st.Stale = fi != nil && time.Since(fi.ModTime()) > rpc.StaleAfterSeconds*time.Second
	return st, nil
}

// ingressUnitFile is the runtime unit; the binary's digest in it makes a
// new binary change the unit, so the daemon restarts ingress onto it.
func ingressUnitFile(specPath, digest string) string {
	return `# Written by ployzd; do not edit. The Ingress Proxy outlives ployzd; only a reset stops it.
[Unit]
Description=Ployz Ingress Proxy (Caddy)
After=network-online.target docker.service
StartLimitIntervalSec=0

[Service]
Type=simple
# The HTTP socket waits in the fd store across restarts (connections queue).
NotifyAccess=main
FileDescriptorStoreMax=2
Environment=PLOYZ_INGRESS_BINARY_SHA256=` + digest + `
ExecStart=` + IngressBinary + ` serve-ingress --spec ` + specPath + `
Restart=always
RestartSec=500ms
TimeoutStopSec=15s
LimitNOFILE=1048576
`
}
