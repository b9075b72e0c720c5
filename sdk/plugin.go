package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// Plugin describes a plugin binary: what it says about itself in Info, how
// it takes its configuration, and which kind services it registers.
type Plugin struct {
	// Name is the plugin's short name, e.g. "dns" ([ValidName]).
	Name string
	// Kind is the plugin kind, one of the Kind constants or a third-party name.
	Kind string
	// Version is the plugin's own release string.
	Version string
	// Description is one sentence about what the plugin serves now.
	Description string
	// APIVersions are the plugin-API versions the binary speaks; empty means
	// SupportedAPIVersions.
	APIVersions []uint32
	// Capabilities are the capability names the binary really serves. Leave
	// it empty until a capability is implemented end to end.
	Capabilities []string
	// ConfigSchema is a JSON Schema for the config bytes; empty means none.
	ConfigSchema string
	// Configure receives the negotiated API version and the config. It may be
	// called more than once (a long-lived plugin gets it after every host
	// restart) and must be idempotent. Nil accepts any config and ignores it.
	Configure func(ctx context.Context, apiVersion uint32, config []byte) error
	// Register registers the kind services on the plugin's gRPC server.
	Register func(s *grpc.Server)
	// StoreEventsDropped, for a plugin that subscribes to the store,
	// reports the changes its subscriptions dropped as duplicate or out
	// of order, by table (sdk/store.DroppedEvents). Info answers it, so
	// the host shows it in `machine inspect` and the metrics.
	StoreEventsDropped func() map[string]int64
	// RefusedContainerRows, for a plugin that serves Containers (DNS,
	// ingress), reports how many ready containers rows its last serving
	// computation refused (serving.RefusedRows), so `machine inspect`
	// shows forged or stray rows.
	RefusedContainerRows func() int64
}

// Validate checks the description before serving, so a mistake shows up
// when the author first runs the binary rather than in a host's log.
func (p *Plugin) Validate() error {
	if err := ValidName(p.Name); err != nil {
		return fmt.Errorf("plugin field \"Name\": %w", err)
	}
	if p.Kind == "" {
		return fmt.Errorf("plugin %q: field \"Kind\" is empty", p.Name)
	}
	if p.Version == "" {
		return fmt.Errorf("plugin %q: field \"Version\" is empty", p.Name)
	}
	for i, c := range p.Capabilities {
		if err := ValidCapability(c); err != nil {
			return fmt.Errorf("plugin %q: field \"Capabilities[%d]\": %w", p.Name, i, err)
		}
	}
	if len(p.Capabilities) > 0 && p.Register == nil {
		return fmt.Errorf("plugin %q: field \"Register\" is nil, but it advertises capabilities", p.Name)
	}
	return nil
}

func (p *Plugin) apiVersions() []uint32 {
	if len(p.APIVersions) == 0 {
		return slices.Clone(SupportedAPIVersions)
	}
	return slices.Clone(p.APIVersions)
}

// baseServer answers ployz.plugin.v1.Plugin for a Plugin.
type baseServer struct {
	pluginv1.UnimplementedPluginServer
	p *Plugin
}

// Info answers from the Plugin description and the serving process's pid.
func (b *baseServer) Info(context.Context, *pluginv1.InfoRequest) (*pluginv1.InfoResponse, error) {
	info := &pluginv1.InfoResponse{
		Name:          b.p.Name,
		Kind:          b.p.Kind,
		PluginVersion: b.p.Version,
		Description:   b.p.Description,
		ApiVersions:   b.p.apiVersions(),
		Capabilities:  slices.Clone(b.p.Capabilities),
		ConfigSchema:  b.p.ConfigSchema,
		Pid:           int64(os.Getpid()),
	}
	if b.p.StoreEventsDropped != nil {
		info.StoreEventsDropped = b.p.StoreEventsDropped()
	}
	if b.p.RefusedContainerRows != nil {
		info.RefusedContainerRows = b.p.RefusedContainerRows()
	}
	return info, nil
}

// Configure refuses an API version the plugin never advertised, because
// that means the host negotiated against a different binary.
func (b *baseServer) Configure(ctx context.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	if !slices.Contains(b.p.apiVersions(), req.GetApiVersion()) {
		return nil, status.Errorf(codes.InvalidArgument, "plugin %q does not speak plugin-API version %d (speaks %v)",
			b.p.Name, req.GetApiVersion(), b.p.apiVersions())
	}
	if b.p.Configure != nil {
		if err := b.p.Configure(ctx, req.GetApiVersion(), req.GetConfig()); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "plugin %q: configure: %v", b.p.Name, err)
		}
	}
	return &pluginv1.ConfigureResponse{}, nil
}

// grpcPlugin adapts a Plugin to go-plugin. On the host side p is nil and
// GRPCClient hands back the raw connection, because a Ployz host talks to
// every kind through generated clients rather than a Go interface.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	p *Plugin
}

// GRPCServer registers the base service and the plugin's kind services.
func (g *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if g.p == nil {
		return errors.New("sdk: host-side plugin set cannot serve")
	}
	pluginv1.RegisterPluginServer(s, &baseServer{p: g.p})
	if g.p.Register != nil {
		g.p.Register(s)
	}
	return nil
}

// GRPCClient returns the connection itself.
func (g *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// PluginSet returns the go-plugin plugin set serving p.
func PluginSet(p *Plugin) plugin.PluginSet {
	return plugin.PluginSet{DispenseName: &grpcPlugin{p: p}}
}

// HostPluginSet returns the go-plugin plugin set a host passes in its
// ClientConfig.Plugins.
func HostPluginSet() plugin.PluginSet {
	return plugin.PluginSet{DispenseName: &grpcPlugin{}}
}

// Dispense connects a go-plugin client (started or reattached) and returns
// the gRPC connection to the plugin. Never call Close on the go-plugin
// protocol client of a long-lived plugin: it asks the plugin to shut down.
func Dispense(c *plugin.Client) (*grpc.ClientConn, error) {
	proto, err := c.Client()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	raw, err := proto.Dispense(DispenseName)
	if err != nil {
		return nil, fmt.Errorf("dispense %q: %w", DispenseName, err)
	}
	conn, ok := raw.(*grpc.ClientConn)
	if !ok {
		return nil, fmt.Errorf("dispense %q: got %T, want *grpc.ClientConn", DispenseName, raw)
	}
	return conn, nil
}
