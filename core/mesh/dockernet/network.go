// Package dockernet gives the Machine's containers a place on the mesh: the
// Docker bridge network `ployz` on the Machine subnet, and the firewall rules
// that let containers on different Machines reach each other by IP.
//
// Addressing: the bridge owns the subnet's .1 as its gateway (containers use
// it as default gateway and, later, as DNS). The mesh interface carries the
// same .1 as a /32: Linux accepts one address on two interfaces, the bridge's
// /24 route keeps local containers on the bridge, and remote Machines reach
// .1 over the mesh whether or not the bridge exists yet.
package dockernet

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
)

// Defaults for Config fields left zero.
const (
	DefaultName   = "ployz"
	DefaultBridge = "ployz-br"
	DefaultMesh   = "ployz-wg"
	DefaultMTU    = 1420
	// ManagedLabel marks networks this package created.
	ManagedLabel = "dev.ployz.managed"
)

// Docker bridge driver options this package sets.
const (
	optBridge = "com.docker.network.bridge.name"
	optMTU    = "com.docker.network.driver.mtu"
	// optTrusted (Docker 28.2+) makes Docker itself accept direct-routed
	// packets from the mesh ahead of its raw-table drop, and is the only
	// exemption its nftables backend honours. Older Dockers ignore unknown
	// bridge options. Set at creation only, not compared by mismatch: an
	// existing network keeps working through the raw chain (raw.go), and
	// recreating it would mean moving its Containers.
	optTrusted = "com.docker.network.bridge.trusted_host_interfaces"
)

// DefaultClusterNetwork is the range mesh destinations come from; traffic to
// it is never masqueraded.
var DefaultClusterNetwork = netip.MustParsePrefix("10.210.0.0/16")

// Config names the Docker network and the interfaces its rules connect.
type Config struct {
	// Name is the Docker network name (default "ployz").
	Name string
	// Bridge is the Linux bridge interface name (default "ployz-br").
	Bridge string
	// Subnet is the Machine subnet; the bridge gateway is its .1.
	Subnet netip.Prefix
	// MeshInterface is the WireGuard interface (default "ployz-wg").
	MeshInterface string
	// MTU of the bridge (default 1420, the mesh MTU), so containers never
	// send packets the tunnel must fragment or drop.
	MTU int
	// ClusterNetwork is never masqueraded (default 10.210.0.0/16).
	ClusterNetwork netip.Prefix
	// ChainPrefix names the iptables chains (default "PLOYZ"), so tests can
	// run beside a real installation.
	ChainPrefix string
	// Logger receives what changed (default: null logger).
	Logger hclog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Bridge == "" {
		c.Bridge = DefaultBridge
	}
	if len(c.Bridge) > 15 {
		return c, fmt.Errorf("config bridge %q: longer than 15 bytes", c.Bridge)
	}
	if c.MeshInterface == "" {
		c.MeshInterface = DefaultMesh
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if !c.ClusterNetwork.IsValid() {
		c.ClusterNetwork = DefaultClusterNetwork
	}
	if !c.Subnet.IsValid() || !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 30 {
		return c, fmt.Errorf("config subnet %v: want an IPv4 prefix of /30 or wider", c.Subnet)
	}
	c.Subnet = c.Subnet.Masked()
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c, nil
}

// gateway is the subnet's .1.
func (c Config) gateway() netip.Addr { return c.Subnet.Addr().Next() }

// NewClient connects to the local Docker daemon (DOCKER_HOST or the default
// socket), negotiating the API version so older daemons (20.10) work.
func NewClient() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}

// EnsureNetwork makes the bridge network exist with the Machine subnet and
// gateway .1 and returns its ID. A network of that name with another subnet,
// gateway or bridge is recreated when no container uses it; otherwise the
// mismatch is an error, because moving running containers is not ours to do.
func EnsureNetwork(ctx context.Context, cli client.APIClient, cfg Config) (string, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	log := cfg.Logger.Named("dockernet")
	nw, err := cli.NetworkInspect(ctx, cfg.Name, network.InspectOptions{})
	switch {
	case err == nil:
		why := mismatch(nw, cfg)
		if why == "" {
			return nw.ID, nil
		}
		if len(nw.Containers) > 0 {
			return "", fmt.Errorf("network %s: %s, and %d containers are attached", cfg.Name, why, len(nw.Containers))
		}
		log.Info("recreating network", "network", cfg.Name, "reason", why)
		if err := cli.NetworkRemove(ctx, nw.ID); err != nil {
			return "", fmt.Errorf("network %s: remove outdated: %w", cfg.Name, err)
		}
	case !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("network %s: inspect: %w", cfg.Name, err)
	}
	resp, err := cli.NetworkCreate(ctx, cfg.Name, network.CreateOptions{
		Driver: "bridge",
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{
			Subnet:  cfg.Subnet.String(),
			Gateway: cfg.gateway().String(),
		}}},
		Options: map[string]string{optBridge: cfg.Bridge, optMTU: strconv.Itoa(cfg.MTU), optTrusted: cfg.MeshInterface},
		Labels:  map[string]string{ManagedLabel: "true"},
	})
	if err != nil {
		return "", fmt.Errorf("network %s: create on %s: %w", cfg.Name, cfg.Subnet, err)
	}
	log.Info("created network", "network", cfg.Name, "subnet", cfg.Subnet, "bridge", cfg.Bridge)
	return resp.ID, nil
}

// mismatch says how an existing network differs from cfg ("" when it fits).
func mismatch(nw network.Inspect, cfg Config) string {
	if nw.Driver != "bridge" {
		return fmt.Sprintf("driver is %s", nw.Driver)
	}
	if b := nw.Options[optBridge]; b != cfg.Bridge {
		return fmt.Sprintf("bridge is %q, want %q", b, cfg.Bridge)
	}
	if m := nw.Options[optMTU]; m != strconv.Itoa(cfg.MTU) {
		return fmt.Sprintf("mtu is %q, want %d", m, cfg.MTU)
	}
	if len(nw.IPAM.Config) != 1 {
		return fmt.Sprintf("has %d IPAM configs", len(nw.IPAM.Config))
	}
	ic := nw.IPAM.Config[0]
	if ic.Subnet != cfg.Subnet.String() || ic.Gateway != cfg.gateway().String() {
		return fmt.Sprintf("subnet %s gateway %s, want %s gateway %s", ic.Subnet, ic.Gateway, cfg.Subnet, cfg.gateway())
	}
	return ""
}

// RemoveNetwork deletes the network if it exists (used by reset and tests).
func RemoveNetwork(ctx context.Context, cli client.APIClient, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if err := cli.NetworkRemove(ctx, cfg.Name); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("network %s: remove: %w", cfg.Name, err)
	}
	return nil
}
