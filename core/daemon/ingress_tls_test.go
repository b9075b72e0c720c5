package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/sdk/ingress"
)

// PLOYZ_ACME_DIRECTORY in the daemon's environment reaches the spec:
// unset is Let's Encrypt, empty is HTTPS off, a URL is that CA; a
// malformed one is refused by the spec check, naming the field.
func TestIngressSpecACME(t *testing.T) {
	d := &Daemon{cfg: Config{DataDir: "/var/lib/ployz", RunDir: t.TempDir()}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: "abc", Phase: machine.Participating}}
	spec := func() (ingress.Spec, error) {
		b, err := d.ingressSpec()
		if err != nil {
			return ingress.Spec{}, err
		}
		return ingress.ParseSpec(b)
	}
	t.Setenv(ingress.EnvACMEDirectory, "")
	os.Unsetenv(ingress.EnvACMEDirectory)
	s, err := spec()
	if err != nil || s.ACME == nil || s.ACME.Directory != ingress.LetsEncryptDirectory || s.ListenTLS != ":443" {
		t.Fatalf("unset: %+v %v", s, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "")
	if s, err := spec(); err != nil || s.ACME != nil || s.ListenTLS != "" {
		t.Fatalf("empty: %+v %v", s, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "https://pebble.test:14000/dir")
	t.Setenv(ingress.EnvACMECAFile, "/etc/ployz/ca.pem")
	t.Setenv(ingress.EnvACMERankDelay, "2")
	s, err = spec()
	if err != nil || s.ACME.Directory != "https://pebble.test:14000/dir" || s.ACME.CAFile != "/etc/ployz/ca.pem" || s.ACME.RankDelaySeconds != 2 {
		t.Fatalf("set: %+v %v", s.ACME, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "http://plain.test/dir")
	if _, err := spec(); err == nil || !strings.Contains(err.Error(), `"acme.directory"`) {
		t.Fatalf("http directory: %v", err)
	}
}
