package proxy

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"
	"github.com/ployz/ployz/sdk/ingress"
)

func init() { caddy.RegisterModule(verifyHandler{}) }

// verifyHandler is the HTTP handler "ployz_verify" (caddyconfig.VerifyHandler):
// it answers ingress.VerifyPath with ingress.VerifyAnswer of the caller's
// nonce, never the Machine's id itself.
type verifyHandler struct {
	Machine string `json:"machine"`
}

// CaddyModule implements caddy.Module.
func (verifyHandler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers." + caddyconfig.VerifyHandler, New: func() caddy.Module { return new(verifyHandler) }}
}

// ServeHTTP implements caddyhttp.MiddlewareHandler; it ends the chain.
func (h verifyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	n := r.URL.Query().Get(ingress.VerifyNonceParam)
	if n == "" || len(n) > ingress.MaxVerifyNonce {
		return plain(w, http.StatusBadRequest, "ployz: want ?"+ingress.VerifyNonceParam+"=NONCE (1 to 128 characters)\n")
	}
	return plain(w, http.StatusOK, ingress.VerifyAnswer(h.Machine, n)+"\n")
}

var _ caddyhttp.MiddlewareHandler = verifyHandler{}
