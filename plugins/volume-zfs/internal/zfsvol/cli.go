package zfsvol

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// SpecPathEnv overrides volume.DefaultSpecPath (tests keep their spec in
// a temporary directory).
const SpecPathEnv = "PLOYZ_VOLUME_ZFS_SPEC"

// Main is the ployz-volume-zfs command line (sdk.Main's modes: serve,
// managed, info, --version). It reads the spec it was last given before
// serving, so a restart provisions from the same pool at once.
func Main(version string, args []string, stderr io.Writer) int {
	specPath := os.Getenv(SpecPathEnv)
	if specPath == "" {
		specPath = volume.DefaultSpecPath
	}
	m := &Manager{}
	if len(args) == 0 || args[0] == "serve" {
		spec, err := volume.LoadSpec(specPath)
		if err != nil {
			fmt.Fprintf(stderr, "ployz-volume-zfs: kept spec %s ignored: %v\n", specPath, err)
		}
		m.SetPool(spec.Pool)
	}
	sdk.Main(Plugin(version, m, specPath))
	return 0
}

// Plugin describes ployz-volume-zfs serving m; Configure takes a
// volume.Spec, switches m to its pool and keeps it at specPath.
func Plugin(version string, m *Manager, specPath string) *sdk.Plugin {
	return &sdk.Plugin{
		Name:         "volume-zfs",
		Kind:         sdk.KindVolume,
		Version:      version,
		Description:  "Provisioned Volumes as ZFS datasets (<pool>/ployz/volumes/<name>, with a quota) in the pool the Machine's " + volume.PoolLabel + " label names: create, remove, snapshot, send and receive.",
		Capabilities: volume.Capabilities,
		Register:     func(g *grpc.Server) { volumev1.RegisterVolumeServer(g, &Server{M: m}) },
		Configure: func(_ context.Context, _ uint32, config []byte) error {
			// An empty config (a host that attached before ployzd set one)
			// changes nothing: the kept pool stays.
			if t := bytes.TrimSpace(config); len(t) == 0 || string(t) == "null" {
				return nil
			}
			spec, err := volume.ParseSpec(config)
			if err != nil {
				return err
			}
			if _, err := sdk.KeepConfig(specPath, config); err != nil {
				return err
			}
			m.SetPool(spec.Pool)
			return nil
		},
	}
}
