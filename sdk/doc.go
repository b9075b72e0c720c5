// Package sdk is the public contract between Ployz and its plugins.
//
// A Ployz plugin is a separate program that the Ployz daemon (ployzd) talks
// to over gRPC through hashicorp/go-plugin. Every plugin:
//
//   - speaks one handshake, [Handshake];
//   - answers the base service ployz.plugin.v1.Plugin: Info (name, plugin
//     version, supported plugin-API versions, capability names, JSON config
//     schema) and Configure (the API version the host chose, the config);
//   - serves the gRPC service of its kind (dns, volume, logstore, metrics)
//     from sdk/proto/ployz/plugin/<kind>/v1 for the capabilities it
//     advertises, and nothing it does not advertise. An ingress has no
//     service of its own: it reads its routes from the store (sdk/ingress,
//     sdk/store) and reports what it loaded in its status file.
//
// Everything a plugin imports from Ployz is under sdk/: the per-kind
// contracts (sdk/dns, sdk/ingress, sdk/volume, sdk/observe), the Serving
// Pointer rule (sdk/serving) and the store's rows and client (sdk/store).
//
// A plugin's main function builds a [Plugin] and calls [Main]. Main runs the
// plugin in one of two modes:
//
//   - managed (no arguments): ployzd starts the binary as a go-plugin child,
//     restarts it when it dies and stops it when ployzd stops;
//   - long-lived ("serve --socket PATH"): the plugin runs under its own
//     systemd unit, listens on PATH (by convention
//     /run/ployz/plugins/<name>.sock), writes its reattach record next to it
//     ([ReattachPath]) and keeps serving while ployzd stops, restarts or is
//     upgraded. ployzd attaches with go-plugin's ReattachConfig.
//
// The host picks the highest plugin-API version both sides list ([Negotiate]).
// Capability names ("ployz.dns.serve.v1") are what clients decide by; a name
// never changes meaning, new behaviour gets a new name.
//
// Package sdk/plugintest runs a real plugin binary against an in-process host
// in tests; sdk/example is a complete plugin with a walkthrough README.
package sdk

//go:generate sh proto/gen.sh
