package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

//go:embed ui
var uiFiles embed.FS

// DefaultListen is where `ployz dashboard` listens: loopback only.
const DefaultListen = "127.0.0.1:7580"

// Options tune a Server.
type Options struct {
	// Listen is the address the server is reached at; requests naming
	// another Host are refused.
	Listen string
	// Poll is how often live views read the Source (default 2 s).
	Poll   time.Duration
	Logger hclog.Logger
}

// Server is the dashboard's HTTP surface.
type Server struct {
	src   Source
	opts  Options
	bind  *binding
	hosts map[string]bool
	log   hclog.Logger

	mu      sync.Mutex
	actions []*action
}

// New makes a Server reading src.
func New(src Source, opts Options) (*Server, error) {
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	hosts, err := allowedHosts(opts.Listen)
	if err != nil {
		return nil, err
	}
	bind, err := newBinding(opts.Listen)
	if err != nil {
		return nil, err
	}
	return &Server{src: src, opts: opts, bind: bind, hosts: hosts, log: opts.Logger.Named("dashboard")}, nil
}

// allowedHosts are the Host headers a browser sends for listen: the
// address itself and, for loopback, localhost on the same port.
func allowedHosts(listen string) (map[string]bool, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, &FieldError{Field: "listen", Msg: "want host:port, got " + listen}
	}
	out := map[string]bool{listen: true}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			out[h+":"+port] = true
		}
	}
	return out, nil
}

// Handler is the whole HTTP surface.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	ui, _ := fs.Sub(uiFiles, "ui")
	mux.Handle("GET /", http.FileServerFS(ui))
	mux.HandleFunc("GET /api/session", s.session)
	mux.HandleFunc("GET /api/view/{name}", s.viewOnce)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/logs", s.logs)
	mux.HandleFunc("GET /api/metrics", s.metrics)
	mux.HandleFunc("POST /api/scale", s.requireToken(s.scale))
	mux.HandleFunc("POST /api/restart", s.requireToken(s.restart))
	mux.HandleFunc("POST /api/stop", s.requireToken(s.startStop("stop")))
	mux.HandleFunc("POST /api/start", s.requireToken(s.startStop("start")))
	return s.guard(s.authenticate(mux))
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// guard refuses foreign Hosts (a DNS-rebinding page names its own) and
// sets the headers every answer carries: a strict CSP allowing only
// this origin, no framing, no sniffing, no referrer.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts[strings.ToLower(r.Host)] {
			http.Error(w, "refused: Host "+r.Host+" is not this dashboard's address", http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// view reads one page's data from the Source.
func (s *Server) view(ctx context.Context, name string, get func(string) string) (any, error) {
	switch name {
	case "cluster":
		return s.src.Cluster(ctx)
	case "services":
		return s.src.Services(ctx)
	case "service":
		ns, svc := get("namespace"), get("service")
		if ns == "" {
			return nil, &FieldError{Field: "namespace", Msg: "required"}
		}
		if svc == "" {
			return nil, &FieldError{Field: "service", Msg: "required"}
		}
		return s.src.Service(ctx, ns, svc)
	case "deploys":
		d, err := s.src.Deploys(ctx)
		return deploysPage{Deploys: d, Actions: s.actionLog()}, err
	case "volumes":
		return s.volumesPage(ctx)
	case "volume":
		return s.volumeDetail(ctx, get("machine"), get("name"))
	case "jobs":
		return s.src.Jobs(ctx)
	}
	return nil, &FieldError{Field: "view", Msg: "unknown view " + name + "; want cluster, services, service, deploys, volumes, volume or jobs"}
}

// deploysPage adds the actions this dashboard ran to the Deploys page.
type deploysPage struct {
	Deploys
	Actions []Action `json:"actions"`
}

func (s *Server) viewOnce(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context(), r.PathValue("name"), r.URL.Query().Get)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// FieldError is bad input, naming the field.
type FieldError struct {
	Field string `json:"field"`
	Msg   string `json:"error"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func writeError(w http.ResponseWriter, err error) {
	var fe *FieldError
	if errors.As(err, &fe) {
		writeJSON(w, http.StatusBadRequest, fe)
		return
	}
	writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
