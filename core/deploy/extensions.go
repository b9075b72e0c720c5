package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/docker/go-units"

	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// decodeX decodes one extension value strictly: an unknown field inside
// a Ployz extension is an error naming it.
func decodeX(name string, v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func applyExtensions(svc *Service, spec *rpc.ContainerSpec, ext map[string]any, hasHC bool) ([]string, error) {
	var warns []string
	var activate bool
	var err error
	spec.Readiness = ReadyNone
	if hasHC {
		spec.Readiness = ReadyHealthcheck
	}
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := ext[k]
		switch k {
		case "x-ports":
			var ps []xPort
			if err := decodeX(k, v, &ps); err != nil {
				return nil, err
			}
			tcp := map[int]int{}       // ingress_port -> entry
			routes := map[string]int{} // HTTP route key -> entry
			for i, p := range ps {
				if j, dup := tcp[p.IngressPort]; dup && p.IngressPort != 0 {
					return nil, fmt.Errorf("x-ports[%d].ingress_port: %d is already x-ports[%d]'s", i, p.IngressPort, j)
				}
				tcp[p.IngressPort] = i
				n := len(svc.Ingress)
				if err := applyXPort(svc, spec, p); err != nil {
					var fe fieldError
					if errors.As(err, &fe) {
						return nil, fmt.Errorf("x-ports[%d].%s: %s", i, fe.field, fe.msg)
					}
					return nil, fmt.Errorf("x-ports[%d]: %w", i, err)
				}
				// An entry adds its route and those of its redirect_from.
				for _, r := range svc.Ingress[n:] {
					if r.Protocol != "" {
						continue
					}
					k := r.Key()
					if j, dup := routes[k]; dup {
						return nil, fmt.Errorf("x-ports[%d]: route %s is already x-ports[%d]'s (one container_port per hostname and path)", i, k, j)
					}
					routes[k] = i
				}
			}
		case "x-placement":
			var p xPlacement
			if err := decodeX(k, v, &p); err != nil {
				return nil, err
			}
			for i, c := range p.Constraints {
				pc, err := ParseConstraint(c)
				if err != nil {
					return nil, fmt.Errorf("x-placement.constraints[%d]: %w", i, err)
				}
				svc.Constraints = append(svc.Constraints, pc)
			}
			for i, r := range p.Roles {
				if err := rpc.ValidRole(r); err != nil {
					return nil, fmt.Errorf("x-placement.roles[%d]: %w", i, err)
				}
				if !slices.Contains(svc.Roles, r) {
					svc.Roles = append(svc.Roles, r)
				}
			}
			if p.Mode != "" {
				svc.Mode = p.Mode
			}
			if p.MaxPerMachine < 0 {
				return nil, fmt.Errorf("x-placement.max_per_machine: %d is negative", p.MaxPerMachine)
			}
			svc.MaxPerMachine = p.MaxPerMachine
		case "x-pre_deploy":
			var hs []xHook
			if err := decodeX(k, v, &hs); err != nil {
				return nil, err
			}
			for i, h := range hs {
				if len(h.Command) == 0 {
					return nil, fmt.Errorf("x-pre_deploy[%d].command: required", i)
				}
				svc.Hooks = append(svc.Hooks, Hook(h))
			}
		case "x-readiness":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("x-readiness: want healthcheck, notify or none")
			}
			switch s {
			case ReadyHealthcheck:
				if !hasHC {
					return nil, fmt.Errorf("x-readiness: healthcheck needs a healthcheck: declared")
				}
			case ReadyNotify, ReadyNone:
			default:
				return nil, fmt.Errorf("x-readiness: %q is not healthcheck, notify or none", s)
			}
			spec.Readiness = s
		case xSocketActivation:
			if activate, err = parseSocketActivation(v); err != nil {
				return nil, err
			}
		case "x-schedule":
			sch, err := jobs.ParseX(k, v)
			if err != nil {
				return nil, err
			}
			svc.Schedule = &sch
		default:
			warns = append(warns, fmt.Sprintf("service %q: unknown extension %s ignored", svc.Name, k))
		}
	}
	if activate {
		if err := applySocketActivation(svc, spec); err != nil {
			return nil, err
		}
	}
	spec.Constraints, spec.Roles = svc.Constraints, svc.Roles
	return warns, nil
}

// fieldError is an x-ports entry's error in one field; the caller names
// the entry: x-ports[i].field.
type fieldError struct{ field, msg string }

func (e fieldError) Error() string { return e.field + ": " + e.msg }

func fieldErrf(field, format string, a ...any) error {
	return fieldError{field, fmt.Sprintf(format, a...)}
}

