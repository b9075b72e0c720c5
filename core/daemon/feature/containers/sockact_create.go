package containers

// The create side of socket activation (sockact.go): Docker's create
// request of an activated Container, the launcher it mounts, and the
// sockets found again after a restart.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"

	"github.com/ployz/ployz/core/launcher"
	"github.com/ployz/ployz/core/rpc"
)

// activate turns Docker's create request for a socket-activated spec into
// one that starts the launcher: the port is left unpublished (the Machine
// holds it), the launcher and the Container's activation socket are
// mounted, and the image's own entrypoint and command become the
// launcher's arguments, resolved as Docker would. It returns the socket
// to attach once the Container exists; nil when the spec has no
// activated port.
func (o *Ops) activate(spec rpc.ContainerSpec, img image.InspectResponse, dc *dockerCreate, machine string) (*activateSock, error) {
	i, port := activatedPort(spec)
	if i < 0 {
		return nil, nil
	}
	field := fmt.Sprintf("spec.ports[%d]", i)
	argv := originalCommand(spec, img)
	if len(argv) == 0 {
		return nil, rpc.InvalidField(field+".socket_activation", "image %s has no entrypoint or command to launch, and the spec names none", spec.Image)
	}
	exe, err := o.act.launcher()
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "%s.socket_activation: machine %s has no launcher: %v", field, machine, err).With("field", field+".socket_activation")
	}
	s, err := o.act.open(port)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "%s.host_port: machine %s cannot hold port %d for socket activation: %v", field, machine, port, err).
			With("field", field+".host_port")
	}
	p := spec.Ports[i]
	delete(dc.host.PortBindings, nat.Port(fmt.Sprintf("%d/tcp", p.ContainerPort)))
	// Another tcp port of the spec published on the same container port
	// keeps its binding.
	for _, q := range spec.Ports {
		if q.HostPort > 0 && !q.SocketActivation && q.ContainerPort == p.ContainerPort && q.Protocol != "udp" {
			port := nat.Port(fmt.Sprintf("%d/tcp", q.ContainerPort))
			dc.host.PortBindings[port] = append(dc.host.PortBindings[port], nat.PortBinding{HostPort: strconv.Itoa(q.HostPort)})
		}
	}
	dc.config.Entrypoint, dc.config.Cmd = []string{launcher.Path}, argv
	dc.config.Labels[labelSocketActivation] = strconv.Itoa(port)
	dc.host.Mounts = append(dc.host.Mounts, mount.Mount{Type: mount.TypeBind, Source: exe, Target: launcher.Path, ReadOnly: true})
	// A legacy bind, as the notify socket's: Docker recreates the
	// directory after a reboot, and the daemon binds a fresh socket there.
	dc.host.Binds = append(dc.host.Binds, s.dir+":"+launcher.SocketDir)
	return s, nil
}

// originalCommand is what Docker would run for spec on img: the spec's
// entrypoint with its command (an entrypoint of the spec drops the
// image's command, as in Docker), else the image's.
func originalCommand(spec rpc.ContainerSpec, img image.InspectResponse) []string {
	ep, cmd := spec.Entrypoint, spec.Command
	if len(ep) == 0 && img.Config != nil {
		if len(cmd) == 0 {
			cmd = img.Config.Cmd
		}
		ep = img.Config.Entrypoint
	}
	return append(slices.Clone(ep), cmd...)
}

// restoreActivation re-binds the activation sockets of existing
// socket-activated Containers, once per daemon.
func (o *Ops) restoreActivation(ctx context.Context) error {
	list, err := o.docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", labelSocketActivation))})
	if err != nil {
		return err
	}
	dirs, ports := map[string]string{}, map[string]int{}
	for _, c := range list {
		port, err := strconv.Atoi(c.Labels[labelSocketActivation])
		if err != nil || port < 1 || port > 65535 {
			continue
		}
		for _, m := range c.Mounts {
			if m.Destination == launcher.SocketDir {
				dirs[c.ID], ports[c.ID] = m.Source, port
			}
		}
	}
	o.act.restore(dirs, ports)
	return nil
}

// Launcher returns the host path socket-activated Containers mount the
// launcher from: ployzd itself (it runs as the launcher under that
// name), linked into dataDir once, on first use, so it outlives the
// release it came from.
func Launcher(dataDir string) func() (string, error) {
	return sync.OnceValues(func() (string, error) {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		path := filepath.Join(dataDir, "launch", "ployzd")
		return path, launcherCopy(exe, path)
	})
}

// launcherCopy places the launcher where Containers mount it: a hard link
// (a copy across file systems) of exe at dst, replaced atomically, so an
// upgrade that removes the old release's files leaves Containers a
// launcher to restart with. Running Containers keep the file they
// mounted.
func launcherCopy(exe, dst string) error {
	src, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	tmp := dst + ".new"
	os.Remove(tmp) // a leftover of an interrupted copy
	if err := os.Link(src, tmp); err != nil {
		if err := copyExecutable(src, tmp); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dst)
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
