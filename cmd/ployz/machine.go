package main

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/enroll"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/volume"
)

// machineCommand is `ployz machine`: form a Cluster and manage its Machines.
func machineCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "machine", Aliases: []string{"m"}, Short: "Form a Cluster and manage its Machines"}
	cmd.AddCommand(machineInit(), machineAdd(), machineLs(), machineInspect(), machineRename(), machineUpdate(), machineRm(), machineRtt(),
		machineDrain(), machineUndrain(), machineUpgrade(), machineReset(), machineUninstall())
	return cmd
}

type enrollFlags struct {
	name      string
	network   string
	endpoints []string
	labels    []string
	accepts   []string
	budget    string
	zfsPool   string
	channel   channelFlags
}

func (f *enrollFlags) add(c *cobra.Command, withNetwork bool) {
	c.Flags().StringVar(&f.name, "name", "", "Machine name (default: its hostname)")
	c.Flags().StringSliceVar(&f.endpoints, "endpoint", nil, "WireGuard endpoint ip:port peers use (default: discovered)")
	c.Flags().StringSliceVar(&f.labels, "label", nil, "placement label key=value (repeatable)")
	c.Flags().StringSliceVar(&f.accepts, "accepts", nil, acceptsFlagHelp)
	c.Flags().StringVar(&f.budget, "observe-budget", "", observeBudgetFlagHelp)
	c.Flags().StringVar(&f.zfsPool, "zfs-pool", "", zfsPoolFlagHelp)
	f.channel.add(c)
	if withNetwork {
		c.Flags().StringVar(&f.network, "network", "10.210.0.0/16", "Cluster network the Machine subnets come from")
	}
}

func (f *enrollFlags) options(c *cobra.Command) (enroll.Options, error) {
	o := enroll.Options{Name: f.name, Endpoints: f.endpoints, Progress: progressTo(c)}
	if f.network != "" {
		n, err := netip.ParsePrefix(f.network)
		if err != nil {
			return o, fmt.Errorf("--network %q: not a CIDR prefix", f.network)
		}
		o.Network = n
	}
	var err error
	o.Labels, err = machineLabels(c, f.labels, f.accepts, f.budget, f.zfsPool)
	return o, err
}

// machineLabels are the labels the label flags ask for (a flag not given
// asks for nothing).
func machineLabels(c *cobra.Command, pairs, accepts []string, budget, pool string) (map[string]string, error) {
	l := client.MachineLabels{Pairs: pairs}
	if c.Flags().Changed("accepts") {
		l.Accepts = &accepts
	}
	if c.Flags().Changed("observe-budget") {
		l.Budget = &budget
	}
	if c.Flags().Changed("zfs-pool") {
		l.ZFSPool = &pool
	}
	return l.Labels()
}

func machineInit() *cobra.Command {
	var f enrollFlags
	cmd := &cobra.Command{
		Use:   "init DEST",
		Short: "Found a Cluster on the Machine at DEST ([user@]host, ssh://..., or local)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o, err := f.options(c)
			if err != nil {
				return err
			}
			e := enrollment(args[0], o)
			e.Channel = f.channel.picked()
			in, err := client.Init(c.Context(), g.clientOptions(), e)
			if err != nil {
				return err
			}
			return printInspection(c, in)
		},
	}
	f.add(cmd, true)
	return cmd
}

func machineAdd() *cobra.Command {
	var f enrollFlags
	var noCatchUp bool
	cmd := &cobra.Command{
		Use:   "add DEST",
		Short: "Add the Machine at DEST to the current Cluster (and start Global Services there)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in, err := addMachine(c, f, args[0])
			if err != nil || noCatchUp {
				return err
			}
			return globalCatchUp(c, in.Name)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&noCatchUp, "no-catch-up", false, "do not start the saved projects' Global Services on the new Machine")
	return cmd
}

// addMachine enrolls the Machine at dest and prints its inspection.
func addMachine(c *cobra.Command, f enrollFlags, dest string) (rpc.Inspection, error) {
	o, err := f.options(c)
	if err != nil {
		return rpc.Inspection{}, err
	}
	var in rpc.Inspection
	err = withClient(c, func(s *client.Session) error {
		e := enrollment(dest, o)
		if e.Channel, err = f.channel.saved(s); err != nil {
			return err
		}
		if in, err = s.AddMachine(c.Context(), e); err != nil {
			return err
		}
		return printInspection(c, in)
	})
	return in, err
}

