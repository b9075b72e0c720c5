package dns

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/ployz/ployz/sdk/serving"
)

// DefaultSpecPath is where a DNS plugin keeps the spec it was configured
// with (sdk.KeepConfig), so a restart serves it without waiting for ployzd.
const DefaultSpecPath = "/run/ployz/dns.json"

// CapServe is the capability a DNS plugin advertises: it answers Internal
// DNS names on the spec's listen address.
const CapServe = "ployz.dns.serve.v1"

// Spec is the dns.json document. Field names are frozen; new fields are
// optional with a default, and unknown fields are ignored.
type Spec struct {
	// Machine is this Machine's id: its Containers come first for
	// .nearest.internal names.
	Machine string `json:"machine"`
	// Listen is the UDP and TCP address queries arrive on, the Machine
	// gateway's port 53, e.g. "10.210.3.1:53". It must lie inside Subnet.
	Listen string `json:"listen"`
	// Subnet is this Machine's container subnet, e.g. "10.210.3.0/24".
	Subnet string `json:"subnet"`
	// Upstreams are "ip:port" resolvers non-internal names are forwarded
	// to, in order ("ip" alone means port 53).
	Upstreams []string `json:"upstreams,omitempty"`
	// StoreAPI is the replicated store's API: its unix socket (what
	// ployzd hands out, /run/ployz/store/api.sock) or a host:port.
	StoreAPI string `json:"store_api"`
	// StoreTokenFile holds a bearer token for a store reached over TCP;
	// empty sends none (the socket needs none).
	StoreTokenFile string `json:"store_token_file,omitempty"`
	// Network is the Cluster network (the mesh), e.g. "10.210.0.0/16".
	// Non-internal names are forwarded only for queries from Subnet,
	// Network or loopback; others are refused, so the DNS is no open
	// resolver. Empty means Subnet and loopback only.
	Network string `json:"network,omitempty"`
	// TrustedMachinesFile is the trust list ployzd keeps
	// (serving.TrustedMachines, /run/ployz/trusted-machines.json): a
	// Container address is taken only from a Machine whose machines row
	// ployzd accepted, with that row's subnet. Empty, or no file there
	// yet: the machines table alone is taken, as before the list existed.
	TrustedMachinesFile string `json:"trusted_machines_file,omitempty"`
}

// Config is a validated Spec in typed form.
type Config struct {
	Spec
	ListenAddr    netip.AddrPort
	SubnetPrefix  netip.Prefix
	UpstreamAddrs []netip.AddrPort
	// NetworkPrefix is Network parsed; invalid when empty.
	NetworkPrefix netip.Prefix
}

// ParseSpec decodes and validates a dns.json document. Errors name the
// offending field; a spec that does not validate must not be served.
func ParseSpec(b []byte) (Config, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Config{}, fmt.Errorf("dns spec: %w", err)
	}
	c := Config{Spec: s}
	if strings.TrimSpace(s.Machine) == "" {
		return Config{}, fieldErr("machine", "is empty")
	}
	var err error
	if c.SubnetPrefix, err = netip.ParsePrefix(s.Subnet); err != nil || !c.SubnetPrefix.Addr().Is4() {
		return Config{}, fieldErr("subnet", fmt.Sprintf("%q is not an IPv4 prefix", s.Subnet))
	}
	c.SubnetPrefix = c.SubnetPrefix.Masked()
	if c.ListenAddr, err = netip.ParseAddrPort(s.Listen); err != nil || c.ListenAddr.Port() == 0 {
		return Config{}, fieldErr("listen", fmt.Sprintf("%q is not an ip:port", s.Listen))
	}
	c.ListenAddr = netip.AddrPortFrom(c.ListenAddr.Addr().Unmap(), c.ListenAddr.Port())
	if !c.SubnetPrefix.Contains(c.ListenAddr.Addr()) {
		return Config{}, fieldErr("listen", fmt.Sprintf("%s is outside subnet %s", s.Listen, c.SubnetPrefix))
	}
	for i, u := range s.Upstreams {
		ap, err := parseUpstream(u)
		if err != nil {
			return Config{}, fieldErr(fmt.Sprintf("upstreams[%d]", i), err.Error())
		}
		c.UpstreamAddrs = append(c.UpstreamAddrs, ap)
	}
	if s.Network != "" {
		if c.NetworkPrefix, err = netip.ParsePrefix(s.Network); err != nil {
			return Config{}, fieldErr("network", fmt.Sprintf("%q is not a prefix", s.Network))
		}
		c.NetworkPrefix = c.NetworkPrefix.Masked()
	}
	if s.TrustedMachinesFile != "" && !filepath.IsAbs(s.TrustedMachinesFile) {
		return Config{}, fieldErr("trusted_machines_file", fmt.Sprintf("%q is not an absolute path", s.TrustedMachinesFile))
	}
	if err := serving.CheckStoreAPI(s.StoreAPI); err != nil {
		return Config{}, fieldErr("store_api", err.Error())
	}
	return c, nil
}

// LoadSpec reads and parses the spec at path.
func LoadSpec(path string) (Config, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("dns spec: %w", err)
	}
	c, err := ParseSpec(b)
	if err != nil {
		return Config{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, b, nil
}

func parseUpstream(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Port() != 0 {
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%q is not an ip or ip:port", s)
}

func fieldErr(field, msg string) error {
	return fmt.Errorf("dns spec: field %q %s", field, msg)
}
