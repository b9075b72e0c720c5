package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/internal/version"
)

// channelFlags are --release-source and --channel (docs/releases.md).
type channelFlags struct{ operator.ReleaseSetting }

const releaseSourceHelp = "release source (URL or directory) to install Ployz from (default: the context's, else $" + client.EnvReleaseSource + ")"

func (f *channelFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.Source, "release-source", "", releaseSourceHelp)
	c.Flags().StringVar(&f.Channel, "channel", "", "release channel on this CLI's line (default: the context's, else $"+client.EnvChannel+", else "+client.DefaultChannel+")")
}

// picked is the channel a command without a context uses: the flags,
// else the environment; nil when no source is named (the bundle beside
// the CLI is used instead).
func (f channelFlags) picked() *client.ReleaseChannel {
	rc, ok := client.PickChannel(f.ReleaseSetting, operator.ReleaseSetting{})
	if !ok {
		return nil
	}
	return &rc
}

// saved is picked with the Session's context's saved setting between
// the flags and the environment.
func (f channelFlags) saved(s *client.Session) (*client.ReleaseChannel, error) {
	rc, ok, err := s.SavedChannel(f.ReleaseSetting)
	if err != nil || !ok {
		return nil, err
	}
	return &rc, nil
}

// selfUpdateCommand is `ployz self-update`: this CLI replaced by the
// channel's, verified against the signed index.
func selfUpdateCommand() *cobra.Command {
	var f channelFlags
	cmd := &cobra.Command{
		Use:   "self-update",
		Short: "Replace this CLI with the channel's release for this computer (verified against the signed index)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rc, err := client.SelfUpdateChannel(g.context, f.ReleaseSetting)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			v, err := client.SelfUpdate(c.Context(), rc, exe)
			res := struct {
				From    string `json:"from"`
				To      string `json:"to"`
				Updated bool   `json:"updated"`
				Path    string `json:"path"`
			}{version.Version, v, err == nil, exe}
			if err != nil && !errors.Is(err, client.ErrUpToDate) {
				return err
			}
			return show(c, res, nil, func(w io.Writer) error {
				if !res.Updated {
					_, err := fmt.Fprintf(w, "ployz %s is already the %s channel's release (%s)\n", v, rc.Channel, rc.Source)
					return err
				}
				_, err := fmt.Fprintf(w, "ployz %s -> %s (%s)\n", res.From, res.To, exe)
				return err
			})
		},
	}
	f.add(cmd)
	return cmd
}