// enrollment is the Machine at dest, installed from this CLI's bundle
// when it lacks Ployz (the caller sets Channel to install from one).
func enrollment(dest string, o enroll.Options) client.Enrollment {
	return client.Enrollment{Dest: dest, Options: o, InstallDir: func() (string, func(), error) { return installDir(o.Progress) }}
}

func printInspection(c *cobra.Command, in rpc.Inspection) error {
	return show(c, in, nil, func(w io.Writer) error { return render.Inspection(w, in) })
}

func machineLs() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the Machines the Entry Machine observes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				list, err := s.Machines(c.Context())
				return show(c, list, err, func(w io.Writer) error { return render.Machines(w, c.ErrOrStderr(), list) })
			})
		},
	}
}

func machineInspect() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect [MACHINE]",
		Short: "Show one Machine as it sees itself (default: the Entry Machine)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				in, err := s.InspectMachine(c.Context(), strings.Join(args, ""))
				if err != nil {
					return err
				}
				return printInspection(c, in)
			})
		},
	}
}

func machineRename() *cobra.Command {
	return &cobra.Command{
		Use:   "rename MACHINE NEW_NAME",
		Short: "Rename a Machine (names may be shared; IDs are the identity)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			return updateMachine(c, args[0], rpc.UpdateMachineRequest{Name: &args[1]})
		},
	}
}

func machineUpdate() *cobra.Command {
	var add, rm, accepts []string
	var name, budget, pool string
	cmd := &cobra.Command{
		Use:   "update MACHINE",
		Short: "Change a Machine's name or labels (never evicts its Containers)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			labels, err := machineLabels(c, add, accepts, budget, pool)
			if err != nil {
				return err
			}
			req := rpc.UpdateMachineRequest{LabelsAdd: labels, LabelsRemove: rm}
			if name != "" {
				req.Name = &name
			}
			return updateMachine(c, args[0], req)
		},
	}
	cmd.Flags().StringSliceVar(&add, "label-add", nil, "add or change a label key=value")
	cmd.Flags().StringSliceVar(&rm, "label-rm", nil, "remove a label by key")
	cmd.Flags().StringVar(&name, "name", "", "new name")
	cmd.Flags().StringSliceVar(&accepts, "accepts", nil, acceptsFlagHelp)
	cmd.Flags().StringVar(&budget, "observe-budget", "", observeBudgetFlagHelp+" (--label-rm "+observe.BudgetLabel+" goes back to the default)")
	cmd.Flags().StringVar(&pool, "zfs-pool", "", zfsPoolFlagHelp+" (--label-rm "+volume.PoolLabel+" removes it)")
	return cmd
}

// updateMachine applies req to the Machine ref names and prints it.
func updateMachine(c *cobra.Command, ref string, req rpc.UpdateMachineRequest) error {
	return withClient(c, func(s *client.Session) error {
		in, err := s.UpdateMachine(c.Context(), ref, req)
		if err != nil {
			return err
		}
		return printInspection(c, in)
	})
}

func machineRm() *cobra.Command {
	var typedName string
	var noReset, force bool
	cmd := &cobra.Command{
		Use:   "rm MACHINE",
		Short: "Remove a Machine from the Cluster and reset it (--force: forget one that will never return)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				plan := s.PlanRemoveMachine
				if force {
					plan = s.PlanForgetMachine
				}
				mr, err := plan(c.Context(), args[0])
				if err != nil {
					return err
				}
				p := mr.Machine
				if err := confirmRemoval(c, mr, typedName); err != nil {
					return err
				}
				wasReset, err := s.ApplyRemoveMachine(c.Context(), mr, !noReset)
				if wasReset {
					fmt.Fprintf(c.ErrOrStderr(), "reset %s\n", p.Name)
				}
				if err != nil && !client.IsPartial(err) {
					return err
				}
				fmt.Fprintln(c.ErrOrStderr(), mr.Removed())
				return exitFor(err, false)
			})
		},
	}
	cmd.Flags().StringVar(&typedName, "confirm", "", "the Machine's name, typed, for a Machine that holds data")
	cmd.Flags().BoolVar(&noReset, "no-reset", false, "only remove the Machine's rows (it is gone for good)")
	cmd.Flags().BoolVar(&force, "force", false, "forget a Machine that will never return, without a reset; refused while it answers")
	return cmd
}

func machineRtt() *cobra.Command {
	return &cobra.Command{
		Use:   "rtt",
		Short: "Membership and round-trip times as the Entry Machine's store sees them",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ms, err := s.Membership(c.Context())
				return show(c, ms, err, func(w io.Writer) error { return render.Membership(w, ms) })
			})
		},
	}
}
