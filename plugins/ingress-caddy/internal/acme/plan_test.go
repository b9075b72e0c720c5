package acme

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

func planManager(t *testing.T, id string, now *time.Time, st *memStore) *Manager {
	t.Helper()
	m, err := New(Config{Machine: id, Directory: "https://ca.invalid/dir", Store: st, RankDelay: 30 * time.Second,
		Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func evalNow(t *testing.T, m *Manager, st *memStore) string {
	t.Helper()
	rows, _ := st.Certificates(t.Context())
	ms, err := participating(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	due := m.evaluate(rows, ms).hostname
	m.issuing = "" // the test plays the issuance
	return due
}

// Rank k waits k × the rank delay from when it first saw the need, and
// every Machine waits while another's challenge is fresh. Only Machines
// that accept ingress take a rank.
func TestTurnsByRank(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	st := newMemStore("m-c", "m-a", "m-b")
	st.machines = append(st.machines, store.Row[store.MachineBody]{Key: "m-0", Body: store.MachineBody{Phase: "joining"}})
	// A Machine whose ployz.accepts leaves ingress out runs no proxy: it
	// takes no rank, though it sorts first.
	st.machines = append(st.machines, store.Row[store.MachineBody]{Key: "m-00", Body: store.MachineBody{Phase: "participating",
		Labels: map[string]string{store.LabelAccepts: "services"}}})
	a, b, c := planManager(t, "m-a", &now, st), planManager(t, "m-b", &now, st), planManager(t, "m-c", &now, st)
	for _, m := range []*Manager{a, b, c} {
		m.Want([]string{"x.example.test"})
	}
	if evalNow(t, a, st) != "x.example.test" || evalNow(t, b, st) != "" || evalNow(t, c, st) != "" {
		t.Fatal("rank 0 must issue at once, the others wait")
	}
	if s := b.Snapshot().States[0]; s.State != ingress.CertPending || !strings.Contains(s.Detail, "rank 1 of 3") {
		t.Fatalf("%+v", s)
	}
	// m-a writes its challenge; m-b's turn comes but the challenge is fresh.
	now = now.Add(31 * time.Second)
	st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: "x.example.test", Owner: "m-a", UpdatedAt: now.UnixMilli(),
		Body: store.CertificateBody{Issuer: "m-a", Challenge: &store.CertificateChallenge{Token: "tok", KeyAuthorization: "tok.thumb"}}})
	if evalNow(t, b, st) != "" {
		t.Fatal("m-b issued while m-a's challenge is fresh")
	}
	if s := b.Snapshot(); len(s.TLS.Challenges) != 1 || s.TLS.Challenges[0].KeyAuthorization != "tok.thumb" || s.TLS.Challenges[0].Hostname != "x.example.test" ||
		!strings.Contains(s.States[0].Detail, "in progress on m-a") {
		t.Fatalf("%+v", s)
	}
	// The challenge goes stale (m-a died): ranks count from its expiry.
	now = now.Add(DefaultChallengeTTL)
	if evalNow(t, b, st) != "" {
		t.Fatal("m-b issued right at the challenge's expiry")
	}
	now = now.Add(30 * time.Second)
	if evalNow(t, b, st) != "x.example.test" || evalNow(t, c, st) != "" {
		t.Fatal("after the stale challenge m-b (rank 1) goes before m-c")
	}
	// A failure's next attempt holds everyone until then.
	st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: "x.example.test", Owner: "m-b", UpdatedAt: now.UnixMilli(),
		Body: store.CertificateBody{Issuer: "m-b", Failures: 2, LastError: "boom", NextAttemptAt: now.Add(2 * time.Minute).Unix()}})
	if evalNow(t, a, st) != "" {
		t.Fatal("m-a issued before next_attempt_at")
	}
	if s := a.Snapshot().States[0]; s.State != ingress.CertFailed || s.Error != "boom" || s.NextAttemptAt == 0 {
		t.Fatalf("%+v", s)
	}
	now = now.Add(2 * time.Minute)
	if evalNow(t, a, st) != "x.example.test" {
		t.Fatal("m-a did not retry at next_attempt_at")
	}
}

