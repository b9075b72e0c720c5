package ingress

import (
	"encoding/json"
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

func TestCaddyConfigTLS(t *testing.T) {
	routes := []Route{{Hostname: "a.test", Owner: "p/web", State: "published", Upstreams: []string{"10.0.0.1:8080"}}}
	plain, _ := CaddyConfig(":80", "m1", "/tmp/s", routes)
	for _, empty := range []TLS{{}, {Listen: ":443"}} {
		same, err := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, empty)
		if err != nil || string(same) != string(plain) {
			t.Fatalf("TLS without material or challenges changed the config: %v", err)
		}
	}
	in := TLS{Listen: ":443", Certificates: []Certificate{{CertPEM: "C", KeyPEM: "K"}},
		Challenges: []Challenge{{Token: "tok", KeyAuthorization: "tok.x"}}}
	b, err := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, in)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := CaddyConfigTLS(":80", "m1", "/tmp/s", routes, in)
	if string(again) != string(b) {
		t.Fatal("not deterministic")
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen      []string          `json:"listen"`
					AutoHTTPS   map[string]bool   `json:"automatic_https"`
					TLSPolicies []json.RawMessage `json:"tls_connection_policies"`
					Routes      []json.RawMessage `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
			TLS struct {
				Certificates struct {
					LoadPEM []struct{ Certificate, Key string } `json:"load_pem"`
				} `json:"certificates"`
				Automation json.RawMessage `json:"automation"`
			} `json:"tls"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	h, s := cfg.Apps.HTTP.Servers["ingress"], cfg.Apps.HTTP.Servers["ingress_tls"]
	if len(h.Routes) != 4 || !strings.Contains(string(h.Routes[0]), ChallengePathPrefix+"tok") || !strings.Contains(string(h.Routes[0]), "tok.x") {
		t.Fatalf("http routes: %s", h.Routes)
	}
	if s.Listen[0] != ":443" || !s.AutoHTTPS["disable"] || len(s.TLSPolicies) != 1 || len(s.Routes) != 3 {
		t.Fatalf("https server: %+v", s)
	}
	if lp := cfg.Apps.TLS.Certificates.LoadPEM; len(lp) != 1 || lp[0].Certificate != "C" || lp[0].Key != "K" || cfg.Apps.TLS.Automation != nil {
		t.Fatalf("tls app: %+v", cfg.Apps.TLS)
	}
}
