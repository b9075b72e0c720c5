package acmetest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ployz/ployz/internal/prereq"
)

// BIND is a real BIND (named) serving one zone authoritatively on a
// loopback port, accepting TSIG-signed RFC 2136 updates of TXT records:
// the DNS a DNS-01 test changes and Pebble validates against.
type BIND struct {
	// Addr is host:port (UDP and TCP).
	Addr string
	// Zone is the zone served, fully qualified ("example.test.").
	Zone string
	// KeyName, Algorithm and Secret are the TSIG key updates are signed
	// with.
	KeyName, Algorithm, Secret string
	mu                         sync.Mutex
	log                        strings.Builder
}

// StartBIND runs named for zone until t ends. Without named it skips,
// or fails under PLOYZ_REQUIRE_PRIVILEGED=1 (make test: packaging/prereq.sh
// installs bind9).
func StartBIND(t testing.TB, zone string) *BIND {
	t.Helper()
	named, err := exec.LookPath("named")
	if err != nil {
		for _, p := range []string{"/usr/sbin/named", "/usr/local/sbin/named"} {
			if _, serr := os.Stat(p); serr == nil {
				named, err = p, nil
			}
		}
	}
	if err != nil {
		prereq.Missing(t, "named (BIND): apt-get install bind9 (packaging/prereq.sh installs it)", err)
	}
	secret := make([]byte, 32)
	rand.Read(secret) // never fails
	b := &BIND{Zone: dns.Fqdn(zone), KeyName: "ployz-test.", Algorithm: "hmac-sha256",
		Secret: base64.StdEncoding.EncodeToString(secret)}
	dir := t.TempDir()
	port := FreePort(t, "127.0.0.1")
	b.Addr = "127.0.0.1:" + strconv.Itoa(port)
	origin := strings.TrimSuffix(b.Zone, ".")
	zoneFile := fmt.Sprintf("$TTL 60\n@ IN SOA ns1.%[1]s. hostmaster.%[1]s. 1 60 60 600 60\n@ IN NS ns1.%[1]s.\nns1 IN A 127.0.0.1\n", origin)
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on port %[2]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	allow-query { any; };
	notify no;
};
controls { };
key "%[3]s" { algorithm %[4]s; secret "%[5]s"; };
zone "%[6]s" {
	type primary;
	file "%[1]s/zone.db";
	journal "%[1]s/zone.jnl";
	update-policy { grant %[3]s zonesub TXT; };
};
`, dir, port, b.KeyName, b.Algorithm, b.Secret, origin)
	for name, body := range map[string]string{"zone.db": zoneFile, "named.conf": conf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(named, "-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
	w := &bindWriter{b: b}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // it may have exited
		cmd.Wait()         // killed
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := new(dns.Msg)
		m.SetQuestion(b.Zone, dns.TypeSOA)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: time.Second}).Exchange(m, b.Addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("named did not answer %s on %s: %v\n%s", b.Zone, b.Addr, err, b.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TXT returns the values of name's TXT records as the server answers
// them now.
func (b *BIND) TXT(t testing.TB, name string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, b.Addr)
	if err != nil {
		t.Fatalf("query %s TXT at %s: %v", name, b.Addr, err)
	}
	var out []string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	return out
}

// Log is what named printed.
func (b *BIND) Log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log.String()
}

type bindWriter struct{ b *BIND }

func (w *bindWriter) Write(p []byte) (int, error) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.b.log.Write(p)
}