func applyXPort(svc *Service, spec *rpc.ContainerSpec, p xPort) error {
	if p.ContainerPort <= 0 || p.ContainerPort > 65535 {
		return fieldErrf("container_port", "required, 1-65535")
	}
	switch p.Protocol {
	case "", "tcp", "udp":
	default:
		return fieldErrf("protocol", "%q is not tcp or udp", p.Protocol)
	}
	if err := httpOnly(p); err != nil {
		return err
	}
	switch {
	case p.IngressPort != 0 && p.Hostname != "":
		return fieldErrf("ingress_port", "excludes hostname: one route per entry")
	case p.IngressPort != 0 && p.HostPort != 0:
		return fieldErrf("ingress_port", "excludes host_port: one route per entry")
	case p.Hostname != "" && p.HostPort != 0:
		return fmt.Errorf("hostname and host_port: one route per entry")
	case p.IngressPort != 0:
		if p.IngressPort < 1 || p.IngressPort > 65535 {
			return fieldErrf("ingress_port", "%d is not 1-65535", p.IngressPort)
		}
		if what, ok := ingress.ReservedPorts[p.IngressPort]; ok {
			return fieldErrf("ingress_port", "%d is used by %s on every Machine", p.IngressPort, what)
		}
		if p.Protocol == "udp" {
			return fieldErrf("protocol", "udp ingress is not supported (ingress_port is TCP only)")
		}
		svc.Ingress = append(svc.Ingress, IngressRoute{Protocol: "tcp", Port: p.IngressPort, ContainerPort: p.ContainerPort})
		spec.Ingress = append(spec.Ingress, rpc.IngressRoute{Protocol: "tcp", Port: p.IngressPort, ContainerPort: p.ContainerPort})
	case p.Hostname != "":
		r, err := httpRoute(p)
		if err != nil {
			return err
		}
		from, err := redirectRoutes(p, r)
		if err != nil {
			return err
		}
		for _, r := range append([]IngressRoute{r}, from...) {
			svc.Ingress = append(svc.Ingress, r)
			spec.Ingress = append(spec.Ingress, rpc.IngressRoute(r))
		}
	case p.HostPort > 0 && p.HostPort <= 65535:
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		spec.Ports = append(spec.Ports, rpc.PortSpec{ContainerPort: p.ContainerPort, HostPort: p.HostPort, Protocol: proto})
		svc.HostPorts = append(svc.HostPorts, p.HostPort)
	default:
		return fmt.Errorf("want hostname, ingress_port or host_port (1-65535)")
	}
	return nil
}

// httpRoute is an x-ports hostname entry's route: hostname (a wildcard
// only as its first label) and path normalised as package ingress matches
// them, strip_prefix only with a path, redirect_https kept only when it
// opts out (true is the default, so it hashes as if left out).
func httpRoute(p xPort) (IngressRoute, error) {
	h, err := ingress.CheckHostPattern(p.Hostname)
	if err != nil {
		return IngressRoute{}, fieldErrf("hostname", "%s", err)
	}
	path, err := ingress.CheckPath(p.Path)
	if err != nil {
		return IngressRoute{}, fieldErrf("path", "%s", err)
	}
	if p.StripPrefix && path == "" {
		return IngressRoute{}, fieldErrf("strip_prefix", "needs a path other than /")
	}
	r := IngressRoute{Hostname: h, ContainerPort: p.ContainerPort, Path: path}
	r.StripPrefix = p.StripPrefix
	if p.RedirectHTTPS != nil && !*p.RedirectHTTPS {
		r.RedirectHTTPS = p.RedirectHTTPS
	}
	if err := routeLimits(p, &r); err != nil {
		return IngressRoute{}, err
	}
	if r.Headers, err = p.Headers.Normalize(); err != nil {
		return IngressRoute{}, fieldErrf("headers", "%s", err)
	}
	if err := p.BasicAuth.Check(); err != nil {
		return IngressRoute{}, fieldErrf("basic_auth", "%s", err)
	}
	r.BasicAuth, r.Compress = p.BasicAuth, p.Compress
	if r.UpstreamProtocol, err = routeopt.CheckUpstreamProtocol(p.UpstreamProtocol); err != nil {
		return IngressRoute{}, fieldErrf("upstream_protocol", "%s", err)
	}
	if r.TLS, err = routeopt.CheckTLS(p.TLS, h); err != nil {
		return IngressRoute{}, fieldErrf("tls", "%s", err)
	}
	return r, nil
}

