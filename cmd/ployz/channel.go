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

// ctxRelease is `ployz ctx release`: show or set where a context takes
// Ployz releases from.
func ctxRelease() *cobra.Command {
	var f channelFlags
	var clear bool
	cmd := &cobra.Command{
		Use:   "release [NAME]",
		Short: "Show or set the release source and channel a context installs and upgrades Ployz from",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(func(st *operator.Store) error {
				x, err := contextNamed(st, args)
				if err != nil {
					return err
				}
				rs, err := st.ReleaseSetting(x.Name)
				if err != nil {
					return err
				}
				if clear {
					rs = operator.ReleaseSetting{}
				}
				if f.Source != "" {
					rs.Source = f.Source
				}
				if f.Channel != "" {
					rs.Channel = f.Channel
				}
				if clear || f.Source != "" || f.Channel != "" {
					if rs.Source == "" && rs.Channel != "" {
						return fmt.Errorf("--channel %s: the context has no release source; pass --release-source too", rs.Channel)
					}
					if err := st.SetReleaseSetting(x.Name, rs); err != nil {
						return err
					}
				}
				return show(c, struct {
					Context string `json:"context"`
					operator.ReleaseSetting
				}{x.Name, rs}, nil, func(w io.Writer) error {
					if rs.Source == "" {
						_, err := fmt.Fprintf(w, "context %s: no release source (installs use the bundle beside the CLI)\n", x.Name)
						return err
					}
					_, err := fmt.Fprintf(w, "context %s: release source %s, channel %s\n", x.Name, rs.Source, first(rs.Channel, client.DefaultChannel))
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&f.Source, "release-source", "", "release source (URL or directory) to save")
	cmd.Flags().StringVar(&f.Channel, "channel", "", "channel to save")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the saved setting (before applying the flags)")
	return cmd
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
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
			rc, err := selfUpdateChannel(f)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			v, err := client.SelfUpdate(c.Context(), *rc, exe)
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

// selfUpdateChannel is the channel self-update follows: the flags, the
// current context's setting (when a context exists), the environment.
func selfUpdateChannel(f channelFlags) (*client.ReleaseChannel, error) {
	var saved operator.ReleaseSetting
	_ = withStore(func(st *operator.Store) error {
		x, err := operator.Resolve(st, g.context)
		if err == nil {
			saved, _ = st.ReleaseSetting(x.Name)
		}
		return nil
	})
	rc, ok := client.PickChannel(f.ReleaseSetting, saved)
	if !ok {
		return nil, fmt.Errorf("--release-source: no release source named (flag, `ployz ctx release`, or $%s)", client.EnvReleaseSource)
	}
	return &rc, nil
}
