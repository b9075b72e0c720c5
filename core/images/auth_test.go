package images

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/registry"
)

func decode(t *testing.T, enc string) registry.AuthConfig {
	t.Helper()
	b, err := base64.URLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("encoded credential %q: %v", enc, err)
	}
	var ac registry.AuthConfig
	if err := json.Unmarshal(b, &ac); err != nil {
		t.Fatal(err)
	}
	return ac
}

func TestCredentialsFromDockerConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"auths":{
		"10.0.0.5:5000":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("alice:s3cret:x")) + `"},
		"https://index.docker.io/v1/":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("hubuser:hubpass")) + `"}},
		"credHelpers":{"ghcr.io":"fake"}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	c, err := LoadCredentials()
	if err != nil {
		t.Fatal(err)
	}
	c.helper = func(name, server string) (registry.AuthConfig, error) {
		return registry.AuthConfig{Username: name + "@" + server, Password: "tok"}, nil
	}
	for image, want := range map[string]string{
		"10.0.0.5:5000/team/app:1": "alice",
		"postgres:17":              "hubuser",
		"grafana/grafana":          "hubuser",
		"ghcr.io/o/x:2":            "fake@ghcr.io",
		"quay.io/o/x":              "",
	} {
		enc, err := c.For(image)
		if err != nil {
			t.Fatalf("%s: %v", image, err)
		}
		if want == "" {
			if enc != "" {
				t.Fatalf("%s: credential %q for a registry the config does not name", image, enc)
			}
			continue
		}
		if got := decode(t, enc).Username; got != want {
			t.Fatalf("%s: user %q, want %q", image, got, want)
		}
	}
	if ac := decode(t, must(c.For("10.0.0.5:5000/app"))); ac.Password != "s3cret:x" {
		t.Fatalf("password with a colon: %q", ac.Password)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func TestCredentialsMissingAndMalformed(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	c, err := LoadCredentials()
	if err != nil || must(c.For("postgres")) != "" {
		t.Fatalf("no config: %v", err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(p, []byte(`{"auths":{"r:5000":{"auth":"%%%"}}}`), 0o600)
	c, err = ReadCredentials(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.For("r:5000/x"); err == nil || !strings.Contains(err.Error(), `auths["r:5000"].auth`) {
		t.Fatalf("bad auth: %v", err)
	}
	os.WriteFile(p, []byte(`{`), 0o600)
	if _, err := ReadCredentials(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("malformed config: %v", err)
	}
	if _, err := c.For("app/Upper"); err == nil {
		t.Fatal("bad reference accepted")
	}
}
