package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/plugins/ingress-caddy/acmetest"
	"github.com/ployz/ployz/sdk/ingress"
)

// httpsCompose is ingressCompose with a second route on the same hostname,
// /plain, that opts out of the redirect to HTTPS: HTTP requests there keep
// reaching web once the certificate is loaded.
const httpsCompose = ingressCompose + `      - hostname: hello.example.test
        path: /plain
        container_port: 8080
        redirect_https: false
`

// TestIngressHTTPS runs a real ACME CA (Pebble, with challtestsrv as its
// DNS resolving every name to m1) on the test host and points the three
// Machines' daemons at it (PLOYZ_ACME_DIRECTORY in /etc/ployz/ployz.env).
// After a deploy with an x-ports hostname the Cluster obtains one
// certificate through real HTTP-01 validation, shares it through the
// certificates table, and every Machine serves that same certificate on
// :443, verified against Pebble's root, while :80 redirects to it (308)
// except on the route that opts out.
// hostOnLab is this host's address on l's Docker network, where a server
// the test starts is reachable from the Machines.
func hostOnLab(t *testing.T, ctx context.Context, l *lab.Lab) string {
	t.Helper()
	gw, err := exec.CommandContext(ctx, "docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", l.Network).Output()
	if err != nil {
		t.Fatalf("lab network gateway: %v", err)
	}
	bind := strings.TrimSpace(string(gw))
	if net.ParseIP(bind) == nil { // no explicit gateway: Docker's is the subnet's .1
		a := l.Machines[0].IP.As4()
		a[3] = 1
		bind = net.IP(a[:]).String()
	}
	return bind
}

func TestIngressHTTPS(t *testing.T) {
	needLab(t)
	const host, rankDelay = "hello.example.test", 5
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()

	m1 := l.Machines[0].IP.String()
	bind := hostOnLab(t, ctx, l)
	p := acmetest.Start(t, acmetest.Options{Bind: bind, ResolveTo: m1, HTTPPort: 80})
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("%s=%s\n%s=/etc/ployz/acme-ca.pem\n%s=%d\n", ingress.EnvACMEDirectory, p.Directory,
		ingress.EnvACMECAFile, ingress.EnvACMERankDelay, rankDelay)
	for _, m := range l.Machines {
		// The daemon reads ployz.env at start; /etc/hosts makes the
		// hostname check (/.ployz-verify) reach the Cluster as the CA does.
		script := fmt.Sprintf("mkdir -p /etc/ployz && printf '%%s' '%s' > /etc/ployz/acme-ca.pem && printf '%%s' '%s' > /etc/ployz/ployz.env && echo '%s %s' >> /etc/hosts && systemctl try-restart ployz.service",
			ca, env, m1, host)
		if out, err := l.Exec(ctx, m.Name, "sh", "-c", script); err != nil {
			t.Fatalf("%s: %v %s", m.Name, err, out)
		}
	}
	formCluster(t, l, op)
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" ingress unit active", func() error {
			out, err := l.Exec(ctx, m.Name, "systemctl", "is-active", "ployz-plugin@ingress-caddy.service")
			if err != nil || out != "active" {
				return fmt.Errorf("ployz-plugin@ingress-caddy.service %q: %v", out, err)
			}
			return nil
		})
	}
	t.Logf("lab, Pebble and Cluster ready %s after the start", time.Since(start).Round(100*time.Millisecond))

	deployed := time.Now()
	doc, errs, code := deployFile(t, op, httpsCompose)
	if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	var certs map[string]ingress.CertificateState // Machine -> its view of host
	names := map[string]string{}                  // Machine id -> name
	eventually(t, 90*time.Second, "every Machine loads an issued certificate", func() error {
		out := op.must(t, "ingress", "config", "--json")
		var ms []struct {
			MachineID string          `json:"machine_id"`
			Machine   string          `json:"machine"`
			Status    *ingress.Status `json:"status"`
			Error     string          `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			return err
		}
		certs = map[string]ingress.CertificateState{}
		for _, m := range ms {
			names[m.MachineID] = m.Machine
			if m.Status == nil {
				return fmt.Errorf("%s: %s", m.Machine, m.Error)
			}
			for _, c := range m.Status.Certificates {
				if c.Hostname == host {
					certs[m.Machine] = c
				}
			}
			if c := certs[m.Machine]; c.State != ingress.CertIssued {
				return fmt.Errorf("%s: %+v (skipped %+v)", m.Machine, c, m.Status.SkippedCertificates)
			}
		}
		if len(certs) != 3 {
			return fmt.Errorf("%d Machines report %s", len(certs), host)
		}
		return nil
	})
	t.Logf("certificate issued and loaded on every Machine %s after the deploy started", time.Since(deployed).Round(100*time.Millisecond))

	roots := p.Roots(t)
	serials := map[string]string{}
	for _, m := range l.Machines {
		ip := m.IP.String()
		var serial string
		eventually(t, 30*time.Second, "TLS handshake with "+m.Name, func() error {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ip+":443",
				&tls.Config{ServerName: host, RootCAs: roots})
			if err != nil {
				return err
			}
			defer conn.Close()
			serial = conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
			return nil
		})
		serials[m.Name] = serial
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, ip+":443")
			}}}
		eventually(t, 30*time.Second, "https://"+host+" through "+m.Name, func() error {
			resp, err := hc.Get("https://" + host + "/")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"message":"through-ingress"`) {
				return fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return nil
		})
		// HTTP redirects to HTTPS now that a certificate is loaded, keeping
		// the request (308); the route that opts out keeps serving HTTP.
		if code, loc, err := hostGetNoRedirect(ip, host, "/page?x=1"); err != nil || code != http.StatusPermanentRedirect || loc != "https://"+host+"/page?x=1" {
			t.Errorf("%s http: %d to %q %v, want 308 to https://%s/page?x=1", m.Name, code, loc, err, host)
		}
		if code, body, err := hostGet(ip, host, "/plain"); err != nil || code != 200 || !strings.Contains(body, `"path":"/plain"`) {
			t.Errorf("%s http /plain (redirect_https: false): %d %s %v", m.Name, code, body, err)
		}
	}
	if serials["m1"] == "" || serials["m1"] != serials["m2"] || serials["m1"] != serials["m3"] {
		t.Errorf("Machines serve different certificates: %v", serials)
	}
	t.Logf("every Machine serves serial %s over verified HTTPS", serials["m1"])

	// Issued once for the Cluster: past every rank's turn, Pebble still
	// accepted one order and issued one certificate, and the store holds
	// one row, written by the Machine every status names as issuer.
	time.Sleep(3 * rankDelay * time.Second)
	if p.Orders() != 1 || p.Issued() != 1 {
		t.Errorf("pebble: %d orders, %d certificates; want 1 and 1", p.Orders(), p.Issued())
	}
	issuer := certs["m1"].Issuer
	t.Logf("issued by %s (rank 0 by id); Pebble validated HTTP-01 through m1", names[issuer])
	for m, c := range certs {
		if c.Issuer != issuer || c.NotAfter != certs["m1"].NotAfter {
			t.Errorf("%s sees %+v, m1 sees %+v", m, c, certs["m1"])
		}
	}
	rows, err := l.Exec(ctx, "m2", "curl", "-s", "--unix-socket", storeSocket,
		"-d", `{"query":"SELECT name, owner FROM certificates"}`, "http://store/v1/queries")
	if err != nil || strings.Count(rows, host) != 1 || !strings.Contains(rows, issuer) {
		t.Errorf("certificates table from m2 (issuer %s): %s %v", issuer, rows, err)
	}
	out := op.must(t, "ingress", "config")
	if strings.Count(out, "https issued") != 6 { // two routes of the hostname on each Machine
		t.Errorf("ingress config:\n%s", out)
	}
	t.Logf("ingress config:\n%s", out)
	ingressZeroGapHTTPS(t, ctx, l, op, host, roots)
	t.Logf("TestIngressHTTPS took %s", time.Since(start).Round(100*time.Millisecond))
}

