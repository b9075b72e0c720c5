package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// LaunchParam is the query parameter of the one-time launch URL the CLI
// prints: the first request carrying it is given the session cookie.
const LaunchParam = "launch"

// TokenHeader carries the CSRF token every action needs besides the
// session cookie. /api/session gives it only to the browser holding the
// cookie.
const TokenHeader = "X-Ployz-Token"

// cookiePrefix names the session cookie; the port is appended because
// browsers share cookies between the ports of one host.
const cookiePrefix = "ployz_dashboard_"

// binding ties a run's dashboard to the one browser that opened its
// launch URL. Any local process can reach a loopback port, so reaching
// it proves nothing: the launch token (printed to the operator only) is
// exchanged once for an HttpOnly, SameSite=Strict cookie, and every
// later request needs that cookie.
type binding struct {
	cookieName string

	mu      sync.Mutex
	launch  string // empty once spent
	session string // the cookie's value; empty until the launch
	csrf    string
}

func newBinding(listen string) (*binding, error) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, &FieldError{Field: "listen", Msg: "want host:port, got " + listen}
	}
	b := &binding{cookieName: cookiePrefix + port}
	for _, p := range []*string{&b.launch, &b.csrf} {
		if *p, err = newToken(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func same(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// authorized reports whether r carries this run's session cookie.
func (b *binding) authorized(r *http.Request) bool {
	c, err := r.Cookie(b.cookieName)
	if err != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return same(c.Value, b.session)
}

// exchange spends the launch token for a new session cookie value; a
// wrong or spent token gets nothing.
func (b *binding) exchange(token string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !same(token, b.launch) {
		return "", false
	}
	s, err := newToken()
	if err != nil {
		return "", false
	}
	b.launch, b.session = "", s
	return s, true
}

// launchToken is the unspent launch token ("" once spent).
func (b *binding) launchToken() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.launch
}

// LaunchURL is the one-time URL that binds this dashboard to the browser
// opening it first. Print it only to the operator.
func (s *Server) LaunchURL() string {
	return "http://" + s.opts.Listen + "/?" + LaunchParam + "=" + s.bind.launchToken()
}

// authenticate passes requests carrying the session cookie, answers the
// launch URL with the cookie and a redirect to the clean URL, and
// refuses everything else with 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get(LaunchParam); tok != "" && r.URL.Path == "/" {
			s.launch(w, r, tok)
			return
		}
		if !s.bind.authorized(r) {
			s.unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) launch(w http.ResponseWriter, r *http.Request, tok string) {
	if val, ok := s.bind.exchange(tok); ok {
		http.SetCookie(w, &http.Cookie{Name: s.bind.cookieName, Value: val, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		s.log.Info("dashboard bound to a browser", "remote", r.RemoteAddr)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if s.bind.authorized(r) { // the same browser reopening its link
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.log.Warn("refused a spent or wrong launch link", "remote", r.RemoteAddr)
	s.unauthorized(w, r)
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	msg := "refused: this dashboard is bound to the browser that opened its launch link; a link works once (run `ployz dashboard` again for a new one)"
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, http.StatusUnauthorized)
}

// session hands the CSRF token to the bound browser (authenticate has
// checked its cookie).
func (s *Server) session(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"token": s.bind.csrf, "header": TokenHeader})
}

// requireToken refuses an action without the CSRF token: the cookie
// alone would be sent by any form the browser submits.
func (s *Server) requireToken(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !same(r.Header.Get(TokenHeader), s.bind.csrf) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "refused: missing or wrong " + TokenHeader + " (reload the page)"})
			return
		}
		next(w, r)
	}
}
