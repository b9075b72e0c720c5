package mesh

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/core/meshaddr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Defaults for Config fields left zero.
const (
	DefaultInterface        = "ployz-wg"
	DefaultListenPort       = 51820
	DefaultMTU              = 1420
	DefaultHandshakeTimeout = 15 * time.Second
	// DefaultStaleAfter is when an established peer counts as gone: WireGuard
	// rekeys every 2 minutes and keepalives run every 25 s, so 275 s without a
	// handshake means the endpoint stopped working.
	DefaultStaleAfter   = 275 * time.Second
	DefaultPollInterval = time.Second
	// Keepalive is the persistent keepalive set on every peer; it keeps NAT
	// mappings open and makes a silent peer handshake on its own.
	Keepalive = 25 * time.Second
)

// Config describes this Machine's end of the mesh.
type Config struct {
	// Interface is the WireGuard interface name (default "ployz-wg").
	Interface string
	// ListenPort is the UDP port WireGuard listens on (default 51820).
	ListenPort int
	// PrivateKey is this Machine's WireGuard key (see LoadOrCreateKey).
	PrivateKey wgtypes.Key
	// Subnet is this Machine's /24; its .1 goes on the interface.
	Subnet netip.Prefix
	// MTU of the interface (default 1420).
	MTU int
	// EndpointStatePath is the JSON file remembering the endpoint each peer
	// last handshook on; empty disables the memory.
	EndpointStatePath string
	// HandshakeTimeout is how long a freshly configured endpoint may go
	// without a handshake before the next candidate is tried (default 15 s).
	HandshakeTimeout time.Duration
	// StaleAfter is how old a handshake may get before an established
	// endpoint counts as dead and rotation resumes (default 275 s).
	StaleAfter time.Duration
	// PollInterval is how often Run checks handshakes (default 1 s).
	PollInterval time.Duration
	// Userspace forces wireguard-go even when the kernel module is present.
	Userspace bool
	// External means a wireguard-go device is served by another process
	// (`ployzd wireguard` under its own unit, see ServeDevice) so it
	// outlives the daemon: Up waits for it and adopts it instead of
	// creating one, and Close leaves it running.
	External bool
	// StateFile is where ServeDevice hands its peers to the process that
	// follows it on a kept TUN (empty: nothing is handed over).
	StateFile string
	// Logger receives the mesh's logs (default: a null logger).
	Logger hclog.Logger
}

// withDefaults fills zero fields and checks the ones that have no default.
func (c Config) withDefaults() (Config, error) {
	if c.Interface == "" {
		c.Interface = DefaultInterface
	}
	if len(c.Interface) > 15 {
		return c, fmt.Errorf("config interface %q: longer than 15 bytes", c.Interface)
	}
	if c.ListenPort == 0 {
		c.ListenPort = DefaultListenPort
	}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		return c, fmt.Errorf("config listen port %d: out of range", c.ListenPort)
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.PrivateKey == (wgtypes.Key{}) {
		return c, fmt.Errorf("config private key: missing")
	}
	if _, err := meshaddr.Gateway(c.Subnet); err != nil {
		return c, fmt.Errorf("config subnet: %w", err)
	}
	c.Subnet = c.Subnet.Masked()
	return c, nil
}