// ingressZeroGapHTTPS runs keep-alive POST loops through every Machine's
// :80 (on /plain, which is not redirected) and :443 (verified TLS) across
// a redeploy, a scale-down, and `systemctl restart` of the ingress and of
// ployzd on every Machine: no request may fail.
func ingressZeroGapHTTPS(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, host string, roots *x509.CertPool) {
	targets := httpTargetsAt(l, "/plain")
	for _, m := range l.Machines {
		ip := m.IP.String()
		targets = append(targets, loopTarget{name: ip + ":443", url: "https://" + host + "/", client: func() *http.Client {
			return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, ip+":443")
				}}}
		}})
	}
	restart := func(unit string) func() {
		return func() {
			for _, m := range l.Machines {
				if _, err := l.Exec(ctx, m.Name, "systemctl", "restart", unit); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Second)
			}
		}
	}
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"a redeploy", func() {
			doc, errs, code := deployFile(t, op, strings.Replace(httpsCompose, "through-ingress", "through-ingress-v2", 1))
			if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
				t.Fatalf("redeploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
			}
		}},
		{"a scale-down from 2 to 1", func() { op.must(t, "scale", "web", "1", "-p", "hello", "-y") }},
		{"systemctl restart ployz-plugin@ingress-caddy on every Machine", restart("ployz-plugin@ingress-caddy.service")},
		{"systemctl restart ployz on every Machine", restart("ployz.service")},
	} {
		loop := startLoopOn(host, targets)
		time.Sleep(time.Second)
		step.do()
		time.Sleep(2 * time.Second)
		loop.end(t, step.what+" (every Machine's :80 and :443)")
	}
}

// hostGetNoRedirect sends GET path with Host host to ip:80 and returns the
// status and Location without following it.
func hostGetNoRedirect(ip, host, path string) (int, string, error) {
	req, err := http.NewRequest("GET", "http://"+ip+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}
