package upgrade

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/version"
)

// testHost is a Machine whose data directory is dir; the swap unit
// never starts here (every upload is refused first).
type testHost struct{ dir string }

func (h testHost) DataDir() string { return h.dir }
func (testHost) Socket() string    { return "" }

func testBundle(t *testing.T, v, arch string) []byte {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"ployzd", "ployz-dns"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte(v+b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	_, err := release.Write(&buf, release.Manifest{Version: v, ProtocolMajor: version.ProtocolMajor, OS: runtime.GOOS, Arch: arch},
		[]release.Source{{Path: "bin/ployzd", From: filepath.Join(dir, "ployzd")}, {Path: "bin/ployz-dns", From: filepath.Join(dir, "ployz-dns")}})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unsignedReq is the request for bundle b of version v, without a proof.
func unsignedReq(v string, b []byte) rpc.UpgradeRequest {
	s := sha256.Sum256(b)
	return rpc.UpgradeRequest{Version: v, SHA256: hex.EncodeToString(s[:]), Size: int64(len(b))}
}

// signedReq is unsignedReq with the bundle's detached signature by key.
func signedReq(v string, b []byte, key ed25519.PrivateKey) rpc.UpgradeRequest {
	r := unsignedReq(v, b)
	r.Proof = &rpc.BundleProof{Signature: release.Sign(release.BundleStatement(r.SHA256), key)}
	return r
}

func field(err error) string {
	var e *rpc.Error
	if errors.As(err, &e) {
		f, _ := e.Details["field"].(string)
		return f
	}
	return ""
}

func TestUpgradeRequestValidate(t *testing.T) {
	ok := unsignedReq("1.2.3", []byte("x"))
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*rpc.UpgradeRequest){
		"version": func(r *rpc.UpgradeRequest) { r.Version = "../../etc" },
		"sha256":  func(r *rpc.UpgradeRequest) { r.SHA256 = "abc" },
		"size":    func(r *rpc.UpgradeRequest) { r.Size = 0 },
		"proof.index": func(r *rpc.UpgradeRequest) {
			r.Proof = &rpc.BundleProof{Index: make([]byte, rpc.MaxProofBytes+1)}
		},
	}
	for f, edit := range cases {
		r := ok
		edit(&r)
		if got := field(r.Validate()); got != f {
			t.Errorf("%s: refusal names %q", f, got)
		}
	}
}

func TestStageReleaseVerifies(t *testing.T) {
	root := t.TempDir()
	key, restore := release.TrustNewKeyForTest()
	t.Cleanup(restore)
	reqFor := func(v string, b []byte) rpc.UpgradeRequest { return signedReq(v, b, key) }
	b := testBundle(t, "9.9.9", runtime.GOARCH)
	dir, err := stageRelease(root, reqFor("9.9.9", b), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bin", "ployzd")); string(got) != "9.9.9ployzd" {
		t.Fatalf("staged ployzd %q", got)
	}
	// A digest that does not match what arrived.
	bad := reqFor("9.9.9", b)
	bad.SHA256 = strings.Repeat("0", 64)
	if _, err := stageRelease(root, bad, bytes.NewReader(b)); field(err) != "sha256" {
		t.Fatalf("wrong digest: %v", err)
	}
	// Fewer bytes than announced.
	if _, err := stageRelease(root, reqFor("9.9.9", b), bytes.NewReader(b[:len(b)/2])); field(err) != "size" {
		t.Fatalf("short upload: %v", err)
	}
	// A bundle that says another version than the request.
	if _, err := stageRelease(root, reqFor("9.9.8", b), bytes.NewReader(b)); field(err) != "version" {
		t.Fatalf("version mismatch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "9.9.8")); !os.IsNotExist(err) {
		t.Fatal("a refused bundle stayed staged")
	}
	// Another arch is refused before anything is installed.
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	ob := testBundle(t, "9.9.7", other)
	if _, err := stageRelease(root, reqFor("9.9.7", ob), bytes.NewReader(ob)); err == nil || !strings.Contains(err.Error(), "arch is "+other) {
		t.Fatalf("other arch: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(root, ".upload-*"))
	if len(left) > 0 {
		t.Fatalf("uploads left behind: %v", left)
	}
}

func TestAdoptKeepsLooseRelease(t *testing.T) {
	bin, units, data := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(bin, "ployzd"), []byte("old"), 0o755)
	os.WriteFile(filepath.Join(bin, "ployz-dns"), []byte("olddns"), 0o755)
	os.WriteFile(filepath.Join(units, "ployz.service"), []byte("[Unit]"), 0o644)
	a := &applier{cfg: ApplyConfig{From: "1.0", BinDir: bin, UnitDir: units, DataDir: data}, root: filepath.Join(data, "releases")}
	if err := a.adopt(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"bin/ployzd": "old", "bin/ployz-dns": "olddns", "systemd/ployz.service": "[Unit]"} {
		got, err := os.ReadFile(filepath.Join(a.root, "1.0", p))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v", p, got, err)
		}
	}
	if err := (&applier{cfg: ApplyConfig{From: "0.9", BinDir: t.TempDir(), UnitDir: units}, root: a.root}).adopt(); err == nil {
		t.Fatal("adopting a release without ployzd succeeded")
	}
}

func TestPluginsOn(t *testing.T) {
	before := rpc.Inspection{Plugins: []rpc.PluginView{
		{Name: "dns", Health: "healthy", Capabilities: []string{"ployz.dns.v1"}},
		{Name: "volume-zfs", Health: "refused"},
	}}
	want := map[string]string{"dns": "new", "volume-zfs": "newz"}
	in := rpc.Inspection{Capabilities: []string{"ployz.dns.v1"}, Plugins: []rpc.PluginView{
		{Name: "dns", Health: "healthy", SHA256: "new", Capabilities: []string{"ployz.dns.v1"}},
		{Name: "volume-zfs", Health: "refused", SHA256: "newz"},
	}}
	if err := pluginsOn(before, in, want); err != nil {
		t.Fatal(err)
	}
	in.Plugins[0].RunningSHA256 = "old"
	if err := pluginsOn(before, in, want); err == nil {
		t.Fatal("a plugin still running its old binary passed")
	}
	var final *finalError
	if err := pluginsOn(before, in, want); errors.As(err, &final) {
		t.Fatalf("a switch still under way ends the wait: %v", err)
	}
	in.Plugins[0].SwitchError = "handoff to the installed binary failed: successor exited (exit status 1)"
	if err := pluginsOn(before, in, want); !errors.As(err, &final) || !strings.Contains(err.Error(), "successor exited") {
		t.Fatalf("a failed handoff must end the wait at once, naming why: %v", err)
	}
	in.Plugins[0].SwitchError = ""
	in.Plugins[0].RunningSHA256, in.Plugins[0].Health = "", "down"
	if err := pluginsOn(before, in, want); err == nil || !strings.Contains(err.Error(), "plugin dns: down") {
		t.Fatalf("down plugin: %v", err)
	}
	in.Plugins[0].Health, in.Capabilities = "healthy", nil
	if err := pluginsOn(before, in, want); err == nil || !strings.Contains(err.Error(), "not advertised") {
		t.Fatalf("capability gone: %v", err)
	}
	in.Plugins[1].SHA256 = "old"
	in.Capabilities = []string{"ployz.dns.v1"}
	if err := pluginsOn(before, in, want); err == nil || !strings.Contains(err.Error(), "volume-zfs: installed") {
		t.Fatalf("plugin not installed: %v", err)
	}
}

// TestDNSAnswers: the hand-built query gets a reply from a responder that
// answers it, and a timeout from one that never answers.
func TestDNSAnswers(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 17 || string(buf[13:32]) != "ployz-upgrade-check" {
				continue
			}
			buf[2] |= 0x80 // a response, NXDOMAIN or not: any reply counts
			pc.WriteTo(buf[:n], from)
		}
	}()
	if err := dnsAnswers(pc.LocalAddr().String()); err != nil {
		t.Fatal(err)
	}
	silent, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer silent.Close()
	if err := dnsAnswers(silent.LocalAddr().String()); err == nil {
		t.Fatal("a silent server counted as serving DNS")
	}
}

