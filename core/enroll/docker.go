package enroll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"golang.org/x/crypto/ssh"
)

// The oldest Docker Engine Ployz supports: Debian 12's docker.io. Its API
// version is what the check compares, since that is what ployzd negotiates.
const (
	MinDockerVersion = "20.10"
	MinDockerAPI     = "1.41"
)

// dockerSocket is where a Machine's dockerd listens.
const dockerSocket = "/var/run/docker.sock"

// DockerVersion is what a Machine's Docker daemon reports about itself.
type DockerVersion struct {
	Version    string // e.g. 26.1.5+dfsg1
	APIVersion string // e.g. 1.45
}

// ErrDockerTooOld marks a Docker daemon older than MinDockerAPI.
var ErrDockerTooOld = errors.New("docker too old")

// checkDockerVersion refuses a daemon whose API is older than MinDockerAPI,
// naming what was found and the minimum.
func checkDockerVersion(v DockerVersion) error {
	if v.APIVersion == "" {
		return fmt.Errorf("docker %s reported no API version; Ployz needs Docker %s (API %s) or newer", v.Version, MinDockerVersion, MinDockerAPI)
	}
	if versions.LessThan(v.APIVersion, MinDockerAPI) {
		return fmt.Errorf("%w: this Machine runs Docker %s (API %s); Ployz needs Docker %s (API %s) or newer — upgrade Docker there and rerun",
			ErrDockerTooOld, v.Version, v.APIVersion, MinDockerVersion, MinDockerAPI)
	}
	return nil
}

// dockerVersion asks the daemon behind dial for its version, negotiating
// the API version the way ployzd's own client does, so an old daemon
// answers instead of rejecting a too-new client.
func dockerVersion(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (DockerVersion, error) {
	cli, err := client.NewClientWithOpts(
		client.WithHost("unix://"+dockerSocket),
		client.WithDialContext(dial),
		client.WithAPIVersionNegotiation(),
	)
	if err != nil {
		return DockerVersion{}, err
	}
	defer cli.Close()
	sv, err := cli.ServerVersion(ctx)
	if err != nil {
		return DockerVersion{}, fmt.Errorf("docker version: %w", err)
	}
	return DockerVersion{Version: sv.Version, APIVersion: sv.APIVersion}, nil
}

// sshDockerDial reaches the Machine's Docker socket through the SSH
// connection (OpenSSH's streamlocal forwarding, which the RPC transport
// uses for ployzd's socket as well).
func sshDockerDial(c *ssh.Client) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		return c.Dial("unix", dockerSocket)
	}
}

// EnsureDocker makes sure the Machine behind c runs a Docker Engine Ployz
// supports. Without one it installs the distribution's own package
// (docker.io on Debian and Ubuntu) and says so; a daemon older than
// MinDockerAPI is refused with the version found and the minimum.
func EnsureDocker(ctx context.Context, c *ssh.Client, progress Progress) error {
	// A root shell over SSH may lack sbin in PATH: look in both places.
	if _, err := run(c, "command -v dockerd || test -x /usr/sbin/dockerd || test -x /usr/bin/dockerd", nil); err != nil {
		if err := installDocker(c, progress); err != nil {
			return err
		}
	} else if _, err := run(c, "test -S "+dockerSocket+" || systemctl start docker", nil); err != nil {
		return fmt.Errorf("docker is installed but not running, and starting it failed: %w", err)
	}
	v, err := dockerVersion(ctx, sshDockerDial(c))
	if err != nil {
		return fmt.Errorf("check Docker on the Machine: %w", err)
	}
	if err := checkDockerVersion(v); err != nil {
		return err
	}
	progress("docker %s (API %s)", v.Version, v.APIVersion)
	return nil
}

// osRelease is the part of /etc/os-release that picks a package manager.
type osRelease struct {
	ID, IDLike, Pretty string
}

func parseOSRelease(s string) osRelease {
	var r osRelease
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			r.ID = v
		case "ID_LIKE":
			r.IDLike = v
		case "PRETTY_NAME":
			r.Pretty = v
		}
	}
	return r
}

// aptBased reports whether the distribution installs with apt (Debian,
// Ubuntu and their derivatives).
func (r osRelease) aptBased() bool {
	for _, id := range append([]string{r.ID}, strings.Fields(r.IDLike)...) {
		if id == "debian" || id == "ubuntu" {
			return true
		}
	}
	return false
}

// dockerInstallScript installs and starts the distribution's Docker: only
// packages from the Machine's own configured archive.
const dockerInstallScript = `set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq docker.io >/dev/null
systemctl enable --now docker >/dev/null 2>&1 || systemctl start docker
dpkg-query -W -f '${Version}' docker.io`

func installDocker(c *ssh.Client, progress Progress) error {
	out, err := run(c, "cat /etc/os-release", nil)
	if err != nil {
		return fmt.Errorf("docker is not installed and /etc/os-release is unreadable: %w", err)
	}
	rel := parseOSRelease(out)
	if !rel.aptBased() {
		return fmt.Errorf("docker is not installed on this Machine (%s), and Ployz installs it only on Debian and Ubuntu; install Docker %s or newer and rerun", rel.describe(), MinDockerVersion)
	}
	progress("docker is not installed: installing docker.io from %s's packages", rel.describe())
	ver, err := run(c, dockerInstallScript, nil)
	if err != nil {
		return fmt.Errorf("install docker.io: %w", err)
	}
	progress("installed docker.io %s (%s's package)", strings.TrimSpace(ver), rel.describe())
	return nil
}

func (r osRelease) describe() string {
	if r.Pretty != "" {
		return r.Pretty
	}
	if r.ID != "" {
		return r.ID
	}
	return "unknown distribution"
}
