package containers

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/compose-keys/*.json")

// composeKeyCases: one compose key each, with the service body that
// declares it. The golden file beside each is the part of Docker's create
// request the key produces, checked by hand against Docker Compose's
// documented behaviour (docs/compose.md).
var composeKeyCases = map[string]string{
	"anonymous_volume": "volumes: [/app/node_modules]",
	"cap_add_drop":     "cap_add: [NET_ADMIN, SYS_TIME]\n    cap_drop: [MKNOD]",
	"devices":          `devices: ["/dev/fuse", "/dev/ttyUSB0:/dev/ttyACM0:rw"]`,
	"gpu_reservation": `deploy:
      resources:
        reservations:
          devices:
            - {driver: nvidia, count: all, capabilities: [gpu]}
            - {device_ids: ["0", "3"], capabilities: [gpu, compute]}`,
	"gpus":                 "gpus: all",
	"resources_limits":     "deploy:\n      resources:\n        limits: {cpus: '0.5', memory: 256M, pids: 100}",
	"resources_reserve":    "deploy:\n      resources:\n        reservations: {memory: 64M}",
	"service_level_limits": "cpus: 1.5\n    mem_limit: 1g\n    mem_reservation: 512m\n    pids_limit: 50",
	"privileged":           "privileged: true",
	"tmpfs":                `tmpfs: ["/run", "/tmp:size=64m,mode=1777"]`,
	"shm_size":             "shm_size: 256m",
	"ulimits":              "ulimits:\n      nproc: 65535\n      nofile: {soft: 20000, hard: 40000}",
	"sysctls":              "sysctls:\n      net.core.somaxconn: 1024\n      net.ipv4.tcp_syncookies: 0",
	"extra_hosts":          `extra_hosts: ["somehost:162.242.195.82", "otherhost=50.31.209.229", "v6host=::1"]`,
	"init":                 "init: true",
	"user":                 `user: "1000:1000"`,
	"working_dir":          "working_dir: /srv/app",
	"entrypoint":           `entrypoint: ["/bin/sh", "-c"]`,
	"stop_signal":          "stop_signal: SIGUSR1\n    stop_grace_period: 1m30s",
	"labels":               `labels: {com.example.team: web}`,
	"logging":              "logging:\n      driver: json-file\n      options: {max-size: 10m, max-file: '3'}",
	"read_only":            "read_only: true",
	"security_opt":         `security_opt: ["no-new-privileges:true", "apparmor=unconfined"]`,
	"restart_policy":       "deploy:\n      restart_policy: {condition: on-failure, max_attempts: 3}",
}

// TestComposeKeysGolden loads each key through the compose loader and
// turns the Service's spec into Docker's create request, compared with
// testdata/compose-keys/<case>.json (go test -run TestComposeKeysGolden -update).
func TestComposeKeysGolden(t *testing.T) {
	for name, body := range composeKeyCases {
		t.Run(name, func(t *testing.T) {
			yaml := "name: keys\nservices:\n  web:\n    image: app:1\n    " + body + "\n"
			app, err := deploy.Load(context.Background(), deploy.Source{Compose: []byte(yaml)})
			if err != nil {
				t.Fatal(err)
			}
			if len(app.Warnings) > 0 {
				t.Fatalf("warnings: %v", app.Warnings)
			}
			svc := app.Services[0]
			spec := svc.Spec
			spec.Namespace, spec.Service = app.Namespace(), svc.Name
			if _, err := validateSpec(rpc.CreateContainerRequest{Name: "keys-production-web-1", Spec: spec}); err != nil {
				t.Fatalf("the daemon refuses the spec: %v", err)
			}
			dc := buildCreate(spec, "ployz-net", "", "")
			got := goldenJSON(t, map[string]any{"config": dc.config, "host_config": dc.host})
			path := filepath.Join("testdata", "compose-keys", name+".json")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("create request for %s:\n%s\nwant (%s):\n%s", name, got, path, want)
			}
		})
	}
}

// goldenJSON is v as indented JSON without zero values and without what
// every Container gets alike (Ployz labels, network, restart policy), so
// each golden shows what its key changed.
func goldenJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m = prune(m, "")
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// common are the fields every create request carries; left out of goldens.
var common = map[string]bool{"config.Image": true, "host_config.NetworkMode": true, "host_config.ConsoleSize": true,
	"host_config.LogConfig.Type": true}

// keepEmpty are maps whose empty values mean something (a tmpfs mount
// without options).
var keepEmpty = map[string]bool{"host_config.Tmpfs": true}

func prune(v any, path string) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			p := strings.TrimPrefix(path+"."+k, ".")
			if common[p] || strings.HasPrefix(k, "ployz.") || p == "host_config.RestartPolicy" && isDefaultRestart(e) {
				continue
			}
			if keepEmpty[path] {
				out[k] = e
				continue
			}
			if e = prune(e, p); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		for i := range t {
			t[i] = prune(t[i], path)
		}
		return t
	case string:
		if t == "" {
			return nil
		}
	case float64:
		if t == 0 {
			return nil
		}
	case bool:
		if !t {
			return nil
		}
	case nil:
		return nil
	}
	return v
}

// isDefaultRestart reports whether v is Ployz's default restart policy.
func isDefaultRestart(v any) bool {
	m, _ := v.(map[string]any)
	return m["Name"] == "unless-stopped" && m["MaximumRetryCount"] == float64(0)
}
