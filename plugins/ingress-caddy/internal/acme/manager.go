package acme

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// Defaults of Config's timing fields.
const (
	DefaultInterval       = time.Second
	DefaultSafetyInterval = 30 * time.Second
	DefaultChallengeGrace = 3 * time.Second
	DefaultChallengeTTL   = 2 * time.Minute
	DefaultMinBackoff     = 60 * time.Second
	DefaultMaxBackoff     = time.Hour
	DefaultIssueTimeout   = 3 * time.Minute

	DefaultPropagationTimeout  = 2 * time.Minute
	DefaultPropagationInterval = time.Second
)

// Config configures a Manager.
type Config struct {
	// Machine is this Machine's id: its rank, and the issuer it writes.
	Machine string
	// Directory is the ACME directory URL; CAFile optional PEM roots to
	// trust for it; Email the account contact (optional).
	Directory, CAFile, Email string
	// ListenTLS is copied into Snapshot.TLS.Listen.
	ListenTLS string
	// StateDir keeps the ACME account key (empty: a key per process).
	StateDir string
	// RankDelay spaces the Machines' turns: rank k waits k × RankDelay.
	RankDelay time.Duration
	// Store is the replicated store (certificates and machines tables).
	Store Store
	// Log receives issuance events (default: discarded).
	Log hclog.Logger
	// Interval is the store poll interval while the manager does not
	// follow the store by subscription: a Store that is no Watcher, or
	// whose subscriptions are not open (DefaultInterval).
	Interval time.Duration
	// SafetyInterval is how often a manager following the store by
	// subscription reads it with no change reported and no timer due: a
	// net under the subscriptions (DefaultSafetyInterval).
	SafetyInterval time.Duration
	// ChallengeGrace is how long the issuer waits after writing the
	// challenge before asking the CA to validate, so every Machine's
	// proxy has loaded it (DefaultChallengeGrace).
	ChallengeGrace time.Duration
	// ChallengeTTL: another Machine's challenge younger than this means
	// its issuance is in progress (DefaultChallengeTTL).
	ChallengeTTL time.Duration
	// MinBackoff doubles per failed attempt up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// IssueTimeout bounds one issuance (DefaultIssueTimeout).
	IssueTimeout time.Duration
	// Verify checks that hostname reaches this Cluster before ordering;
	// nil uses VerifyHostname. machines are the participating ids.
	Verify func(ctx context.Context, hostname string, machines []string) error
	// Now is the clock (time.Now).
	Now func() time.Time
	// Keys seals certificate private keys in the store (LoadSealer); nil
	// writes them in plain text. It also opens the DNS providers'
	// secrets: without it no DNS provider is used.
	Keys *Sealer
	// PropagationTimeout bounds the wait for a DNS-01 TXT record to show
	// on the zone's authoritative server (DefaultPropagationTimeout);
	// PropagationInterval spaces the queries (DefaultPropagationInterval).
	PropagationTimeout, PropagationInterval time.Duration
}

// Snapshot is what the proxy loads and reports: the TLS input of the
// Caddy config, the state of every wanted hostname and the skipped rows.
type Snapshot struct {
	TLS     caddyconfig.TLS
	States  []ingress.CertificateState
	Skipped []ingress.SkippedCertificate
}

// Manager keeps the certificates of the hostnames the proxy routes. Want
// and Snapshot are safe to call from any goroutine while Run runs.
type Manager struct {
	cfg     Config
	log     hclog.Logger
	watcher Watcher // nil: poll every Interval
	kick    chan struct{}
	changed chan struct{} // Changed

	mu        sync.Mutex
	want      []string
	snap      Snapshot
	firstSeen map[string]time.Time
	local     map[string]localWait // verdict failures: this Machine's own evidence
	issuing   string
	onDemand  []string        // wildcards whose names may be asked (AllowOnDemand)
	asked     map[string]bool // names asked on demand on this Machine (Obtain)
	storeErr  string
	lastErr   string    // the last store error logged
	nextAt    time.Time // the next time a decision changes with no store change (zero: none)

	acct *account // guarded by the single issuing goroutine
}

type localWait struct {
	until    time.Time
	failures int
	err      string
}