// Malformed rows are skipped and reported naming the field; valid
// material is loaded and renewed at two thirds of its lifetime.
func TestMalformedRowsAndRenewAt(t *testing.T) {
	now := time.Now()
	st := newMemStore("m-a")
	goodC, goodK := selfSigned(t, now.Add(-time.Hour), now.Add(2*time.Hour), "good.example.test")
	otherC, otherK := selfSigned(t, now.Add(-time.Hour), now.Add(2*time.Hour), "other.example.test")
	oldC, oldK := selfSigned(t, now.Add(-2*time.Hour), now.Add(time.Hour), "old.example.test")
	rows := map[string]store.CertificateBody{
		"good.example.test":      {CertPEM: goodC, KeyPEM: goodK},
		"old.example.test":       {CertPEM: oldC, KeyPEM: oldK},
		"garbage.example.test":   {CertPEM: "not pem", KeyPEM: goodK},
		"mismatch.example.test":  {CertPEM: goodC, KeyPEM: otherK},
		"nokey.example.test":     {CertPEM: goodC},
		"wrongname.example.test": {CertPEM: otherC, KeyPEM: otherK},
		"chal.example.test":      {Challenge: &store.CertificateChallenge{Token: "abc"}},
	}
	for k, b := range rows {
		st.PutCertificate(t.Context(), store.Row[store.CertificateBody]{Key: k, Owner: "m-x", Body: b})
	}
	m := planManager(t, "m-a", &now, st)
	m.cfg.RankDelay = time.Hour
	var hs []string
	for k := range rows {
		hs = append(hs, k)
	}
	m.Want(hs)
	due := evalNow(t, m, st)
	snap := m.Snapshot()
	want := map[string]string{
		"garbage.example.test":   `field "cert_pem" holds no PEM`,
		"mismatch.example.test":  `field "key_pem" does not match "cert_pem"`,
		"nokey.example.test":     `field "key_pem" is empty`,
		"wrongname.example.test": `field "cert_pem" does not cover wrongname.example.test`,
		"chal.example.test":      `field "challenge" lacks`,
	}
	if len(snap.Skipped) != len(want) {
		t.Fatalf("skipped %+v", snap.Skipped)
	}
	for _, s := range snap.Skipped {
		if !strings.Contains(s.Reason, want[s.Name]) {
			t.Errorf("%s: %q, want %q", s.Name, s.Reason, want[s.Name])
		}
	}
	if len(snap.TLS.Certificates) != 2 || len(snap.TLS.Challenges) != 0 {
		t.Fatalf("loaded %d certificates, %d challenges", len(snap.TLS.Certificates), len(snap.TLS.Challenges))
	}
	// Each loaded certificate names its hostname: the proxy redirects
	// that hostname's HTTP routes to HTTPS.
	var loadedFor []string
	for _, c := range snap.TLS.Certificates {
		loadedFor = append(loadedFor, c.Hostname)
	}
	if slices.Sort(loadedFor); !slices.Equal(loadedFor, []string{"good.example.test", "old.example.test"}) {
		t.Errorf("certificates loaded for %v", loadedFor)
	}
	states := map[string]ingress.CertificateState{}
	for _, s := range snap.States {
		states[s.Hostname] = s
	}
	if s := states["good.example.test"]; s.State != ingress.CertIssued || s.NotAfter == 0 {
		t.Errorf("good: %+v", s)
	}
	if s := states["mismatch.example.test"]; s.State != ingress.CertPending || !strings.Contains(s.Detail, "row skipped") {
		t.Errorf("mismatch: %+v", s)
	}
	// old.example.test is past two thirds of its life: issued, and due
	// (rank 0) — the only hostnames due are those without valid material
	// or past renewal, and one at a time.
	if s := states["old.example.test"]; s.State != ingress.CertIssued {
		t.Errorf("old: %+v", s)
	}
	if due == "" || due == "good.example.test" {
		t.Errorf("due %q", due)
	}
}
