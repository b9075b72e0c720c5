package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ployz/ployz/core/ingress"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
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
	ingressSpecName   = "ingress.json"
	ingressStatusName = "ingress-status.json"
)

func (d *Daemon) ingressSpecPath() string   { return filepath.Join(d.cfg.RunDir, ingressSpecName) }
func (d *Daemon) ingressStatusPath() string { return filepath.Join(d.cfg.RunDir, ingressStatusName) }

// ingressLoop publishes the ingress spec and unit once this Machine
// participates, retrying until both are in place.
func (d *Daemon) ingressLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if d.record().Phase == machine.Participating {
			err := d.ensureIngress(ctx)
			if err == nil {
				return
			}
			d.log.Warn("ingress not converged; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(dnsRetryEvery):
		}
	}
}

// ensureIngress writes ingress.json and the unit when they differ, reloads
// systemd after a unit change and (re)starts the unit, restarting it onto
// a new binary.
func (d *Daemon) ensureIngress(ctx context.Context) error {
	spec, err := d.ingressSpec()
	if err != nil {
		return err
	}
	if _, err := ingress.ParseSpec(spec); err != nil {
		return fmt.Errorf("derived %w", err)
	}
	if _, err := writeIfChanged(d.ingressSpecPath(), spec); err != nil {
		return fmt.Errorf("write %s: %w", d.ingressSpecPath(), err)
	}
	unitChanged, err := writeIfChanged(IngressUnitPath, []byte(ingressUnitFile(d.ingressSpecPath(), binaryDigest(IngressBinary))))
	if err != nil {
		return fmt.Errorf("write %s: %w", IngressUnitPath, err)
	}
	if unitChanged {
		if err := d.cfg.Units.Reload(ctx); err != nil {
			return err
		}
		d.log.Info("ingress unit written; restarting it", "unit", IngressUnit)
		return d.cfg.Units.Restart(ctx, IngressUnit)
	}
	return d.cfg.Units.Start(ctx, IngressUnit)
}

// stopIngress is the reset path: stop the unit, remove it, its spec and
// its status file.
func (d *Daemon) stopIngress(ctx context.Context) {
	if err := d.cfg.Units.Stop(ctx, IngressUnit); err != nil {
		d.log.Warn("reset: stop ingress", "error", err)
	}
	for _, p := range []string{d.ingressSpecPath(), d.ingressStatusPath(), IngressUnitPath} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("reset: remove", "path", p, "error", err)
		}
	}
	if err := d.cfg.Units.Reload(ctx); err != nil {
		d.log.Warn("reset: systemd reload", "error", err)
	}
}

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
Environment=PLOYZ_INGRESS_BINARY_SHA256=` + digest + `
ExecStart=` + IngressBinary + ` serve-ingress --spec ` + specPath + `
Restart=always
RestartSec=500ms
TimeoutStopSec=15s
LimitNOFILE=1048576
`
}
