package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumes"
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

// withZFSPool adds the ployz.zfs.pool label --zfs-pool asks for (set is
// whether the flag was given at all); the Machine checks the pool exists.
func withZFSPool(labels map[string]string, pool string, set bool) (map[string]string, error) {
	if !set {
		return labels, nil
	}
	pool = strings.TrimSpace(pool)
	if err := volume.ValidPool(pool); err != nil {
		return nil, fmt.Errorf("--zfs-pool: %w", err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[volume.PoolLabel] = pool
	return labels, nil
}

// listVolumes asks the Machines t names for their volumes, sorted by
// name (core/volumes, which the dashboard's Volumes page reads too).
func listVolumes(c *cobra.Command, s session, t rpc.Target) ([]volumes.MachineVolumes, error) {
	return volumes.List(c.Context(), s.ent, t)
}

// locate is the Machine holding volume name: the one --machine names, or
// the only one that holds it.
func locate(c *cobra.Command, s session, name, machine string) (string, error) {
	if machine != "" {
		return machine, nil
	}
	ms, err := listVolumes(c, s, rpc.Target{All: true})
	if err != nil {
		return "", err
	}
	hs := volumes.Holders(ms, name)
	switch len(hs) {
	case 1:
		return hs[0], nil
	case 0:
		return "", rpc.Errorf(rpc.CodeNotFound, "name: no Machine holds a volume %q%s", name, unanswered(ms)).With("field", "name")
	}
	return "", rpc.Errorf(rpc.CodeAmbiguous, "name: volume %q is on %s: pass --machine", name, strings.Join(hs, ", ")).With("field", "name")
}

// unanswered names the Machines that did not answer a list, each with
// its error, as a suffix.
func unanswered(ms []volumes.MachineVolumes) string {
	var parts []string
	for _, m := range ms {
		switch {
		case m.Error != "":
			parts = append(parts, m.Machine+": "+m.Error)
		case m.List == nil:
			parts = append(parts, m.Machine)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (no answer from " + strings.Join(parts, "; ") + ")"
}

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
			if err := volume.ValidName(name); err != nil {
				return fmt.Errorf("NAME: %w", err)
			}
			if machine == "" {
				return errors.New("--machine: required (the Machine whose pool holds the volume)")
			}
			n, err := volume.ParseSize(size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			return withSession(c, func(s session) error {
				ms, err := listVolumes(c, s, rpc.Target{All: true})
				if err != nil {
					return err
				}
				if hs := volumes.Holders(ms, name); len(hs) > 0 {
					return rpc.Errorf(rpc.CodeConflict, "name: a volume %q already exists on %s", name, strings.Join(hs, ", ")).With("field", "name")
				}
				var v rpc.Volume
				if err := s.ent.Call(c.Context(), rpc.Target{One: machine}, rpc.CmdCreateVolume, rpc.CreateVolumeRequest{Name: name, SizeBytes: n}, &v); err != nil {
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
			return withSession(c, func(s session) error {
				ms, err := listVolumes(c, s, machineTarget(machine))
				if err != nil {
					return err
				}
				if g.json {
					if err := printJSON(c.OutOrStdout(), map[string]any{"machines": ms}); err != nil {
						return err
					}
				} else {
					printVolumeList(c.OutOrStdout(), ms)
				}
				if u := unanswered(ms); u != "" {
					return &exitError{code: 3, err: fmt.Errorf("volume list is partial%s", u)}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	return cmd
}

func printVolumeList(w io.Writer, ms []volumes.MachineVolumes) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tNAME\tCOPY\tSIZE\tUSED\tSNAPSHOTS\tMOUNTPOINT")
	var notes []string
	for _, m := range ms {
		if n := m.Note(); n != "" {
			notes = append(notes, m.Machine+": "+n)
		}
		if m.List == nil {
			continue
		}
		for _, v := range m.List.Volumes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.Machine, v.Name, copyRole(v), sizeOrNone(v.SizeBytes), units.BytesSize(float64(v.UsedBytes)), len(v.Snapshots), v.Mountpoint)
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

// copyRole is v's copy role, "?" from a daemon that does not report it.
func copyRole(v rpc.Volume) string {
	if v.Copy == nil {
		return "?"
	}
	return v.Copy.Role
}

func sizeOrNone(n uint64) string {
	if n == 0 {
		return "none"
	}
	return units.BytesSize(float64(n))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func printVolume(c *cobra.Command, machine string, v rpc.Volume) error {
	if g.json {
		return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "volume": v})
	}
	w := c.OutOrStdout()
	fmt.Fprintf(w, "Volume %s on %s\n", v.Name, machine)
	fmt.Fprintf(w, "  dataset:     %s\n  mountpoint:  %s\n  size:        %s\n  used:        %s\n", v.Dataset, v.Mountpoint, sizeOrNone(v.SizeBytes), units.BytesSize(float64(v.UsedBytes)))
	if v.Created != 0 {
		fmt.Fprintf(w, "  created:     %s\n", time.Unix(0, v.Created).UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  readonly:    %s\n", onOff(v.ReadOnly))
	if v.Copy != nil {
		fmt.Fprintf(w, "  copy:        %s", v.Copy.Role)
		if v.Copy.Epoch != 0 {
			fmt.Fprintf(w, " (writer epoch %d)", v.Copy.Epoch)
		}
		if v.Copy.Floor != 0 {
			fmt.Fprintf(w, ", run floor gen %d", v.Copy.Floor)
		}
		fmt.Fprintln(w)
	}
	if v.ResumeToken != "" {
		fmt.Fprintf(w, "  resume token: %s (an interrupted receive; `ployz volume send --resume-token` continues it)\n", v.ResumeToken)
	}
	if len(v.Snapshots) == 0 {
		fmt.Fprintln(w, "  snapshots:   none")
	} else {
		fmt.Fprintln(w, "  snapshots:")
	}
	for _, sn := range v.Snapshots {
		fmt.Fprintf(w, "    %s  %s  used %s  guid %s\n", sn.Name, time.Unix(0, sn.Created).UTC().Format(time.RFC3339), units.BytesSize(float64(sn.UsedBytes)), sn.GUID)
	}
	if len(v.Bookmarks) > 0 {
		fmt.Fprintln(w, "  bookmarks:   (pruned run snapshots: incremental bases)")
	}
	for _, b := range v.Bookmarks {
		fmt.Fprintf(w, "    %s  %s  guid %s\n", b.Name, time.Unix(0, b.Created).UTC().Format(time.RFC3339), b.GUID)
	}
	return nil
}

// volumeOp is a command on one named volume on the Machine holding it.
func volumeOp(use, short string, run func(c *cobra.Command, s session, machine string, args []string) error) *cobra.Command {
	var machine string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volume.ValidName(args[0]); err != nil {
				return fmt.Errorf("NAME: %w", err)
			}
			return withSession(c, func(s session) error {
				m, err := locate(c, s, args[0], machine)
				if err != nil {
					return err
				}
				return run(c, s, m, args)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine holding it (default: the one that does)")
	return cmd
}

func volumeInspect() *cobra.Command {
	cmd := volumeOp("inspect NAME", "Describe a Provisioned Volume: dataset, mountpoint, size, snapshots", func(c *cobra.Command, s session, m string, args []string) error {
		var v rpc.Volume
		if err := s.ent.Call(c.Context(), rpc.Target{One: m}, rpc.CmdInspectVolume, rpc.VolumeRequest{Name: args[0]}, &v); err != nil {
			return err
		}
		return printVolume(c, m, v)
	})
	cmd.Args = cobra.ExactArgs(1)
	return cmd
}

func volumeRm() *cobra.Command {
	cmd := volumeOp("rm NAME", "Destroy a Provisioned Volume and its snapshots (refused while a Container mounts it)", func(c *cobra.Command, s session, m string, args []string) error {
		var out map[string]string
		if err := s.ent.Call(c.Context(), rpc.Target{One: m}, rpc.CmdRemoveVolume, rpc.VolumeRequest{Name: args[0]}, &out); err != nil {
			return err
		}
		if g.json {
			return printJSON(c.OutOrStdout(), map[string]any{"machine": m, "removed": args[0]})
		}
		fmt.Fprintf(c.OutOrStdout(), "removed volume %s from %s\n", args[0], m)
		return nil
	})
	cmd.Args = cobra.ExactArgs(1)
	return cmd
}

func volumeSnapshot() *cobra.Command {
	cmd := volumeOp("snapshot NAME SNAPSHOT", "Take a point-in-time snapshot of a Provisioned Volume", func(c *cobra.Command, s session, m string, args []string) error {
		if err := volume.ValidSnapshot(args[1]); err != nil {
			return fmt.Errorf("SNAPSHOT: %w", err)
		}
		var v rpc.Volume
		if err := s.ent.Call(c.Context(), rpc.Target{One: m}, rpc.CmdSnapshotVolume, rpc.SnapshotVolumeRequest{Volume: args[0], Snapshot: args[1]}, &v); err != nil {
			return err
		}
		return printVolume(c, m, v)
	})
	cmd.Args = cobra.ExactArgs(2)
	return cmd
}

func volumeSend() *cobra.Command {
	var snap, from, token, to string
	cmd := volumeOp("send NAME --snapshot SNAP [--from SNAP0] > FILE | --to MACHINE", "Write a snapshot's stream (full, or incremental --from) to stdout, or copy it to another Machine (--to)", func(c *cobra.Command, s session, m string, args []string) error {
		req := rpc.SendVolumeRequest{Volume: args[0], Snapshot: snap, FromSnapshot: from, ResumeToken: token}
		if token == "" {
			if err := volume.ValidSnapshot(snap); err != nil {
				return fmt.Errorf("--snapshot: %w", err)
			}
			if from != "" {
				if err := volume.ValidSnapshot(from); err != nil {
					return fmt.Errorf("--from: %w", err)
				}
			}
		}
		if to != "" {
			return sendToMachine(c, s, m, to, req)
		}
		out := c.OutOrStdout()
		if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return errors.New("stdout is a terminal: redirect it to a file, pipe it into `ployz volume receive`, or copy to a Machine with --to")
		}
		start := time.Now()
		n, err := sendVolumeTo(c.Context(), s, m, req, out)
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
func sendToMachine(c *cobra.Command, s session, machine, to string, req rpc.SendVolumeRequest) error {
	what := "full " + req.Snapshot
	switch {
	case req.ResumeToken != "":
		what = "the rest of a cut transfer"
	case req.FromSnapshot != "":
		what = "incremental " + req.FromSnapshot + " → " + req.Snapshot
	}
	out, err := volumeCopy{from: machine, to: to, req: req, resumable: true, what: what, errw: c.ErrOrStderr()}.run(c.Context(), s)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "to": to, "bytes": out.bytes, "direct": out.direct, "volume": out.got.Volume})
	}
	how := "through this CLI"
	if out.direct {
		how = "Machine to Machine"
	}
	fmt.Fprintf(c.ErrOrStderr(), "sent %s from %s to %s %s: %s\n", req.Volume, machine, to, how, units.BytesSize(float64(out.bytes)))
	return printVolume(c, to, out.got.Volume)
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
			if err := volume.ValidName(args[0]); err != nil {
				return fmt.Errorf("NAME: %w", err)
			}
			if machine == "" {
				return errors.New("--machine: required (the Machine the volume lands on)")
			}
			in := c.InOrStdin()
			if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				return errors.New("stdin is a terminal: redirect a file or pipe `ployz volume send` into it")
			}
			return withSession(c, func(s session) error {
				got, err := receiveVolumeFrom(c.Context(), s, machine, rpc.ReceiveVolumeRequest{Volume: args[0], Resumable: resumable}, in)
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

// sendVolumeTo writes machine's send_volume stream for req to out and
// answers the bytes written.
func sendVolumeTo(ctx context.Context, s session, machine string, req rpc.SendVolumeRequest, out io.Writer) (int64, error) {
	req.RawData = true // Recv reads data from either place
	st, err := s.ent.OpenStream(ctx, rpc.Target{One: machine}, rpc.CmdSendVolume, req)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var n int64
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("send %s from %s after %d bytes: %w", req.Volume, machine, n, err)
		}
		if len(f.Data) > 0 {
			if _, err := out.Write(f.Data); err != nil {
				return n, fmt.Errorf("write %s's stream: %w", req.Volume, err)
			}
			n += int64(len(f.Data))
		}
		if f.Done {
			return n, nil
		}
	}
}

// receiveVolumeFrom feeds in to machine's receive_volume for req until
// EOF and answers the Machine's final event.
func receiveVolumeFrom(ctx context.Context, s session, machine string, req rpc.ReceiveVolumeRequest, in io.Reader) (rpc.VolumeReceived, error) {
	var got rpc.VolumeReceived
	st, err := s.ent.OpenStream(ctx, rpc.Target{One: machine}, rpc.CmdReceiveVolume, req)
	if err != nil {
		return got, err
	}
	defer st.Close()
	st.SendRawData()
	buf := make([]byte, 256<<10)
	for {
		k, rerr := in.Read(buf)
		if k > 0 {
			if err := st.Send(rpc.StreamFrame{Data: buf[:k]}); err != nil {
				break // the Machine ended the stream; its answer says why
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return got, fmt.Errorf("read %s's stream: %w", req.Volume, rerr)
		}
	}
	err = st.CloseAndAnswer(&got)
	return got, err
}
