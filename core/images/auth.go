package images

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/registry"
)

// dockerHubKey is the key Docker's config uses for Docker Hub.
const dockerHubKey = "https://index.docker.io/v1/"

// Credentials are the operator's registry credentials, read from their
// Docker config ($DOCKER_CONFIG/config.json, else ~/.docker/config.json)
// the way `docker pull` finds them: an inline auth, else a credential
// helper. They live in this process only: a deploy sends the one a pull
// needs with that pull.
type Credentials struct {
	cfg dockerConfig
	// helper runs a docker-credential-* program; tests replace it.
	helper func(name, server string) (registry.AuthConfig, error)
}

type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// LoadCredentials reads the operator's Docker config. A missing file is
// no credentials (anonymous pulls); a malformed one is an error naming it.
func LoadCredentials() (*Credentials, error) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return &Credentials{helper: runHelper}, nil
		}
		dir = filepath.Join(home, ".docker")
	}
	return ReadCredentials(filepath.Join(dir, "config.json"))
}

// ReadCredentials reads one Docker config file.
func ReadCredentials(path string) (*Credentials, error) {
	c := &Credentials{helper: runHelper}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	if err := json.Unmarshal(b, &c.cfg); err != nil {
		return nil, fmt.Errorf("docker config %s: %w", path, err)
	}
	return c, nil
}

// RegistryHost is the registry an image reference names ("docker.io" for
// Docker Hub).
func RegistryHost(image string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return reference.Domain(ref), nil
}

// For returns the encoded credential (Docker's X-Registry-Auth value) for
// image's registry, or "" when the config holds none: the pull is then
// anonymous.
func (c *Credentials) For(image string) (string, error) {
	if c == nil {
		return "", nil
	}
	host, err := RegistryHost(image)
	if err != nil {
		return "", err
	}
	ac, ok, err := c.lookup(host)
	if err != nil || !ok {
		return "", err
	}
	return registry.EncodeAuthConfig(ac)
}

func (c *Credentials) lookup(host string) (registry.AuthConfig, bool, error) {
	keys := []string{host, "https://" + host, "http://" + host}
	if host == "docker.io" {
		keys = []string{dockerHubKey, "docker.io", "index.docker.io", "https://index.docker.io"}
	}
	server := keys[0]
	if h := c.cfg.CredHelpers[host]; h != "" {
		ac, err := c.helper(h, server)
		return ac, err == nil, err
	}
	for _, k := range keys {
		a, ok := c.cfg.Auths[k]
		if !ok {
			continue
		}
		ac := registry.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, ServerAddress: host}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return ac, false, fmt.Errorf("docker config auths[%q].auth: not base64", k)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return ac, false, fmt.Errorf("docker config auths[%q].auth: not user:password", k)
			}
			ac.Username, ac.Password = user, pass
		}
		if ac.Username != "" || ac.IdentityToken != "" {
			return ac, true, nil
		}
	}
	if c.cfg.CredsStore != "" {
		ac, err := c.helper(c.cfg.CredsStore, server)
		if errors.Is(err, errNoCredentials) {
			return ac, false, nil
		}
		return ac, err == nil, err
	}
	return registry.AuthConfig{}, false, nil
}

var errNoCredentials = errors.New("credentials not found")

// runHelper asks docker-credential-<name> for server's credentials, as
// Docker's credential helper protocol defines (server on stdin, JSON out).
func runHelper(name, server string) (registry.AuthConfig, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker-credential-"+name, "get")
	cmd.Stdin = strings.NewReader(server)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String()+errb.String(), "credentials not found") {
			return registry.AuthConfig{}, errNoCredentials
		}
		return registry.AuthConfig{}, fmt.Errorf("docker-credential-%s get %s: %w", name, server, err)
	}
	var r struct{ Username, Secret string }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return registry.AuthConfig{}, fmt.Errorf("docker-credential-%s get %s: %w", name, server, err)
	}
	ac := registry.AuthConfig{Username: r.Username, Password: r.Secret, ServerAddress: server}
	if r.Username == "<token>" {
		ac = registry.AuthConfig{IdentityToken: r.Secret, ServerAddress: server}
	}
	return ac, nil
}
