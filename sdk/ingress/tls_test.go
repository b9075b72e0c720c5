package ingress

import (
	"strings"
	"testing"
)

func TestACMEFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	a, err := ACMEFromEnv(env(nil))
	if err != nil || a == nil || a.Directory != LetsEncryptDirectory {
		t.Fatalf("unset: %+v %v, want Let's Encrypt", a, err)
	}
	a, err = ACMEFromEnv(env(map[string]string{EnvACMEDirectory: " "}))
	if err != nil || a != nil {
		t.Fatalf("empty: %+v %v, want off", a, err)
	}
	a, err = ACMEFromEnv(env(map[string]string{EnvACMEDirectory: "https://ca.test/dir", EnvACMECAFile: "/etc/ca.pem",
		EnvACMEEmail: "ops@x.test", EnvACMERankDelay: "5"}))
	if err != nil || *a != (ACMESpec{Directory: "https://ca.test/dir", CAFile: "/etc/ca.pem", Email: "ops@x.test", RankDelaySeconds: 5}) {
		t.Fatalf("set: %+v %v", a, err)
	}
	if _, err := ACMEFromEnv(env(map[string]string{EnvACMERankDelay: "soon"})); err == nil || !strings.Contains(err.Error(), EnvACMERankDelay) {
		t.Fatalf("bad rank delay: %v", err)
	}
}

func TestSpecTLSFields(t *testing.T) {
	base := `{"machine":"m","listen":":80","store_api":"127.0.0.1:7571"`
	s, err := ParseSpec([]byte(base + `}`))
	if err != nil || s.ACME != nil || s.ListenTLS != "" {
		t.Fatalf("no acme: %+v %v", s, err)
	}
	s, err = ParseSpec([]byte(base + `,"acme":{"directory":"https://ca.test/dir"}}`))
	if err != nil || s.ListenTLS != DefaultListenTLS || s.ACME.RankDelaySeconds != DefaultRankDelaySeconds {
		t.Fatalf("defaults: %+v %v", s, err)
	}
	for extra, field := range map[string]string{
		`,"acme":{"directory":"http://ca.test/dir"}`:                      `"acme.directory"`,
		`,"acme":{"directory":"not a url"}`:                               `"acme.directory"`,
		`,"acme":{"directory":"https://ca.test","ca_file":"rel.pem"}`:     `"acme.ca_file"`,
		`,"acme":{"directory":"https://ca.test","email":"nobody"}`:        `"acme.email"`,
		`,"acme":{"directory":"https://ca.test","rank_delay_seconds":-1}`: `"acme.rank_delay_seconds"`,
		`,"acme":{"directory":"https://ca.test"},"listen_tls":"443"`:      `"listen_tls"`,
		`,"acme":{"directory":"https://ca.test"},"listen_tls":":80"`:      `"listen_tls"`,
	} {
		if _, err := ParseSpec([]byte(base + extra + `}`)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", extra, err, field)
		}
	}
}
