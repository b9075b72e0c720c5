// Command badhandshake is a plugin built against a handshake the host does
// not speak (go-plugin protocol version 99), as a plugin built for a future
// SDK would be. pluginhost's tests check the host refuses it clearly.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/ployz/ployz/sdk"
)

func main() {
	hs := sdk.Handshake
	hs.ProtocolVersion = 99
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		Plugins: sdk.PluginSet(&sdk.Plugin{
			Name: "bad", Kind: sdk.KindDNS, Version: "9.9.9",
		}),
		GRPCServer: plugin.DefaultGRPCServer,
	})
}
