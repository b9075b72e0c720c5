package acmetest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
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

// BINDOptions configure StartBINDWith.
type BINDOptions struct {
	// Listen is the IPv4 address named listens on (default 127.0.0.1):
	// another address when the ACME clients run elsewhere (lab Machines
	// reach the test host on its Docker network gateway).
	Listen string
	// Static are further zones served as written and never updated:
	// zone name -> zone-file lines after the SOA and NS, with names
	// relative to the zone ("* IN A 10.0.0.2" resolves every name under
	// it, as HTTP-01 validation needs).
	Static map[string][]string
}

// StartBIND runs named for zone on 127.0.0.1 until t ends. Without named
// it skips, or fails under PLOYZ_REQUIRE_PRIVILEGED=1 (make test:
// packaging/prereq.sh installs bind9).
func StartBIND(t testing.TB, zone string) *BIND {
	t.Helper()
	return StartBINDWith(t, zone, BINDOptions{})
}

// StartBINDWith is StartBIND with options: another listening address,
// more zones.
func StartBINDWith(t testing.TB, zone string, o BINDOptions) *BIND {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1"
	}
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
	port := FreePort(t, o.Listen)
	b.Addr = net.JoinHostPort(o.Listen, strconv.Itoa(port))
	origin := strings.TrimSuffix(b.Zone, ".")
	files := map[string]string{"zone.db": zoneHead(origin)}
	var static strings.Builder
	i := 0
	for name, records := range o.Static {
		name = strings.TrimSuffix(name, ".")
		file := fmt.Sprintf("static%d.db", i)
		i++
		files[file] = zoneHead(name) + strings.Join(records, "\n") + "\n"
		fmt.Fprintf(&static, "zone \"%s\" { type primary; file \"%s/%s\"; };\n", name, dir, file)
	}
	conf := fmt.Sprintf(`options {
	directory "%[1]s";
	pid-file "%[1]s/named.pid";
	session-keyfile "%[1]s/session.key";
	managed-keys-directory "%[1]s";
	listen-on port %[2]d { %[7]s; };
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
%[8]s`, dir, port, b.KeyName, b.Algorithm, b.Secret, origin, o.Listen, static.String())
	files["named.conf"] = conf
	for name, body := range files {
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

// zoneHead is the start of a zone file for origin: its SOA and NS.
func zoneHead(origin string) string {
	return fmt.Sprintf("$TTL 60\n@ IN SOA ns1.%[1]s. hostmaster.%[1]s. 1 60 60 600 60\n@ IN NS ns1.%[1]s.\nns1 IN A 127.0.0.1\n", origin)
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
