package serving

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/sdk/dns"
)

// DNSPlugin is Internal DNS, the dns plugin (plugins/dns); the daemon hands it the
// spec derived here. Its contract is package sdk/dns.
const DNSPlugin = "dns"

// resolvConf is where the upstream resolvers are read.
const resolvConf = "/etc/resolv.conf"

// DNSPlugin describes Internal DNS as a serving plugin.
func (f *Feature) DNSPlugin() Plugin {
	return Plugin{Name: DNSPlugin, What: "internal dns", Spec: f.DNSSpec,
		Check: func(b []byte) error { _, err := dns.ParseSpec(b); return err },
		Kept:  []string{f.files.DNSSpec, f.host.TrustedMachinesPath()}}
}

// DNSSpec derives the DNS spec from the Machine record and /etc/resolv.conf.
func (f *Feature) DNSSpec() ([]byte, error) {
	rec := f.host.Machine()
	gw, err := meshaddr.Gateway(rec.Subnet)
	if err != nil {
		return nil, fmt.Errorf("dns spec: field \"listen\": %w", err)
	}
	ups, err := readUpstreams(resolvConf)
	if err != nil {
		f.log.Warn("no upstream resolvers; only internal names will resolve", "error", err)
	}
	spec := dns.Spec{
		Machine:   rec.ID,
		Listen:    netip.AddrPortFrom(gw, 53).String(),
		Subnet:    rec.Subnet.Masked().String(),
		Upstreams: ups,
		StoreAPI:  f.host.StoreSocket(),
	}
	spec.Network = feature.ClusterNetwork(rec).String()
	spec.TrustedMachinesFile = f.host.TrustedMachinesPath()
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