// redirectRoutes are the routes of an x-ports entry's redirect_from: one
// per hostname, with the canonical route's path, answering 308 to its
// hostname. Each claims its hostname like any route; the target must be
// one hostname, so neither side may be a wildcard.
func redirectRoutes(p xPort, canon IngressRoute) ([]IngressRoute, error) {
	if len(p.RedirectFrom) == 0 {
		return nil, nil
	}
	if ingress.IsWildcard(canon.Hostname) {
		return nil, fieldErrf("redirect_from", "needs a hostname that is not a wildcard: redirects name one target")
	}
	var out []IngressRoute
	seen := map[string]bool{canon.Hostname: true}
	for i, from := range p.RedirectFrom {
		h, err := ingress.CheckHostPattern(from)
		switch {
		case err != nil:
			return nil, fieldErrf(fmt.Sprintf("redirect_from[%d]", i), "%s", err)
		case ingress.IsWildcard(h):
			return nil, fieldErrf(fmt.Sprintf("redirect_from[%d]", i), "%q is a wildcard; name each hostname", from)
		case h == canon.Hostname:
			return nil, fieldErrf(fmt.Sprintf("redirect_from[%d]", i), "%q is the hostname it redirects to", from)
		case seen[h]:
			return nil, fieldErrf(fmt.Sprintf("redirect_from[%d]", i), "%q is listed twice", from)
		}
		seen[h] = true
		r := IngressRoute{Hostname: h, ContainerPort: canon.ContainerPort, Path: canon.Path}
		r.RedirectHTTPS, r.RedirectTo = canon.RedirectHTTPS, canon.Hostname
		out = append(out, r)
	}
	return out, nil
}

// httpOnly refuses the keys of an HTTP route in an entry without a
// hostname.
func httpOnly(p xPort) error {
	if p.Hostname != "" {
		return nil
	}
	for _, k := range []struct {
		set         bool
		field, will string
	}{
		{p.Path != "", "path", "paths route HTTP requests"}, {p.StripPrefix, "strip_prefix", "it strips an HTTP path"},
		{p.RedirectHTTPS != nil, "redirect_https", "redirects are HTTP"}, {p.MaxBodySize != nil, "max_body_size", "it bounds HTTP requests"},
		{p.ResponseTimeout != "", "response_timeout", "it bounds HTTP responses"}, {p.Headers != nil, "headers", "they are HTTP's"},
		{p.BasicAuth != nil, "basic_auth", "it guards HTTP requests"}, {p.Compress, "compress", "it encodes HTTP answers"},
		{p.RedirectFrom != nil, "redirect_from", "redirects are HTTP"},
		{p.UpstreamProtocol != "", "upstream_protocol", "it is how HTTP reaches the Container"},
		{p.TLS != "", "tls", "certificates are for hostnames"},
	} {
		if k.set {
			return fieldErrf(k.field, "needs hostname: %s", k.will)
		}
	}
	return nil
}

// MaxResponseTimeout bounds x-ports response_timeout.
const MaxResponseTimeout = 24 * time.Hour

// routeLimits fills r's body limit (max_body_size: bytes, or a size such
// as 10m or 1GiB, binary units) and response timeout (a Go duration,
// e.g. 90s).
func routeLimits(p xPort, r *IngressRoute) error {
	switch v := p.MaxBodySize.(type) {
	case nil:
	case float64:
		if v < 1 || v != float64(int64(v)) {
			return fieldErrf("max_body_size", "%v is not a whole number of bytes above 0", v)
		}
		r.MaxBodyBytes = int64(v)
	case string:
		n, err := units.RAMInBytes(v)
		if err != nil || n < 1 {
			return fieldErrf("max_body_size", "%q is not a size such as 10m or 1GiB", v)
		}
		r.MaxBodyBytes = n
	default:
		return fieldErrf("max_body_size", "want a size such as 10m or a number of bytes")
	}
	if p.ResponseTimeout != "" {
		d, err := time.ParseDuration(p.ResponseTimeout)
		if err != nil || d < time.Millisecond || d > MaxResponseTimeout {
			return fieldErrf("response_timeout", "%q is not a duration from 1ms to %s (e.g. 90s)", p.ResponseTimeout, MaxResponseTimeout)
		}
		r.ResponseTimeoutMS = d.Milliseconds()
	}
	return nil
}

// ParseConstraint parses "label==value" or "label!=value".
func ParseConstraint(s string) (rpc.Constraint, error) {
	for _, op := range []string{"==", "!="} {
		if l, v, ok := strings.Cut(s, op); ok {
			l, v = strings.TrimSpace(l), strings.TrimSpace(v)
			if l == "" {
				return rpc.Constraint{}, fmt.Errorf("%q: empty label", s)
			}
			return rpc.Constraint{Label: l, Op: op, Value: v}, nil
		}
	}
	return rpc.Constraint{}, fmt.Errorf("%q: want label==value or label!=value", s)
}

// ConstraintString renders a constraint as written.
func ConstraintString(c rpc.Constraint) string { return c.Label + c.Op + c.Value }
