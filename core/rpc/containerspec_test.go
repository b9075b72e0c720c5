package rpc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestContainerSpecHostFixture pins spec.host (capability
// ployz.container.host.v1), spec.aliases and an ingress route's
// redirect_to: every field reads from its JSON name, later
// fields are ignored, and a spec without host keys, as every release
// before it wrote, neither reads one nor writes one, nor aliases (so its spec hash
// and Saved State stay as they were).
func TestContainerSpecHostFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/container-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec    ContainerSpec `json:"spec"`
		OldSpec ContainerSpec `json:"old_spec"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	h := doc.Spec.Host
	if h == nil {
		t.Fatal("spec.host did not read")
	}
	checks := map[string]bool{
		"cap_add":                     len(h.CapAdd) == 1 && h.CapAdd[0] == "NET_ADMIN",
		"cap_drop":                    len(h.CapDrop) == 1 && h.CapDrop[0] == "MKNOD",
		"privileged, init, read_only": h.Privileged && h.Init && h.ReadOnly,
		"security_opt":                len(h.SecurityOpt) == 1,
		"devices":                     len(h.Devices) == 2 && h.Devices[1].Target == "/dev/modem" && h.Devices[1].Permissions == "rw",
		"device_requests":             len(h.GPUs) == 1 && h.GPUs[0].Count == -1 && h.GPUs[0].Driver == "nvidia",
		"tmpfs":                       h.Tmpfs["/tmp"] == "size=64m" && len(h.Tmpfs) == 2,
		"shm_size_bytes":              h.ShmBytes == 256<<20,
		"ulimits":                     h.Ulimits["nofile"] == Ulimit{Soft: 1024, Hard: 4096},
		"sysctls":                     h.Sysctls["net.core.somaxconn"] == "1024",
		"extra_hosts":                 len(h.ExtraHosts) == 1,
		"stop_signal":                 h.StopSignal == "SIGINT",
		"stop_timeout_seconds":        h.StopTimeoutSeconds != nil && *h.StopTimeoutSeconds == 30,
		"memory_reservation_bytes":    h.MemoryReservationBytes == 64<<20,
		"pids_limit":                  h.PidsLimit == 200,
		"log_options":                 h.LogOptions["max-size"] == "20m",
	}
	for field, ok := range checks {
		if !ok {
			t.Errorf("spec.host.%s did not read: %+v", field, h)
		}
	}
	if a := doc.Spec.Aliases; len(a) != 2 || a["external:payments"][0] != "pay" || len(a["shop-production"]) != 2 || len(doc.Spec.Networks) != 2 {
		t.Errorf("spec.networks and spec.aliases did not read: %v %v", doc.Spec.Networks, a)
	}
	if in := doc.Spec.Ingress; len(in) != 2 || in[0].RedirectTo != "" || in[1].RedirectTo != "example.com" || in[1].Hostname != "www.example.com" {
		t.Errorf("spec.ingress redirect_to (ployz.container.redirects.v1) did not read: %+v", in)
	}
	if doc.OldSpec.Host != nil {
		t.Fatalf("a spec without host keys read %+v", doc.OldSpec.Host)
	}
	out, err := json.Marshal(doc.OldSpec)
	if err != nil || strings.Contains(string(out), `"host"`) || strings.Contains(string(out), `"aliases"`) {
		t.Fatalf("a spec without host keys encodes as %s %v", out, err)
	}
}
