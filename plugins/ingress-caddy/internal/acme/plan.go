package acme

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
)

// participating lists the ids of the Machines whose record says they
// participate, sorted: the issuing ranks.
func participating(ctx context.Context, s Store) ([]string, error) {
	rows, err := s.Machines(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range rows {
		if r.Body.Phase == string(machine.Participating) {
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

// evaluate refreshes the snapshot from the certificates rows and returns
// the hostname this Machine should issue now (with its current row), if
// any and none is being issued.
func (m *Manager) evaluate(rows []store.Row[store.CertificateBody], ms []string) (due string, prev store.Row[store.CertificateBody]) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeErr = ""
	snap := Snapshot{TLS: caddyconfig.TLS{Listen: m.cfg.ListenTLS}}
	type view struct {
		row store.Row[store.CertificateBody]
		mat *material
		bad string
	}
	views := map[string]view{}
	for _, r := range rows {
		name := strings.ToLower(r.Key)
		v := view{row: r}
		mat, err := parseMaterial(name, r.Body)
		if err != nil {
			v.bad = err.Error()
			snap.Skipped = append(snap.Skipped, rpc.SkippedCertificate{Name: r.Key, Reason: err.Error()})
		}
		v.mat = mat
		ch, err := parseChallenge(r.Body)
		if err != nil {
			snap.Skipped = append(snap.Skipped, rpc.SkippedCertificate{Name: r.Key, Reason: err.Error()})
		} else if ch != nil {
			snap.TLS.Challenges = append(snap.TLS.Challenges, caddyconfig.Challenge{Token: ch.Token, KeyAuthorization: ch.KeyAuthorization})
		}
		views[name] = v
	}
	slices.SortFunc(snap.TLS.Challenges, func(a, b caddyconfig.Challenge) int { return strings.Compare(a.Token, b.Token) })
	k := rank(m.cfg.Machine, ms)
	wanted := map[string]bool{}
	for _, h := range m.want {
		wanted[h] = true
		v, exists := views[h]
		b := v.row.Body
		st := rpc.CertificateState{Hostname: h, State: rpc.CertPending, Error: b.LastError}
		if b.NextAttemptAt > 0 && b.Failures > 0 {
			st.NextAttemptAt = b.NextAttemptAt
		}
		needs := true
		if v.mat != nil && now.Before(v.mat.notAfter) {
			snap.TLS.Certificates = append(snap.TLS.Certificates, caddyconfig.Certificate{CertPEM: v.mat.certPEM, KeyPEM: v.mat.keyPEM})
			st.State, st.NotAfter, st.Issuer = rpc.CertIssued, v.mat.notAfter.Unix(), b.Issuer
			needs = !now.Before(v.mat.renewAt())
		} else if b.Failures > 0 {
			st.State = rpc.CertFailed
		}
		if v.bad != "" {
			st.Detail = "row skipped: " + v.bad
		}
		if !needs {
			delete(m.firstSeen, h)
			snap.States = append(snap.States, st)
			continue
		}
		if m.firstSeen[h].IsZero() {
			m.firstSeen[h] = now
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
		case foreign && now.Sub(updated) < m.cfg.ChallengeTTL:
			st.Issuer = b.Issuer
			st.Detail = joinDetail(st.Detail, "issuance in progress on "+b.Issuer)
		case now.Before(lw.until):
			st.Detail = joinDetail(st.Detail, fmt.Sprintf("this Machine's hostname check failed (%s); next check %s",
				lw.err, lw.until.UTC().Format(time.RFC3339)))
		default:
			if foreign && updated.Add(m.cfg.ChallengeTTL).After(base) {
				base = updated.Add(m.cfg.ChallengeTTL) // an abandoned challenge
			}
			at := base.Add(time.Duration(k) * m.cfg.RankDelay)
			if now.Before(at) {
				st.Detail = joinDetail(st.Detail, fmt.Sprintf("rank %d of %d: this Machine's turn at %s",
					k, max(len(ms), k+1), at.UTC().Format(time.RFC3339)))
			} else if m.issuing == "" && due == "" {
				due, prev = h, v.row
				if !exists {
					prev = store.Row[store.CertificateBody]{Key: h}
				}
				st.Detail = joinDetail(st.Detail, "issuing on this Machine")
			} else {
				st.Detail = joinDetail(st.Detail, "waiting for this Machine's other issuance")
			}
		}
		snap.States = append(snap.States, st)
	}
	for h := range m.firstSeen {
		if !wanted[h] {
			delete(m.firstSeen, h)
		}
	}
	if due != "" {
		m.issuing = due
	}
	if !reflect.DeepEqual(m.snap.TLS, snap.TLS) {
		select { // the proxy loads the new material or challenges now
		case m.changed <- struct{}{}:
		default:
		}
	}
	m.snap = snap
	return due, prev
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