// New returns a Manager; Run starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Machine == "" {
		return nil, errors.New("acme: machine is empty")
	}
	if cfg.Directory == "" {
		return nil, errors.New("acme: directory is empty")
	}
	if cfg.Store == nil {
		return nil, errors.New("acme: no store")
	}
	w, _ := cfg.Store.(Watcher) // before wrapping: the wrapper hides it
	if cfg.Keys != nil {
		cfg.Store = newSealingStore(cfg.Store, cfg.Keys, logOrNull(cfg.Log).Named("keys"))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Interval, DefaultInterval)
	def(&cfg.SafetyInterval, DefaultSafetyInterval)
	def(&cfg.ChallengeGrace, DefaultChallengeGrace)
	def(&cfg.ChallengeTTL, DefaultChallengeTTL)
	def(&cfg.MinBackoff, DefaultMinBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.IssueTimeout, DefaultIssueTimeout)
	def(&cfg.PropagationTimeout, DefaultPropagationTimeout)
	def(&cfg.PropagationInterval, DefaultPropagationInterval)
	if cfg.RankDelay < 0 {
		cfg.RankDelay = 0
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Verify == nil {
		cfg.Verify = VerifyHostname
	}
	return &Manager{cfg: cfg, log: cfg.Log, watcher: w, kick: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		firstSeen: map[string]time.Time{}, local: map[string]localWait{},
		snap: Snapshot{TLS: caddyconfig.TLS{Listen: cfg.ListenTLS}}}, nil
}

// Want sets the hostnames that need certificates (those the proxy routes).
func (m *Manager) Want(hostnames []string) {
	hs := make([]string, 0, len(hostnames))
	for _, h := range hostnames {
		hs = append(hs, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	m.mu.Lock()
	changed := !slices.Equal(hs, m.want)
	m.want = hs
	m.mu.Unlock()
	if changed {
		m.poke()
	}
}

// Changed receives (coalesced) when the snapshot's TLS input changed:
// new material or challenges for the proxy to load.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// Snapshot returns the latest evaluation of the store.
func (m *Manager) Snapshot() Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.snap
	s.TLS.Certificates = slices.Clone(s.TLS.Certificates)
	s.TLS.Challenges = slices.Clone(s.TLS.Challenges)
	s.States = slices.Clone(s.States)
	s.Skipped = slices.Clone(s.Skipped)
	return s
}

func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Run reads the store when it changed (a Watcher's subscriptions), when
// a timer of the snapshot comes due (a renewal, an expiry, this
// Machine's turn, the end of a backoff or of another Machine's
// challenge), when Want changes, and at least every SafetyInterval; it
// refreshes the snapshot and starts an issuance when this Machine's turn
// came, until ctx ends. Without subscriptions (a Store that is no
// Watcher, or while they are not open) it reads every Interval. A failed
// read keeps the last snapshot.
func (m *Manager) Run(ctx context.Context) error {
	var w *store.Watch
	var changes <-chan struct{}
	if m.watcher != nil {
		w = m.watcher.Watch(ctx, m.log.Named("watch"))
		changes = w.C
	}
	for ctx.Err() == nil {
		ok := m.refresh(ctx)
		timer := time.NewTimer(m.waitFor(w, ok))
		select {
		case <-ctx.Done():
		case <-m.kick:
		case <-changes:
		case <-timer.C:
		}
		timer.Stop()
	}
	return nil
}

// waitFor is how long Run waits for a change after a read (ok: it
// succeeded): until the snapshot's next timer, at most SafetyInterval,
// while w's subscriptions are open; Interval otherwise.
func (m *Manager) waitFor(w *store.Watch, ok bool) time.Duration {
	if w == nil || !w.Live() || !ok {
		return m.cfg.Interval
	}
	wait := m.cfg.SafetyInterval
	m.mu.Lock()
	next := m.nextAt
	m.mu.Unlock()
	if !next.IsZero() {
		// The evaluation then sees now at or past next; 10 ms keeps a
		// clock that reads slightly early from spinning.
		wait = min(wait, max(next.Sub(m.cfg.Now()), 0)+10*time.Millisecond)
	}
	return wait
}

// Refresh reads the store once, refreshes the snapshot and starts an
// issuance when this Machine's turn came; Run calls it in a loop. The
// proxy calls it once itself after its first Want, so a restarted proxy's
// first load already serves the certificates the store holds.
func (m *Manager) Refresh(ctx context.Context) { m.refresh(ctx) }

// refresh is Refresh; false when the store did not answer.
func (m *Manager) refresh(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rows, err := m.cfg.Store.Certificates(rctx)
	var ms []string
	if err == nil {
		ms, err = participating(rctx, m.cfg.Store)
	}
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			m.storeFailed(err)
		}
		return false
	}
	m.mu.Lock()
	m.lastErr = ""
	m.mu.Unlock()
	if j := m.evaluate(rows, ms); j.hostname != "" {
		go m.issue(ctx, j, ms)
	}
	return true
}

// storeFailed records a failed store read, logging it when it is new.
func (m *Manager) storeFailed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err.Error() != m.lastErr {
		m.log.Warn("certificates: store unreachable; keeping the loaded material", "error", err)
	}
	m.lastErr, m.storeErr = err.Error(), err.Error()
}

// backoff is the wait after the n-th consecutive failure (n ≥ 1).
func (m *Manager) backoff(n int) time.Duration {
	d := m.cfg.MinBackoff
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, m.cfg.MaxBackoff)
}
