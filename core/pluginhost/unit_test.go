package pluginhost

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCapabilityErrorRoundTrip(t *testing.T) {
	err := CapabilityError(codes.Unavailable, "ployz.dns.serve.v1", "dns is down")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("code %v", status.Code(err))
	}
	if c, ok := CapabilityFromError(fmt.Errorf("route: %w", err)); !ok || c != "ployz.dns.serve.v1" {
		t.Fatalf("CapabilityFromError = %q, %v", c, ok)
	}
	if _, ok := CapabilityFromError(status.Error(codes.Unavailable, "plain")); ok {
		t.Fatal("capability found in a plain status")
	}
	if _, ok := CapabilityFromError(errors.New("x")); ok {
		t.Fatal("capability found in a non-status error")
	}
}

func TestCatalogLookup(t *testing.T) {
	c := NewCatalog()
	if conflicts := c.publish("a", 1, []string{"x.y.v1"}, nil); len(conflicts) != 0 {
		t.Fatal(conflicts)
	}
	if conflicts := c.publish("b", 1, []string{"x.y.v1"}, nil); len(conflicts) != 1 {
		t.Fatalf("conflict not reported: %v", conflicts)
	}
	if p, err := c.Lookup("x.y.v1"); err != nil || p.Plugin != "a" {
		t.Fatalf("Lookup = %+v, %v", p, err)
	}
	c.withdraw("a")
	_, err := c.Lookup("x.y.v1")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("withdrawn capability: %v", err)
	}
	_, err = c.Lookup("never.served.v1")
	if cap, _ := CapabilityFromError(err); status.Code(err) != codes.Unimplemented || cap != "never.served.v1" {
		t.Fatalf("unknown capability: %v", err)
	}
}

func TestManifestValidate(t *testing.T) {
	d := strings.Repeat("ab", 32)
	ok := Entry{Name: "a", SHA256: d, Lifecycle: LifecycleManaged}
	for field, m := range map[string]Manifest{
		"plugins[1].name":      {Plugins: []Entry{ok, ok}},
		"plugins[0].sha256":    {Plugins: []Entry{{Name: "a", SHA256: "abc", Lifecycle: LifecycleManaged}}},
		"plugins[1].lifecycle": {Plugins: []Entry{ok, {Name: "b", SHA256: d, Lifecycle: "forever"}}},
		"plugins[0].name":      {Plugins: []Entry{{Name: "A B", SHA256: d, Lifecycle: LifecycleManaged}}},
	} {
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), `field "`+field+`"`) {
			t.Errorf("%s: refusal %v does not name the field", field, err)
		}
	}
	if err := (&Manifest{Plugins: []Entry{ok}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestInstallReplacesAndRelinks(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(t.TempDir(), "ployz-x")
	for i, content := range []string{"one", "two"} {
		if err := os.WriteFile(src, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		e, err := Install(dir, src, "x", LifecycleLongLived, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := LoadManifest(ManifestPath(dir))
		if err != nil || len(m.Plugins) != 1 || m.Plugins[0].SHA256 != e.SHA256 {
			t.Fatalf("install %d: manifest %+v, %v", i, m, err)
		}
		if b, err := os.ReadFile(LinkPath(dir, "x")); err != nil || string(b) != content {
			t.Fatalf("install %d: link reads %q, %v", i, b, err)
		}
	}
}
