package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/sdk/volume"
)

// volumeCommand is `ployz volume`: Provisioned Volumes (ZFS datasets in a
// Machine's pool, served by the volume-zfs plugin).
func volumeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "volume", Aliases: []string{"vol"}, Short: "Provisioned Volumes: ZFS datasets with a quota on a Machine's pool"}
	cmd.AddCommand(volumeCreate(), volumeLs(), volumeInspect(), volumeRm(), volumeSnapshot(), volumeSend(), volumeReceive(),
		volumeMirror(), volumeSync(), volumeMove(), volumeRelease(), volumeDeleteMirror(), volumeRestore(), volumeSetCopy(), volumeRunsCmd())
	return cmd
}

// zfsPoolFlagHelp is the help of --zfs-pool on machine init, add and update.
var zfsPoolFlagHelp = "ZFS pool the Machine's Provisioned Volumes live in (sets the label " + volume.PoolLabel + "; default: none, no Provisioned Volumes)"

func volumeCreate() *cobra.Command {
	var machine, size string
	cmd := &cobra.Command{
		Use:   "create NAME --machine M --size SIZE",
		Short: "Create a Provisioned Volume (a ZFS dataset with a quota) on a Machine",
		Long: `Create a Provisioned Volume on the Machine --machine names, in the ZFS pool
its label ` + volume.PoolLabel + ` names (` + "`ployz machine update M --zfs-pool NAME`" + `).
Volume names are unique in the Cluster: a name another Machine holds is
refused. The volume is mounted on the Machine at ` + "/var/lib/ployz/volumes/NAME" + `.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			name := args[0]
			n, err := volumerun.CheckCreate(name, machine, size)
			if err != nil {
				return err
			}
			return withClient(c, func(s *client.Session) error {
				v, err := volumeRunner(c, s).Create(c.Context(), machine, name, n)
				if err != nil {
					return err
				}
				return printVolume(c, machine, v)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine whose pool holds it (name or id)")
	cmd.Flags().StringVar(&size, "size", "", "its quota, e.g. 512MiB or 10GiB")
	return cmd
}

func volumeLs() *cobra.Command {
	var machine string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List every Machine's Provisioned Volumes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ms, err := client.Volumes(c.Context(), volumeRunner(c, s), machine)
				return showPartial(c, map[string]any{"machines": ms}, err, false, func(w io.Writer) error { render.VolumeList(w, ms); return nil })
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	return cmd
}

func printVolume(c *cobra.Command, machine string, v rpc.Volume) error {
	return show(c, map[string]any{"machine": machine, "volume": v}, nil, func(w io.Writer) error { render.Volume(w, machine, v); return nil })
}

// volumeOp is a command on one named volume on the Machine holding it.
func volumeOp(use, short string, run func(c *cobra.Command, rn *volumerun.Runner, machine string, args []string) error) *cobra.Command {
	var machine string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volumerun.CheckName(args[0]); err != nil {
				return err
			}
			return withClient(c, func(s *client.Session) error {
				rn := volumeRunner(c, s)
				m, err := rn.Locate(c.Context(), args[0], machine)
				if err != nil {
					return err
				}
				return run(c, rn, m, args)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine holding it (default: the one that does)")
	return cmd
}

func volumeInspect() *cobra.Command {
	cmd := volumeOp("inspect NAME", "Describe a Provisioned Volume: dataset, mountpoint, size, snapshots, each Mirror's lag", func(c *cobra.Command, rn *volumerun.Runner, m string, args []string) error {
		v, err := rn.Inspect(c.Context(), m, args[0])
		if err != nil {
			return err
		}
		// The lag comes from the Cluster's runs: unreadable, the volume
		// is still described.
		p, err := rn.Protection(c.Context(), m, v)
		if err != nil {
			fmt.Fprintf(c.ErrOrStderr(), "warning: Mirror lag unknown: %v\n", err)
		}
		return show(c, map[string]any{"machine": m, "volume": v, "protection": p}, nil, func(w io.Writer) error {
			render.Volume(w, m, v)
			render.Protection(w, p)
			return nil
		})
	})
	cmd.Args = cobra.ExactArgs(1)
	return cmd
}

func volumeRm() *cobra.Command {
	cmd := volumeOp("rm NAME", "Destroy a Provisioned Volume and its snapshots (refused while a Container mounts it)", func(c *cobra.Command, rn *volumerun.Runner, m string, args []string) error {
		return show(c, map[string]any{"machine": m, "removed": args[0]}, rn.Remove(c.Context(), m, args[0]), func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "removed volume %s from %s\n", args[0], m)
			return err
		})
	})
	cmd.Args = cobra.ExactArgs(1)
	return cmd
}

func volumeSnapshot() *cobra.Command {
	cmd := volumeOp("snapshot NAME SNAPSHOT", "Take a point-in-time snapshot of a Provisioned Volume (ls, restore: list them, go back to one)", func(c *cobra.Command, rn *volumerun.Runner, m string, args []string) error {
		if err := volume.ValidSnapshot(args[1]); err != nil {
			return fmt.Errorf("SNAPSHOT: %w", err)
		}
		v, err := rn.Snapshot(c.Context(), m, args[0], args[1])
		if err != nil {
			return err
		}
		return printVolume(c, m, v)
	})
	cmd.Args = cobra.ExactArgs(2)
	cmd.AddCommand(volumeSnapshotLs(), volumeSnapshotRestore())
	return cmd
}

func volumeSnapshotLs() *cobra.Command {
	var machine string
	cmd := &cobra.Command{
		Use:   "ls NAME",
		Short: "List a volume's snapshots: created, used, and whether its x-volume retention keeps each (and by which rule)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volumerun.CheckName(args[0]); err != nil {
				return err
			}
			return withClient(c, func(s *client.Session) error {
				m, snaps, err := volumeRunner(c, s).Snapshots(c.Context(), machine, args[0])
				if err != nil {
					return err
				}
				return show(c, map[string]any{"machine": m, "snapshots": snaps}, nil, func(w io.Writer) error {
					render.VolumeSnapshots(w, m, snaps)
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine whose copy (default: the Writer's)")
	return cmd
}

func volumeSnapshotRestore() *cobra.Command {
	var o volumerun.SnapshotRestoreOptions
	cmd := &cobra.Command{
		Use:   "restore NAME SNAPSHOT [--stop] [--force]",
		Short: "Volume Run: roll the Writer's copy of a volume back to one of its snapshots",
		Long: `A snapshot-restore run: the Writer's copy of NAME goes back to SNAPSHOT
(zfs rollback); every change since is lost. Its steps: check-writer, with
--stop a stop of each running Container mounting the volume on the
Writer's Machine, rollback, and a start of each Container it stopped.
A rollback that fails starts them again (the run ends undone).

Refused before a run opens, changing nothing: while a running Container
mounts the volume (pass --stop), when SNAPSHOT is not there (named, with
the snapshots that are), when snapshots newer than SNAPSHOT exist (named;
--force destroys them, as zfs rollback -r), on a Mirror's copy
(--machine naming a Mirror), and for a volume with no Writer or two.
Mirrors keep their data until the next ` + "`ployz volume sync`" + `.`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volumerun.CheckSnapshotRestore(args[0], args[1], o); err != nil {
				return err
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.RestoreSnapshot(ctx, args[0], args[1], o)
			})
		},
	}
	cmd.Flags().StringVar(&o.Machine, "machine", "", "the Machine whose copy is meant (refused unless it holds the Writer)")
	cmd.Flags().BoolVar(&o.Stop, "stop", false, "stop the running Containers mounting the volume, roll back, start them again")
	cmd.Flags().BoolVar(&o.Force, "force", false, "destroy the snapshots newer than SNAPSHOT (zfs rollback -r)")
	cmd.Flags().DurationVar(&o.Grace, "grace", 10*time.Second, "how long each Container gets to stop (with --stop)")
	return cmd
}

func volumeSend() *cobra.Command {
	var snap, from, token, to string
	cmd := volumeOp("send NAME --snapshot SNAP [--from SNAP0] > FILE | --to MACHINE", "Write a snapshot's stream (full, or incremental --from) to stdout, or copy it to another Machine (--to)", func(c *cobra.Command, rn *volumerun.Runner, m string, args []string) error {
		req := rpc.SendVolumeRequest{Volume: args[0], Snapshot: snap, FromSnapshot: from, ResumeToken: token}
		if err := volumerun.CheckSend(req); err != nil {
			return err
		}
		if to != "" {
			return sendToMachine(c, rn, m, to, req)
		}
		out := c.OutOrStdout()
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return errors.New("stdout is a terminal: redirect it to a file, pipe it into `ployz volume receive`, or copy to a Machine with --to")
		}
		start := time.Now()
		n, err := volumerun.SendStream(c.Context(), rn.Entry, m, req, out)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.ErrOrStderr(), "sent %s@%s from %s: %s in %s\n", args[0], snap, m, units.BytesSize(float64(n)), time.Since(start).Round(time.Millisecond))
		return nil
	})
	cmd.Long = `Write a snapshot's stream to stdout (a file, or ` + "`ployz volume receive`" + `), or with
--to copy it into the volume of the same name on another Machine: Machine
to Machine over the mesh when both serve it (only progress crosses this
CLI), else through this CLI. A --to copy is resumable: a cut one leaves a
resume token on --to (` + "`ployz volume inspect`" + `) for --resume-token.`
	cmd.Args = cobra.ExactArgs(1)
	cmd.Flags().StringVar(&snap, "snapshot", "", "the snapshot to send")
	cmd.Flags().StringVar(&from, "from", "", "send only the changes since this snapshot (the receiver holds it)")
	cmd.Flags().StringVar(&token, "resume-token", "", "continue an interrupted transfer: the receiver's resume token (`ployz volume inspect`); NAME names the sending volume")
	cmd.Flags().StringVar(&to, "to", "", "copy into this Machine's volume NAME instead of writing stdout (name or id)")
	return cmd
}

// sendToMachine copies machine's stream for req into to's volume of the
// same name, printing progress on stderr.
func sendToMachine(c *cobra.Command, rn *volumerun.Runner, machine, to string, req rpc.SendVolumeRequest) error {
	out, err := rn.Copy(c.Context(), machine, to, req)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "to": to, "bytes": out.Bytes, "direct": out.Direct, "volume": out.Got.Volume})
	}
	how := "through this CLI"
	if out.Direct {
		how = "Machine to Machine"
	}
	fmt.Fprintf(c.ErrOrStderr(), "sent %s from %s to %s %s: %s\n", req.Volume, machine, to, how, units.BytesSize(float64(out.Bytes)))
	return printVolume(c, to, out.Got.Volume)
}

func volumeReceive() *cobra.Command {
	var machine string
	var resumable bool
	cmd := &cobra.Command{
		Use:   "receive NAME --machine M < FILE",
		Short: "Read a stream `ployz volume send` wrote into a volume on a Machine",
		Long: `Read a stream from stdin into volume NAME on --machine. A full stream
creates the volume (it must not exist there); an incremental one lands in
the volume holding its base snapshot. With --resumable an interrupted
receive leaves a resume token (` + "`ployz volume inspect`" + `) for
` + "`ployz volume send --resume-token`" + `.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volumerun.CheckName(args[0]); err != nil {
				return err
			}
			if machine == "" {
				return errors.New("--machine: required (the Machine the volume lands on)")
			}
			in := c.InOrStdin()
			if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				return errors.New("stdin is a terminal: redirect a file or pipe `ployz volume send` into it")
			}
			return withClient(c, func(s *client.Session) error {
				got, err := volumerun.ReceiveStream(c.Context(), s.Entry(), machine, rpc.ReceiveVolumeRequest{Volume: args[0], Resumable: resumable}, in)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "bytes": got.Bytes, "volume": got.Volume})
				}
				fmt.Fprintf(c.ErrOrStderr(), "received %s into %s on %s\n", units.BytesSize(float64(got.Bytes)), args[0], machine)
				return printVolume(c, machine, got.Volume)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine it lands on (name or id)")
	cmd.Flags().BoolVar(&resumable, "resumable", false, "keep an interrupted receive so `ployz volume send --resume-token` continues it")
	return cmd
}
