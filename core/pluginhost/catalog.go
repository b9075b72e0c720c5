package pluginhost

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Provider is the healthy plugin serving one capability, or the
// on-demand plugin that serves it once started (Conn nil).
type Provider struct {
	// Capability is the capability name.
	Capability string
	// Plugin is the serving plugin's name.
	Plugin string
	// APIVersion is the plugin-API version negotiated with it.
	APIVersion uint32
	// Conn reaches the plugin; build the kind's gRPC client on it. It is
	// nil while an on-demand plugin is not running (Host.Call starts it).
	Conn *grpc.ClientConn
}

// Catalog maps capability names to the healthy plugins serving them. Only
// the host writes it; anyone may read it.
type Catalog struct {
	mu    sync.RWMutex
	byCap map[string]Provider
	// known remembers every capability a plugin ever served in this host's
	// life, so a refusal can say "down" rather than "never served".
	known map[string]string
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{byCap: map[string]Provider{}, known: map[string]string{}}
}

// publish sets a plugin's capabilities to caps, replacing what it
// published before in one step (an on-demand plugin's advertised set
// becomes its running set without a gap). A capability another plugin
// already serves stays with that plugin; the conflicts are returned. conn
// is nil for an on-demand plugin that is not running.
func (c *Catalog) publish(plugin string, api uint32, caps []string, conn *grpc.ClientConn) (conflicts []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.byCap {
		if p.Plugin == plugin && !slices.Contains(caps, name) {
			delete(c.byCap, name)
		}
	}
	for _, name := range caps {
		if p, ok := c.byCap[name]; ok && p.Plugin != plugin {
			conflicts = append(conflicts, fmt.Sprintf("%s (served by %s)", name, p.Plugin))
			continue
		}
		c.byCap[name] = Provider{Capability: name, Plugin: plugin, APIVersion: api, Conn: conn}
		c.known[name] = plugin
	}
	return conflicts
}

// withdraw removes every capability the plugin serves and returns them.
func (c *Catalog) withdraw(plugin string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []string
	for name, p := range c.byCap {
		if p.Plugin == plugin {
			delete(c.byCap, name)
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	return gone
}

// Lookup returns the provider of capability, or a refusal carrying
// details.capability: Unavailable when the plugin that served it is down,
// Unimplemented when no plugin here has served it.
func (c *Catalog) Lookup(capability string) (Provider, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p, ok := c.byCap[capability]; ok {
		return p, nil
	}
	if plugin, ok := c.known[capability]; ok {
		return Provider{}, CapabilityError(codes.Unavailable, capability,
			fmt.Sprintf("capability %s is unavailable: plugin %q is not healthy", capability, plugin))
	}
	return Provider{}, CapabilityError(codes.Unimplemented, capability,
		fmt.Sprintf("capability %s is not served on this machine", capability))
}

// Capabilities returns the sorted names of every capability served now.
func (c *Catalog) Capabilities() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.byCap))
	for name := range c.byCap {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
