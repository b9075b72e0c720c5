package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/sdk/dns"
)

// Internal DNS runs under a runtime unit the daemon writes; the daemon is
// the only writer of the unit and of its spec, and never stops it outside
// a reset (docs/architecture.md, "Serving outlives the daemon").
const (
	DNSUnit     = "ployz-dns.service"
	DNSUnitPath = "/run/systemd/system/" + DNSUnit
	DNSBinary   = "/usr/local/bin/ployz-dns"
	resolvConf  = "/etc/resolv.conf"
	dnsSpecName = "dns.json"
)

func (d *Daemon) dnsSpecPath() string { return filepath.Join(d.cfg.RunDir, dnsSpecName) }

// dnsUnit describes Internal DNS as a serving unit.
func (d *Daemon) dnsUnit() servingUnit {
	return servingUnit{what: "internal dns", unit: DNSUnit, unitPath: DNSUnitPath, specPath: d.dnsSpecPath(),
		spec:     d.dnsSpec,
		check:    func(b []byte) error { _, err := dns.ParseSpec(b); return err },
		unitFile: func() string { return dnsUnitFile(d.dnsSpecPath(), binaryDigest(DNSBinary)) }}
}

func (d *Daemon) dnsLoop(ctx context.Context) { d.keepServing(ctx, d.dnsUnit()) }
func (d *Daemon) stopDNS(ctx context.Context) { d.stopServing(ctx, d.dnsUnit()) }

// dnsSpec derives dns.json from the Machine record and /etc/resolv.conf.
func (d *Daemon) dnsSpec() ([]byte, error) {
	rec := d.record()
	gw, err := meshaddr.Gateway(rec.Subnet)
	if err != nil {
		return nil, fmt.Errorf("dns spec: field \"listen\": %w", err)
	}
	ups, err := readUpstreams(resolvConf)
	if err != nil {
		d.log.Warn("no upstream resolvers; only internal names will resolve", "error", err)
	}
	spec := dns.Spec{
		Machine:        rec.ID,
		Listen:         netip.AddrPortFrom(gw, 53).String(),
		Subnet:         rec.Subnet.Masked().String(),
		Upstreams:      ups,
		StoreAPI:       "127.0.0.1:" + strconv.Itoa(StoreAPIPort),
		StoreTokenFile: filepath.Join(d.cfg.DataDir, "store", "token"),
	}
	if rec.Network.IsValid() {
		spec.Network = rec.Network.Masked().String()
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	return append(b, '\n'), err
}

// readUpstreams returns resolv.conf's nameservers as ip:53, leaving out
// loopback stub resolvers (127.0.0.53, Docker's 127.0.0.11) unless they are
// all there is.
func readUpstreams(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseResolvConf(f), nil
}

func parseResolvConf(r io.Reader) []string {
	var all, remote []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(strings.SplitN(f[1], "%", 2)[0])
		if err != nil {
			continue
		}
		s := netip.AddrPortFrom(a, 53).String()
		all = append(all, s)
		if !a.IsLoopback() {
			remote = append(remote, s)
		}
	}
	if len(remote) > 0 {
		return remote
	}
	return all
}

// dnsUnitFile is the runtime unit. The binary's digest is part of it, so a
// new binary changes the unit and the daemon restarts DNS onto it.
func dnsUnitFile(specPath, digest string) string {
	return `# Written by ployzd; do not edit. Internal DNS outlives ployzd; only a reset stops it.
[Unit]
Description=Ployz Internal DNS
After=network-online.target docker.service
StartLimitIntervalSec=0

[Service]
Type=notify
NotifyAccess=main
Environment=PLOYZ_DNS_BINARY_SHA256=` + digest + `
ExecStart=` + DNSBinary + ` serve-dns --spec ` + specPath + `
Restart=always
RestartSec=500ms
RestartPreventExitStatus=78
FileDescriptorStoreMax=4
TimeoutStopSec=15s
`
}

func binaryDigest(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "missing"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable"
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeIfChanged writes b atomically unless path already holds it.
func writeIfChanged(path string, b []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return false, nil
	}
	return true, machine.WriteFileAtomic(path, b, 0o644)
}
