package enroll

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/versions"
)

// fakeDocker serves the two Engine API calls a version check makes, as a
// daemon of the given version would: /_ping names its API version, and
// a request for a newer API than it speaks is rejected like dockerd does.
func fakeDocker(t *testing.T, version, api string) func(context.Context, string, string) (net.Conn, error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", api)
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if strings.HasPrefix(path, "/v") {
			v, rest, _ := strings.Cut(strings.TrimPrefix(path, "/v"), "/")
			if versions.GreaterThan(v, api) {
				http.Error(w, `{"message":"client version `+v+` is too new. Maximum supported API version is `+api+`"}`, http.StatusBadRequest)
				return
			}
			path = "/" + rest
		}
		if path != "/version" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"Version": version, "ApiVersion": api, "MinAPIVersion": "1.12"})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
}

func TestDockerVersionAcceptsSupported(t *testing.T) {
	for _, c := range []struct{ version, api string }{
		{"20.10.24+dfsg1", "1.41"}, // Debian 12, the oldest supported
		{"26.1.5+dfsg1", "1.45"},   // Debian 13
		{"28.5.2", "1.51"},
	} {
		v, err := dockerVersion(context.Background(), fakeDocker(t, c.version, c.api))
		if err != nil {
			t.Fatalf("%s: %v", c.version, err)
		}
		if v.Version != c.version || v.APIVersion != c.api {
			t.Errorf("got %+v, want %s API %s", v, c.version, c.api)
		}
		if err := checkDockerVersion(v); err != nil {
			t.Errorf("%s (API %s) refused: %v", c.version, c.api, err)
		}
	}
}

func TestDockerVersionRefusesTooOld(t *testing.T) {
	v, err := dockerVersion(context.Background(), fakeDocker(t, "19.03.15", "1.40"))
	if err != nil {
		t.Fatal(err)
	}
	err = checkDockerVersion(v)
	if !errors.Is(err, ErrDockerTooOld) {
		t.Fatalf("Docker 19.03 (API 1.40) accepted: %v", err)
	}
	for _, want := range []string{"Docker 19.03.15 (API 1.40)", "Docker 20.10 (API 1.41) or newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestCheckDockerVersionBoundaries(t *testing.T) {
	for api, ok := range map[string]bool{"1.24": false, "1.40": false, "1.41": true, "1.45": true, "1.100": true, "": false} {
		err := checkDockerVersion(DockerVersion{Version: "x", APIVersion: api})
		if (err == nil) != ok {
			t.Errorf("API %q: err = %v, want ok=%v", api, err, ok)
		}
	}
}

func TestParseOSRelease(t *testing.T) {
	for _, c := range []struct {
		text string
		apt  bool
		name string
	}{
		{"PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n", true, "Debian GNU/Linux 13 (trixie)"},
		{"PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu\nID_LIKE=debian\n", true, "Ubuntu 24.04.1 LTS"},
		{"NAME=\"Linux Mint\"\nID=linuxmint\nID_LIKE=\"ubuntu debian\"\n", true, "linuxmint"},
		{"PRETTY_NAME=\"Fedora Linux 41\"\nID=fedora\n", false, "Fedora Linux 41"},
		{"", false, "unknown distribution"},
	} {
		r := parseOSRelease(c.text)
		if r.aptBased() != c.apt || r.describe() != c.name {
			t.Errorf("%q: apt=%v name=%q, want %v %q", c.text, r.aptBased(), r.describe(), c.apt, c.name)
		}
	}
}