// TestPruneKeepsTwoReleases: after an upgrade the Machine keeps the
// release it runs and the one the way back needs; older ones, the
// current link, the status file and uploads in flight stay as they are.
func TestPruneKeepsTwoReleases(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"0.8.0/bin", "0.9.0/bin", "1.0.0/bin", ".upload-x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("1.0.0", filepath.Join(root, "current"))
	os.WriteFile(filepath.Join(root, "status.json"), []byte("{}"), 0o600)
	a := &applier{cfg: ApplyConfig{From: "0.9.0", To: "1.0.0", Log: hclog.NewNullLogger()}, root: root}
	a.prune()
	entries, _ := os.ReadDir(root)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{".upload-x", "0.9.0", "1.0.0", "current", "status.json"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// TestUploadRefusedUnlessSigned pushes bundles to the feature served
// over a Machine RPC socket as `ployz machine upgrade` and `plugin upgrade` do: one
// without a signature, one signed by a key the Machine does not trust,
// one carrying another bundle's signature (tampered) and one whose
// signed index does not list it are each refused before anything is
// staged, naming the bundle and the key the Machine trusts. The CLI's
// checks are not involved: any member with RPC access could push these.
func TestUploadRefusedUnlessSigned(t *testing.T) {
	dataDir := t.TempDir()
	f := New(testHost{dataDir}, hclog.NewNullLogger())
	c := featuretest.Serve(t, f.Routes(), f.Streams())
	key, restore := release.TrustNewKeyForTest()
	t.Cleanup(restore)
	_, other, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	write := func(v string) release.Bundle {
		b := testBundle(t, v, runtime.GOARCH)
		p := filepath.Join(dir, release.BundleName(v, runtime.GOOS, runtime.GOARCH))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return release.Bundle{Path: p, Manifest: &release.Manifest{Version: v}}
	}
	b, a := write("9.9.9"), write("9.9.8")
	sigOver := func(bd release.Bundle, k ed25519.PrivateKey) *rpc.BundleProof {
		sum, _, err := release.Digest(bd.Path)
		if err != nil {
			t.Fatal(err)
		}
		return &rpc.BundleProof{Signature: release.Sign(release.BundleStatement(sum), k)}
	}
	aSum, aSize, _ := release.Digest(a.Path)
	index, _ := json.Marshal(release.Index{Format: 1, Version: "9.9.8", Line: "v9", Artifacts: []release.Artifact{
		{Name: filepath.Base(a.Path), Kind: release.KindBundle, Size: aSize, SHA256: aSum}}})
	cases := []struct {
		what, plugin, says string
		proof              *rpc.BundleProof
	}{
		{"unsigned", "", "no " + filepath.Base(b.Path) + ".sig", nil},
		{"signed by an untrusted key", "dns", "signed by key " + release.KeyID(other.Public().(ed25519.PublicKey)), sigOver(b, other)},
		{"another bundle's signature", "", "does not match its content", sigOver(a, key)},
		{"an index not listing it", "dns", "does not list a bundle", &rpc.BundleProof{Index: index, IndexSignature: release.Sign(index, key)}},
	}
	trusted := release.KeyID(key.Public().(ed25519.PublicKey))
	for _, tc := range cases {
		b.Proof = tc.proof
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		if tc.plugin != "" {
			_, err = release.PushPlugin(ctx, c, "", b, tc.plugin)
		} else {
			_, err = release.Push(ctx, c, "", b)
		}
		cancel()
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond || field(err) != "proof" ||
			!strings.Contains(err.Error(), "bundle "+filepath.Base(b.Path)+": not signed by a trusted release key (trusted: "+trusted+")") ||
			!strings.Contains(err.Error(), tc.says) {
			t.Fatalf("%s: %v", tc.what, err)
		}
		t.Logf("%s: %v", tc.what, err)
	}
	staged, _ := filepath.Glob(filepath.Join(dataDir, "releases", "*"))
	if len(staged) > 0 {
		t.Fatalf("refused uploads left %v", staged)
	}
}
