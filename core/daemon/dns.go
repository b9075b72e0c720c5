package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/sdk/dns"
)

// Internal DNS is the dns plugin (plugins/dns); the daemon hands it the
// spec it derives here. Its contract is package sdk/dns.
const (
	DNSPlugin  = "dns"
	resolvConf = "/etc/resolv.conf"
)

// dnsPlugin describes Internal DNS as a serving plugin.
func (d *Daemon) dnsPlugin() servingPlugin {
	return servingPlugin{name: DNSPlugin, what: "internal dns", spec: d.dnsSpec,
		check: func(b []byte) error { _, err := dns.ParseSpec(b); return err },
		kept:  []string{dnsSpecFile, d.trustedMachinesPath()}}
}

func (d *Daemon) dnsLoop(ctx context.Context) { d.keepConfigured(ctx, d.dnsPlugin()) }
func (d *Daemon) stopDNS(ctx context.Context) { d.stopServing(ctx, d.dnsPlugin()) }

// dnsSpec derives the DNS spec from the Machine record and /etc/resolv.conf.
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
		Machine:   rec.ID,
		Listen:    netip.AddrPortFrom(gw, 53).String(),
		Subnet:    rec.Subnet.Masked().String(),
		Upstreams: ups,
		StoreAPI:  d.storeSocket(),
	}
	spec.Network = clusterNetwork(rec).String()
	spec.TrustedMachinesFile = d.trustedMachinesPath()
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
