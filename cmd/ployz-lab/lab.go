//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/e2e/lab"
)

// labCommand wires `ployz lab` (this binary, ployz-lab, which `ployz lab`
// runs) to the e2e/lab library: a local lab of Machines as containers, for
// trying Ployz and for its tests.
func labCommand() *cobra.Command {
	lc := &labCLI{}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run a local lab of Machines as containers on this host",
	}
	cmd.PersistentFlags().StringVar(&lc.name, "name", lab.DefaultName, "lab name")
	cmd.AddCommand(lc.up(), lc.image(), lc.ls(), lc.ssh(), lc.exec(),
		lc.machineOp("partition", "Cut a Machine off the lab network (it keeps running)", (*lab.Lab).Partition),
		lc.machineOp("heal", "Reconnect a partitioned Machine", (*lab.Lab).Heal),
		lc.machineOp("stop", "Stop a Machine, as a power-off would", (*lab.Lab).Stop),
		lc.machineOp("start", "Start a stopped Machine and wait until it has booted", (*lab.Lab).Start),
		lc.down())
	return cmd
}

// labCLI holds the flags every lab subcommand shares; one method builds
// each subcommand.
type labCLI struct{ name string }

func (lc *labCLI) open(ctx context.Context) (*lab.Lab, error) { return lab.Open(ctx, lc.name) }

func (lc *labCLI) up() *cobra.Command {
	var n int
	var vm bool
	var binDir, osName string
	up := &cobra.Command{
		Use:   "up",
		Short: "Build the Machine image if needed and start N Machines",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if binDir == "" {
				binDir = executableDir()
			}
			if vm && !c.Flags().Changed("os") {
				osName = string(lab.VMOS)
			}
			dist, err := lab.ParseOS(osName)
			if err != nil {
				return err
			}
			logf := func(f string, a ...any) { fmt.Fprintf(c.ErrOrStderr(), f+"\n", a...) }
			l, err := lab.Up(c.Context(), lab.Options{Name: lc.name, Machines: n, OS: dist, BinDir: binDir, Logf: logf, VM: vm})
			if err != nil {
				return err
			}
			if err := pinHostKeys(c.Context(), l, logf); err != nil {
				return err
			}
			if err := loadTestApp(c.Context(), l, binDir, logf); err != nil {
				return err
			}
			return printMachines(c, l, false)
		},
	}
	up.Flags().IntVarP(&n, "machines", "n", 3, "number of Machines")
	up.Flags().StringVar(&osName, "os", string(lab.DefaultOS), "Machine OS: debian13 (Docker 26) or debian12 (Docker 20.10, the oldest supported)")
	up.Flags().BoolVar(&vm, "vm", false, "run each Machine as a QEMU virtual machine with its own kernel (kernel WireGuard, ZFS pool \"ployz\"); slow: TCG emulation")
	up.Flags().StringVar(&binDir, "bin-dir", "", "directory of built binaries (default: this executable's directory)")
	return up
}

// image builds the Machine image `up` would boot, or finds it cached, and
// prints what it is: a separate step so a test run can build the slow VM
// image (the zfs module compiles) in the background while other tests run.
func (lc *labCLI) image() *cobra.Command {
	var vm, cached bool
	var binDir, osName string
	img := &cobra.Command{
		Use:   "image",
		Short: "Build the Machine image (container or --vm) if needed and print it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if binDir == "" {
				binDir = executableDir()
			}
			logf := func(f string, a ...any) { fmt.Fprintf(c.ErrOrStderr(), f+"\n", a...) }
			if vm && cached {
				dir, ok, err := lab.VMImageCached(c.Context())
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("the VM image is not built (it would be %s): `ployz lab image --vm` builds it", dir)
				}
				fmt.Fprintln(c.OutOrStdout(), dir)
				return nil
			}
			if vm {
				im, err := lab.BuildVMImage(c.Context(), binDir, logf)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.OutOrStdout(), im.Rootfs)
				return nil
			}
			dist, err := lab.ParseOS(osName)
			if err != nil {
				return err
			}
			tag, err := lab.BuildMachineImageFor(c.Context(), dist, binDir, logf)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), tag)
			return nil
		},
	}
	img.Flags().BoolVar(&vm, "vm", false, "the VM Machine image (Debian 12, kernel, ZFS): many minutes when the recipe changed")
	img.Flags().BoolVar(&cached, "cached", false, "with --vm: build nothing; print the VM image's directory, or fail when it is not built")
	img.Flags().StringVar(&osName, "os", string(lab.DefaultOS), "Machine OS of a container image: debian13 or debian12")
	img.Flags().StringVar(&binDir, "bin-dir", "", "directory of built binaries (default: this executable's directory)")
	return img
}

// loadTestApp builds the test application's image and loads it into
// every Machine, when the binaries include it.
func loadTestApp(ctx context.Context, l *lab.Lab, binDir string, logf func(string, ...any)) error {
	if _, err := os.Stat(filepath.Join(binDir, "testapp")); err != nil {
		return nil
	}
	if err := lab.BuildTestApp(ctx, binDir); err != nil {
		return err
	}
	if err := l.LoadTestApp(ctx); err != nil {
		return err
	}
	logf("lab: loaded %s into every Machine", lab.TestAppImage)
	return nil
}

func (lc *labCLI) ls() *cobra.Command {
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the lab's Machines and their addresses",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			l, err := lc.open(c.Context())
			if err != nil {
				return err
			}
			return printMachines(c, l, asJSON)
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return ls
}

func (lc *labCLI) ssh() *cobra.Command {
	return &cobra.Command{
		Use:   "ssh NAME [COMMAND...]",
		Short: "SSH into a Machine as root with the lab's key",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			l, err := lc.open(c.Context())
			if err != nil {
				return err
			}
			argv, err := l.SSHArgs(args[0])
			if err != nil {
				return err
			}
			bin, err := exec.LookPath("ssh")
			if err != nil {
				return fmt.Errorf("ssh client not found (apt-get install openssh-client): %w", err)
			}
			return syscall.Exec(bin, append(argv, args[1:]...), os.Environ())
		},
	}
}

func (lc *labCLI) exec() *cobra.Command {
	return &cobra.Command{
		Use:   "exec NAME -- COMMAND...",
		Short: "Run a command inside a Machine",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			l, err := lc.open(c.Context())
			if err != nil {
				return err
			}
			err = l.ExecInteractive(c.Context(), args[0], os.Stdin, os.Stdout, os.Stderr, args[1:]...)
			if ee, ok := err.(*exec.ExitError); ok {
				os.Exit(ee.ExitCode())
			}
			return err
		},
	}
}

// machineOp is a subcommand doing op to one Machine of the lab.
func (lc *labCLI) machineOp(use, short string, op func(*lab.Lab, context.Context, string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			l, err := lc.open(c.Context())
			if err != nil {
				return err
			}
			return op(l, c.Context(), args[0])
		},
	}
}

func (lc *labCLI) down() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove the lab's Machines, their volumes and network, and forget their pinned SSH host keys",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// A lab that is already gone has no addresses to forget; the
			// next `up` replaces whatever pins its addresses still have.
			if l, err := lc.open(c.Context()); err == nil {
				if err := forgetHostKeys(l); err != nil {
					return err
				}
			}
			return lab.Remove(c.Context(), lc.name)
		},
	}
}

func printMachines(c *cobra.Command, l *lab.Lab, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tADDRESS\tSTATE\tCONTAINER")
	for _, m := range l.Machines {
		state := m.State
		if state == "" {
			state = "running"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.IP, state, m.Container)
	}
	return w.Flush()
}

func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}
