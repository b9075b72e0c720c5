package acme

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// participating lists the ids of the Machines whose record says they
// participate and accept ingress, sorted: the issuing ranks. A Machine
// without ingress runs no proxy, so it never takes a turn.
func participating(ctx context.Context, s Store) ([]string, error) {
	rows, err := s.Machines(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range rows {
		if r.Body.Phase == serving.Participating && store.Accepts(r.Body.Labels, store.AcceptIngress) {
			ids = append(ids, strings.ToLower(r.Key))
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// rank is this Machine's place among the participating ids; a Machine
// missing from them ranks last.
func rank(me string, ids []string) int {
	if i := slices.Index(ids, strings.ToLower(me)); i >= 0 {
		return i
	}
	return len(ids)
}

// job is one issuance this Machine starts: the hostname, its row as
// read, and the DNS provider answering its DNS-01 challenge (nil:
// HTTP-01).
type job struct {
	hostname string
	prev     store.Row[store.CertificateBody]
	dns      *ingress.DNSProvider
}

// evaluate refreshes the snapshot from the certificates rows and returns
// the issuance this Machine should start now, if any and none is being
// issued (hostname empty: none).
func (m *Manager) evaluate(rows []store.Row[store.CertificateBody], ms []string) job {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeErr = ""
	e := &certEvaluation{m: m, now: m.cfg.Now(), snap: Snapshot{TLS: caddyconfig.TLS{Listen: m.cfg.ListenTLS}},
		rank: rank(m.cfg.Machine, ms), machines: len(ms)}
	e.read(rows)
	wanted := map[string]bool{}
	for _, h := range m.wanted() {
		wanted[h] = true
		e.host(h)
	}
	for h := range m.firstSeen {
		if !wanted[h] {
			delete(m.firstSeen, h)
		}
	}
	if e.due != "" {
		m.issuing = e.due
	}
	if !reflect.DeepEqual(m.snap.TLS, e.snap.TLS) {
		select { // the proxy loads the new material or challenges now
		case m.changed <- struct{}{}:
		default:
		}
	}
	m.snap = e.snap
	m.nextAt = e.next
	return job{hostname: e.due, prev: e.prev, dns: e.dueDNS}
}

// certEvaluation is one evaluate run (the Manager's lock held), one
// method per step.
type certEvaluation struct {
	m        *Manager
	now      time.Time
	snap     Snapshot
	views    map[string]certView
	rank     int // this Machine's place among the participating Machines
	machines int
	due      string
	prev     store.Row[store.CertificateBody]
	dueDNS   *ingress.DNSProvider
	users    []ingress.UserCertificate // user certificates that parsed
	dns      []ingress.DNSProvider     // DNS providers that parsed and opened
	next     time.Time                 // the earliest timer due after now (zero: none)
}

// at notes t as a timer of this evaluation: a time after now at which a
// decision changes with no store change (an expiry, a renewal, a turn).
func (e *certEvaluation) at(t time.Time) {
	if t.After(e.now) && (e.next.IsZero() || t.Before(e.next)) {
		e.next = t
	}
}

// certView is one certificates row as read: its material, or why not.
type certView struct {
	row store.Row[store.CertificateBody]
	mat *material
	bad string
}

// read parses every row's material and challenge; a row that does not
// parse is skipped and reported.
func (e *certEvaluation) read(rows []store.Row[store.CertificateBody]) {
	e.views = map[string]certView{}
	for _, r := range rows {
		if isUserRow(r) {
			e.readUser(r)
			continue
		}
		if isDNSProviderRow(r) {
			e.readDNSProvider(r)
			continue
		}
		name := strings.ToLower(r.Key)
		v := certView{row: r}
		mat, err := parseMaterial(name, r.Body)
		if err != nil {
			v.bad = err.Error()
			e.snap.Skipped = append(e.snap.Skipped, ingress.SkippedCertificate{Name: r.Key, Reason: err.Error()})
		}
		v.mat = mat
		ch, err := parseChallenge(r.Body)
		if err != nil {
			e.snap.Skipped = append(e.snap.Skipped, ingress.SkippedCertificate{Name: r.Key, Reason: err.Error()})
		} else if ch != nil && ch.Type == "" { // a dns-01 challenge is answered in DNS, not by the proxies
			e.snap.TLS.Challenges = append(e.snap.TLS.Challenges, caddyconfig.Challenge{Hostname: name, Token: ch.Token, KeyAuthorization: ch.KeyAuthorization})
		}
		e.views[name] = v
	}
	slices.SortFunc(e.snap.TLS.Challenges, func(a, b caddyconfig.Challenge) int {
		return cmp.Or(strings.Compare(a.Token, b.Token), strings.Compare(a.Hostname, b.Hostname))
	})
}

// isUserRow: an operator's certificate (ployz cert add), never issued
// or renewed here.
func isUserRow(r store.Row[store.CertificateBody]) bool {
	return r.Body.Source == ingress.CertSourceUser || strings.HasPrefix(r.Key, ingress.UserCertPrefix)
}

// readUser parses one user certificate row; one that does not parse (or
// whose key did not open) is skipped and reported.
func (e *certEvaluation) readUser(r store.Row[store.CertificateBody]) {
	skip := func(why string) {
		e.snap.Skipped = append(e.snap.Skipped, ingress.SkippedCertificate{Name: r.Key, Reason: why})
	}
	if strings.HasPrefix(r.Body.KeyPEM, "enc:") {
		skip(`field "key_pem" is sealed and this Machine did not open it (sealed by another Cluster, tampered with, or no cluster_secret_file in the ingress spec; see the log)`)
		return
	}
	u, err := ingress.ParseUserCertificate([]byte(r.Body.CertPEM), []byte(r.Body.KeyPEM))
	if err != nil {
		skip(rowField(err))
		return
	}
	e.users = append(e.users, u)
}

// isDNSProviderRow: a DNS provider's configuration, no certificate.
func isDNSProviderRow(r store.Row[store.CertificateBody]) bool {
	return r.Body.Source == ingress.CertSourceDNSProvider || strings.HasPrefix(r.Key, ingress.DNSProviderPrefix)
}

// readDNSProvider checks one DNS provider row and opens its secrets; one
// that does not check or open is skipped and reported, and the names of
// its zone fall back to HTTP-01.
func (e *certEvaluation) readDNSProvider(r store.Row[store.CertificateBody]) {
	skip := func(why string) {
		e.snap.Skipped = append(e.snap.Skipped, ingress.SkippedCertificate{Name: r.Key, Reason: why})
	}
	b := r.Body.DNSProvider
	if b == nil {
		skip(`field "dns_provider" is missing`)
		return
	}
	secrets, err := e.m.cfg.Keys.OpenDNSSecrets(r.Key, b.Secrets)
	if err != nil {
		skip(err.Error())
		return
	}
	p, err := ingress.CheckDNSProvider(ingress.DNSProvider{Name: strings.TrimPrefix(r.Key, ingress.DNSProviderPrefix),
		Provider: b.Provider, Zone: b.Zone, Settings: b.Settings, Secrets: secrets})
	if err != nil {
		skip(err.Error())
		return
	}
	e.dns = append(e.dns, p)
}

// rowField names the row's field in a ParseUserCertificate error, whose
// "cert: " or "key: " names the command's flag.
func rowField(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "cert: "); ok {
		return `field "cert_pem": ` + rest
	}
	if rest, ok := strings.CutPrefix(msg, "key: "); ok {
		return `field "key_pem": ` + rest
	}
	return msg
}

// userCert is the user certificate serving h now: one that covers it and
// has not expired, the latest to expire when several do.
func (e *certEvaluation) userCert(h string) (ingress.UserCertificate, bool) {
	var best ingress.UserCertificate
	found := false
	for _, u := range e.users {
		if e.now.Before(u.NotAfter) && u.Covers(h) && (!found || u.NotAfter.After(best.NotAfter)) {
			best, found = u, true
		}
	}
	return best, found
}

// host states one wanted hostname: a user certificate covering it served
// in preference to anything ACME holds, else its ACME certificate served
// while valid and, when it needs issuing or renewal, whose turn that is.
// A hostname a DNS provider's zone covers is validated with DNS-01,
// others with HTTP-01; a wildcard only a user certificate or DNS-01 can
// serve: HTTP-01 cannot validate one.
func (e *certEvaluation) host(h string) {
	if u, ok := e.userCert(h); ok {
		e.snap.TLS.Certificates = append(e.snap.TLS.Certificates, caddyconfig.Certificate{CertPEM: u.CertPEM, KeyPEM: u.KeyPEM, Hostname: h})
		e.snap.States = append(e.snap.States, ingress.CertificateState{Hostname: h, State: ingress.CertIssued,
			NotAfter: u.NotAfter.Unix(), Issuer: u.Issuer, Source: ingress.CertSourceUser, Detail: "user certificate " + u.ID})
		delete(e.m.firstSeen, h)
		e.at(u.NotAfter)
		return
	}
	prov, viaDNS := ingress.DNSProviderFor(e.dns, h)
	if ingress.IsWildcard(h) && !viaDNS {
		return
	}
	v, exists := e.views[h]
	b := v.row.Body
	st := ingress.CertificateState{Hostname: h, State: ingress.CertPending, Error: b.LastError}
	if b.NextAttemptAt > 0 && b.Failures > 0 {
		st.NextAttemptAt = b.NextAttemptAt
	}
	needs := true
	if v.mat != nil && e.now.Before(v.mat.notAfter) {
		e.snap.TLS.Certificates = append(e.snap.TLS.Certificates, caddyconfig.Certificate{CertPEM: v.mat.certPEM, KeyPEM: v.mat.keyPEM, Hostname: h})
		st.State, st.NotAfter, st.Issuer = ingress.CertIssued, v.mat.notAfter.Unix(), b.Issuer
		needs = !e.now.Before(v.mat.renewAt())
		e.at(v.mat.renewAt())
		e.at(v.mat.notAfter)
	} else if b.Failures > 0 {
		st.State = ingress.CertFailed
	}
	if v.bad != "" {
		st.Detail = "row skipped: " + v.bad
	}
	if viaDNS {
		st.Detail = joinDetail(st.Detail, fmt.Sprintf("dns-01 via DNS provider %q", prov.Name))
	}
	if !needs {
		delete(e.m.firstSeen, h)
	} else if e.schedule(h, v, exists, &st) && viaDNS {
		e.dueDNS = &prov
	}
	e.snap.States = append(e.snap.States, st)
}

// schedule decides whether this Machine issues h now: not while another
// Machine's challenge is fresh or this Machine's hostname check failed,
// and only at its rank's turn after the hostname was first wanted (or the
// next attempt a failure set); one issuance at a time. It reports
// whether h is due now.
func (e *certEvaluation) schedule(h string, v certView, exists bool, st *ingress.CertificateState) bool {
	m, b := e.m, v.row.Body
	if m.firstSeen[h].IsZero() {
		m.firstSeen[h] = e.now
	}
	base := m.firstSeen[h]
	if next := time.Unix(b.NextAttemptAt, 0); b.NextAttemptAt > 0 && next.After(base) {
		base = next
	}
	updated := time.UnixMilli(v.row.UpdatedAt)
	foreign := exists && b.Challenge != nil && !strings.EqualFold(b.Issuer, m.cfg.Machine)
	lw := m.local[h]
	switch {
	case m.issuing == h:
		st.Detail = joinDetail(st.Detail, "issuing on this Machine")
		return false
	case foreign && e.now.Sub(updated) < m.cfg.ChallengeTTL:
		e.at(updated.Add(m.cfg.ChallengeTTL))
		st.Issuer = b.Issuer
		st.Detail = joinDetail(st.Detail, "issuance in progress on "+b.Issuer)
		return false
	case e.now.Before(lw.until):
		e.at(lw.until)
		st.Detail = joinDetail(st.Detail, fmt.Sprintf("this Machine's hostname check failed (%s); next check %s",
			lw.err, lw.until.UTC().Format(time.RFC3339)))
		return false
	}
	if foreign && updated.Add(m.cfg.ChallengeTTL).After(base) {
		base = updated.Add(m.cfg.ChallengeTTL) // an abandoned challenge
	}
	r := e.rank
	if m.asked[h] {
		r = 0 // asked on demand here: a client waits in its handshake
	}
	at := base.Add(time.Duration(r) * m.cfg.RankDelay)
	switch {
	case e.now.Before(at):
		e.at(at)
		st.Detail = joinDetail(st.Detail, fmt.Sprintf("rank %d of %d: this Machine's turn at %s",
			r, max(e.machines, r+1), at.UTC().Format(time.RFC3339)))
	case m.issuing == "" && e.due == "":
		e.due, e.prev = h, v.row
		if !exists {
			e.prev = store.Row[store.CertificateBody]{Key: h}
		}
		st.Detail = joinDetail(st.Detail, "issuing on this Machine")
		return true
	default:
		st.Detail = joinDetail(st.Detail, "waiting for this Machine's other issuance")
	}
	return false
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
