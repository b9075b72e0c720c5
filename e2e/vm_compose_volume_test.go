package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// vmComposeVolume deploys a compose file declaring a ployz-zfs volume on
// VM Machines that both have a pool: the first deploy creates it as the
// Writer on one Machine and places the Service there; a redeploy creates
// nothing and finds the data; a bad driver_opts is refused naming it.
func vmComposeVolume(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, refused func(*testing.T, string, ...string)) {
	const vol = "notes-production-data"
	compose := func(message, opts string) string {
		f := filepath.Join(t.TempDir(), "compose.yaml")
		doc := `name: notes
services:
  app:
    image: ` + lab.TestAppImage + `
    environment: {DATA_DIR: /data, MESSAGE: ` + message + `}
    ports: ["18081:8080"]
    volumes: ["data:/data"]
volumes:
  data:
    driver: ployz-zfs
    driver_opts: {` + opts + `}
`
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	refused(t, "volumes.data.driver_opts.compression: ployz-zfs takes only size", "deploy", "-f", compose("one", "compression: lz4"), "-y")

	var first struct {
		Plan deploy.Plan `json:"plan"`
	}
	op.json(t, &first, "deploy", "-f", compose("one", "size: 32MiB"), "-y", "--json")
	var at string
	for _, r := range first.Plan.Rows {
		if r.Op == deploy.OpCreateVolume {
			if r.Volume != vol || r.SizeBytes != 32<<20 {
				t.Fatalf("create-volume row %+v", r)
			}
			at = r.Machine
		}
	}
	if at == "" {
		t.Fatalf("the first deploy created no volume: %+v", first.Plan.Rows)
	}
	var v struct {
		Volume rpc.Volume `json:"volume"`
	}
	op.json(t, &v, "volume", "inspect", vol, "--machine", at)
	if v.Volume.Copy == nil || v.Volume.Copy.Role != "writer" || v.Volume.SizeBytes != 32<<20 {
		t.Fatalf("%s's copy of %s: %+v", at, vol, v.Volume)
	}
	lm, err := l.Machine(at)
	if err != nil {
		t.Fatal(err)
	}
	ip := lm.IP.String()
	client := &http.Client{Timeout: 3 * time.Second}
	appendLine := func(line string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			code, body, err := oneShotURL(client, "http://"+ip+":18081/append?line="+line, "")
			if err == nil && code == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("append %s on %s: %d %s %v", line, at, code, body, err)
			}
		}
	}
	appendLine("before-redeploy")

	var second struct {
		Plan deploy.Plan `json:"plan"`
	}
	op.json(t, &second, "deploy", "-f", compose("two", "size: 32MiB"), "-y", "--json")
	for _, r := range second.Plan.Rows {
		if r.Op == deploy.OpCreateVolume || r.Op != deploy.OpUnchanged && r.Machine != at {
			t.Fatalf("the redeploy planned %s on %s: %+v", r.Op, r.Machine, second.Plan.Rows)
		}
	}
	appendLine("after-redeploy")
	var out string
	out, err = l.Exec(ctx, at, "cat", "/var/lib/ployz/volumes/"+vol+"/appended")
	if err != nil || strings.Join(strings.Fields(out), ",") != "before-redeploy,after-redeploy" {
		t.Fatalf("the volume on %s holds %q (%v)", at, out, err)
	}
	t.Logf("compose volume %s created on %s as its Writer (32MiB quota); a redeploy kept the Service and its data there", vol, at)
}
