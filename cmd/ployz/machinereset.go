package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/footprint"
)

// confirmRemoval asks before a Machine leaves the Cluster: a Machine
// holding data needs its name typed (--confirm NAME), and -y never covers
// that; otherwise a yes (or -y).
func confirmRemoval(c *cobra.Command, mr *client.MachineRemoval, typedName string) error {
	p := mr.Machine
	question, typed := mr.Question()
	if typed && typedName == "" {
		typedName, _ = askLine(c, question)
	}
	if typed && typedName != p.Name {
		return fmt.Errorf("machine %s holds %s; removing it loses them: pass --confirm %s", p.Name, mr.Holds, p.Name)
	} else if !typed && typedName == "" {
		return confirm(c, question)
	}
	return nil
}

// machineReset is `ployz machine reset`: leave the Cluster, keep the
// software.
func machineReset() *cobra.Command {
	var typedName string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "reset MACHINE",
		Short: "Make a Machine leave the Cluster and forget its Cluster state, keeping Ployz installed (it can be added again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				mr, err := s.PlanResetMachine(c.Context(), args[0])
				if err != nil {
					return err
				}
				if dryRun {
					o := client.HostOutcome{Machine: mr.Machine.Name, MachineID: mr.Machine.ID, Cluster: client.ClusterWouldLeft}
					return show(c, o, nil, func(w io.Writer) error { return render.HostOutcome(w, o) })
				}
				if err := confirmRemoval(c, mr, typedName); err != nil {
					return err
				}
				o, err := s.Leave(c.Context(), mr)
				return showPartial(c, o, err, g.json, func(w io.Writer) error { return render.HostOutcome(w, o) })
			})
		},
	}
	cmd.Flags().StringVar(&typedName, "confirm", "", "the Machine's name, typed, for a Machine that holds data")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would happen and change nothing")
	return cmd
}

// machineUninstall is `ployz machine uninstall`: leave the Cluster, then
// remove Ployz's whole footprint from the host over SSH.
func machineUninstall() *cobra.Command {
	var typedName, sshDest string
	var o footprint.Options
	cmd := &cobra.Command{
		Use:   "uninstall MACHINE|DEST",
		Short: "Make a Machine leave the Cluster and remove everything Ployz put on its host, over SSH (volumes kept unless --purge-volumes)",
		Long: "MACHINE is a Machine of the Cluster, reached over --ssh or the context's ssh:// connection to it; " +
			"DEST ([user@]host, ssh://...) is a host, which leaves the Cluster first when its ployzd says it is one of its Machines.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				hu, err := s.PlanUninstall(c.Context(), args[0], sshDest)
				if err != nil {
					return err
				}
				if !o.DryRun {
					if err := confirmUninstall(c, hu, typedName, o.PurgeVolumes); err != nil {
						return err
					}
				}
				o.Progress = progressTo(c)
				out, err := s.Uninstall(c.Context(), hu, o)
				return showPartial(c, out, err, g.json, func(w io.Writer) error { return render.HostOutcome(w, out) })
			})
		},
	}
	cmd.Flags().StringVar(&typedName, "confirm", "", "the Machine's name, typed, for a Machine that holds data")
	cmd.Flags().StringVar(&sshDest, "ssh", "", "[user@]host to reach MACHINE's host over (default: the context's connection to it)")
	cmd.Flags().BoolVar(&o.PurgeVolumes, "purge-volumes", false, "also remove the volumes of Ployz's Containers (their data)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "list what would be removed and change nothing")
	return cmd
}

// confirmUninstall asks before an uninstall: the leave's own question
// (typed name for data) when the host is a Machine, then a yes for the
// host (covered by -y).
func confirmUninstall(c *cobra.Command, hu *client.HostUninstall, typedName string, purge bool) error {
	if hu.Leave != nil {
		if err := confirmRemoval(c, hu.Leave, typedName); err != nil {
			return err
		}
	}
	what := "everything Ployz put there, keeping volume data"
	if purge {
		what = "everything Ployz put there, volume data included"
	}
	return confirm(c, fmt.Sprintf("Remove %s from %s?", what, hu.Host))
}
