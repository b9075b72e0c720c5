package ingress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// Routes is one computation from the store: the routes sorted by key, the
// row routes that were skipped and the Serving Pointers followed.
type Routes struct {
	Routes  []Route
	Skipped []SkippedRoute
	// Refused counts the ready rows ignored because their owner cannot
	// vouch for their address (serving.Refused); each is also in Skipped.
	Refused int
	// Pointers maps every Service with a Serving Pointer to the pointer's
	// id: the config computed here follows exactly these.
	Pointers map[string]string
}

// ByKey maps each route key to its route: the Prev of the next Compute.
func (r Routes) ByKey() map[string]Route {
	m := make(map[string]Route, len(r.Routes))
	for _, rt := range r.Routes {
		m[rt.Key()] = rt
	}
	return m
}

// Input is what Compute derives routes from.
type Input struct {
	Containers []store.Row[store.ContainerBody]
	// Pointers are the Serving Pointer rows, keyed "namespace/service".
	Pointers []store.Row[store.ServingBody]
	// Machines are the machines table's sessions (a row observed in
	// another session is stale) and participating subnets (an upstream
	// address outside its owner's subnet is refused, serving.Machines).
	serving.Machines
	// Machine is this Machine's id: its Containers come first.
	Machine string
	// Prev maps route keys to the previous computation's routes: a
	// conflict keeps the previous owner, and a young pointer holds them.
	Prev map[string]Route
	// Young are the Serving Pointer ids first seen less than HoldFor ago.
	Young map[string]bool
}

// HoldFor bounds how long a moved Serving Pointer whose Containers are not
// yet seen ready (their rows replicate apart from the pointer's) keeps the
// previous upstreams serving instead of answering 502 (serving.HoldFor,
// shared with Internal DNS).
const HoldFor = serving.HoldFor

type upstream struct {
	addr  netip.AddrPort
	id    string
	local bool
}

type claim struct {
	route    Route                 // identity fields only
	services map[string]bool       // claimants
	ups      map[string][]upstream // service -> eligible upstreams
	waiting  map[string]int        // service -> ready Containers the pointer does not name
	down     map[string][]string   // service -> Machines held Down with ready Containers of it
	opts     map[string]routeOpts  // service -> the options its route is served with
}

// routeOpts are an HTTP route's options as one Container row declares
// them. A Service's Containers agree unless a Deploy changing them is
// under way: then a serving row's win over the others', the newest first
// (its Serving Pointer names the new Containers once they are ready).
type routeOpts struct {
	options routeopt.Options // as the row declares them
	serves  bool
	created int64
	row     string
}

// wins reports whether o is preferred over p.
func (o routeOpts) wins(p routeOpts) bool {
	if o.serves != p.serves {
		return o.serves
	}
	if o.created != p.created {
		return o.created > p.created
	}
	return o.row > p.row
}

// ServiceKey is the "namespace/service" key of Services in routes,
// Serving Pointers and acks.
func ServiceKey(namespace, service string) string { return serving.ServiceKey(namespace, service) }

// Compute derives the routes.
//
// Every Service whose rows carry a route claims it (whether or not its
// Containers are ready). One Service owns a route: with one claimant that
// one. Several claimants are a conflict, reported as such, which never
// publishes a new owner: the previous owner keeps the route untouched
// while it still claims it, otherwise nothing is published. Upstreams
// are the owner's Containers that are Ready with an IPv4 address in their
// Machine's current session and, when the Service has a Serving Pointer,
// named by it with the same Machine, image and deployment; this
// Machine's come first, then by address. An owner without one is pending.
// Rows whose routes are invalid are skipped and reported with the field.
func Compute(in Input) Routes {
	rc := &routeComputation{in: in, out: Routes{Pointers: map[string]string{}}, pointers: serving.PointerMap(in.Pointers),
		claims: map[string]*claim{}, held: map[string]string{}, machine: strings.ToLower(in.Machine)}
	for k, p := range rc.pointers {
		rc.out.Pointers[k] = p.ID
	}
	for _, r := range in.Containers {
		rc.claim(r)
	}
	for k, c := range rc.claims {
		rc.out.Routes = append(rc.out.Routes, rc.route(k, c))
	}
	for svc, p := range rc.held {
		if p == "" {
			delete(rc.out.Pointers, svc)
		} else {
			rc.out.Pointers[svc] = p
		}
	}
	slices.SortFunc(rc.out.Routes, func(a, b Route) int { return strings.Compare(a.Key(), b.Key()) })
	return rc.out
}

// routeComputation is one run of Compute, one method per step.
type routeComputation struct {
	in       Input
	out      Routes
	pointers map[string]store.ServingBody
	claims   map[string]*claim
	held     map[string]string // service -> the pointer its held routes follow
	machine  string
}

// claim records the routes one Container row claims, with the row as an
// upstream when the serving verdict says it serves.
func (rc *routeComputation) claim(r store.Row[store.ContainerBody]) {
	b := r.Body
	if len(b.Ingress) == 0 {
		return
	}
	if b.Namespace == "" || b.Service == "" {
		rc.out.Skipped = append(rc.out.Skipped, SkippedRoute{Container: r.Key,
			Reason: `field "namespace"/"service" is empty: routes need the Service's identity`})
		return
	}
	svc := ServiceKey(b.Namespace, b.Service)
	// The same verdict Internal DNS follows (package serving).
	ip, verdict := serving.Judge(r, rc.pointers, rc.in.Machines)
	if verdict == serving.Refused {
		// Ignored whole: a row no Machine vouches for claims no hostname
		// or port either, so it cannot put a route into conflict.
		rc.out.Refused++
		rc.out.Skipped = append(rc.out.Skipped, SkippedRoute{Container: r.Key,
			Reason: fmt.Sprintf("field \"ip\": %v; its routes are ignored", rc.in.Vouched(r.Owner, ip))})
		return
	}
	for i, rt := range b.Ingress {
		id, err := routeIdentity(rt)
		if err != nil {
			rc.out.Skipped = append(rc.out.Skipped, SkippedRoute{Container: r.Key,
				Reason: fmt.Sprintf("field \"ingress[%d].%s", i, err)})
			continue
		}
		k := id.Key()
		c := rc.claims[k]
		if c == nil {
			c = &claim{route: id, services: map[string]bool{}, ups: map[string][]upstream{}, waiting: map[string]int{}, down: map[string][]string{},
				opts: map[string]routeOpts{}}
			rc.claims[k] = c
		}
		c.services[svc] = true
		o := routeOpts{options: rt.Options, serves: verdict == serving.Serves, created: b.CreatedAt, row: r.Key}
		if prev, ok := c.opts[svc]; !ok || o.wins(prev) {
			c.opts[svc] = o
		}
		switch verdict {
		case serving.NotReady:
		case serving.Waiting:
			c.waiting[svc]++
		case serving.OnDown:
			if o := strings.ToLower(r.Owner); !slices.Contains(c.down[svc], o) {
				c.down[svc] = append(c.down[svc], o)
			}
		case serving.Serves:
			c.ups[svc] = append(c.ups[svc], upstream{addr: netip.AddrPortFrom(ip, uint16(rt.ContainerPort)),
				id: r.Key, local: strings.EqualFold(r.Owner, rc.machine)})
		}
	}
}

// route decides one claimed route: its owner, upstreams and state.
func (rc *routeComputation) route(k string, c *claim) Route {
	claimants := make([]string, 0, len(c.services))
	for s := range c.services {
		claimants = append(claimants, s)
	}
	slices.Sort(claimants)
	rt := c.route
	prev := rc.in.Prev[k]
	switch p := prev.Owner; {
	case len(claimants) == 1:
		rt.Owner = claimants[0]
	case p != "" && c.services[p]:
		rt.Owner = p
	}
	if rt.Owner != "" {
		if rt.Protocol == "" {
			withOptions(&rt, c.opts[rt.Owner].options)
		}
		rc.upstreams(&rt, c, prev)
	}
	rc.state(&rt, c, claimants)
	return rt
}

// upstreams fills the owner's ready Containers, this Machine's first. A
// pointer that arrived before its Containers' ready rows keeps what was
// loaded, and is not acked yet.
func (rc *routeComputation) upstreams(rt *Route, c *claim, prev Route) {
	rt.Pointer = rc.out.Pointers[rt.Owner]
	if d := c.down[rt.Owner]; len(d) > 0 {
		rt.Down = slices.Sorted(slices.Values(d))
	}
	us := c.ups[rt.Owner]
	slices.SortFunc(us, func(a, b upstream) int {
		if a.local != b.local {
			if a.local {
				return -1
			}
			return 1
		}
		return a.addr.Compare(b.addr)
	})
	us = slices.CompactFunc(us, func(a, b upstream) bool { return a.addr == b.addr })
	for _, u := range us {
		rt.Upstreams = append(rt.Upstreams, u.addr.String())
		rt.Containers = append(rt.Containers, u.id)
		if u.local {
			rt.Local++
		}
	}
	if len(us) == 0 && rt.Pointer != "" && rc.in.Young[rt.Pointer] && prev.Owner == rt.Owner && len(prev.Upstreams) > 0 {
		rt.Upstreams, rt.Containers, rt.Pointer, rt.Local = prev.Upstreams, prev.Containers, prev.Pointer, prev.Local
		rc.held[rt.Owner] = prev.Pointer
	}
}

// state names the route's state and why.
func (rc *routeComputation) state(rt *Route, c *claim, claimants []string) {
	switch {
	case len(claimants) > 1 && rt.Owner == "":
		rt.State, rt.Claimants = RouteConflict, claimants
		rt.Detail = "claimed by " + strings.Join(claimants, ", ") + "; nothing published until one remains"
	case len(claimants) > 1:
		rt.State, rt.Claimants = RouteConflict, claimants
		rt.Detail = "claimed by " + strings.Join(claimants, ", ") + "; " + rt.Owner + " keeps it"
	case len(rt.Upstreams) == 0 && len(rt.Down) > 0:
		rt.State = RoutePending
		rt.Detail = "every ready Container is on a Machine this one holds Down (" + strings.Join(rt.Down, ", ") + "): " + downAnswer(*rt)
	case len(rt.Upstreams) == 0 && c.waiting[rt.Owner] > 0:
		rt.State = RoutePending
		rt.Detail = fmt.Sprintf("no ready Container the Serving Pointer names (%d ready, not adopted): %s", c.waiting[rt.Owner], pendingAnswer(*rt))
	case len(rt.Upstreams) == 0:
		rt.State, rt.Detail = RoutePending, "no ready Container: "+pendingAnswer(*rt)
	case rc.held[rt.Owner] != "" || rt.Pointer != rc.out.Pointers[rt.Owner]:
		rt.State, rt.Detail = RoutePublished, "holding the previous upstreams until the Serving Pointer's Containers are seen ready"
	case len(rt.Down) > 0:
		rt.State = RoutePublished
		rt.Detail = "left out: the Containers on " + strings.Join(rt.Down, ", ") + ", which this Machine holds Down"
	default:
		rt.State = RoutePublished
	}
}

// withOptions gives rt the options o declares. Limits that make no sense
// (negative) and header rules or users that do not check are dropped,
// not trusted: a row is another Machine's word.
func withOptions(rt *Route, o routeopt.Options) {
	rt.Options = o
	rt.StripPrefix = o.StripPrefix && rt.Path != ""
	rt.MaxBodyBytes, rt.ResponseTimeoutMS = max(o.MaxBodyBytes, 0), max(o.ResponseTimeoutMS, 0)
	if o.RedirectTo != "" {
		rt.RedirectTo, _ = CheckHostPattern(o.RedirectTo) // checked by routeIdentity
	}
	if o.UpstreamProtocol != routeopt.UpstreamH2C {
		rt.UpstreamProtocol = "" // unknown (a newer writer's): HTTP/1.1
	}
	var err error
	if rt.Headers, err = o.Headers.Normalize(); err != nil {
		rt.Headers = nil
	}
	if o.BasicAuth.Check() != nil {
		// Fail closed: a route whose users do not check admits nobody.
		rt.BasicAuth = &routeopt.BasicAuth{Realm: "ployz", Users: map[string]string{}}
	}
}

// routeIdentity validates one row route and returns the route it claims;
// errors start with the offending field's name.
func routeIdentity(rt store.IngressRoute) (Route, error) {
	if rt.ContainerPort < 1 || rt.ContainerPort > 65535 {
		return Route{}, fmt.Errorf("container_port\" is %d, want 1-65535", rt.ContainerPort)
	}
	switch rt.Protocol {
	case "", "http":
		h, err := CheckHostPattern(rt.Hostname)
		if err != nil {
			return Route{}, fmt.Errorf("hostname\" %s", err)
		}
		p, err := CheckPath(rt.Path)
		if err != nil {
			return Route{}, fmt.Errorf("path\" %s", err)
		}
		if err := checkRedirectTo(rt.RedirectTo); err != nil {
			return Route{}, err
		}
		return Route{Hostname: h, Path: p}, nil
	case "tcp":
		if rt.Port < 1 || rt.Port > 65535 {
			return Route{}, fmt.Errorf("port\" is %d, want 1-65535", rt.Port)
		}
		if what, ok := ReservedPorts[rt.Port]; ok {
			return Route{}, fmt.Errorf("port\" is %d, used by %s on every Machine", rt.Port, what)
		}
		return Route{Protocol: "tcp", Port: rt.Port}, nil
	default:
		return Route{}, fmt.Errorf("protocol\" is %q, want http or tcp", rt.Protocol)
	}
}

// checkRedirectTo refuses a redirect target that is not one hostname: a
// row whose route would answer 308 to nowhere (or to a pattern) claims
// nothing rather than being proxied.
func checkRedirectTo(to string) error {
	if to == "" {
		return nil
	}
	if IsWildcard(to) {
		return fmt.Errorf("redirect_to\" is %q, a wildcard, want one hostname", to)
	}
	if _, err := CheckHostPattern(to); err != nil {
		return fmt.Errorf("redirect_to\" %s", err)
	}
	return nil
}

// ReservedPorts are the ports Ployz itself uses on every Machine: a tcp
// route may not take them (x-ports ingress_port refuses them, Compute
// skips a row claiming one), since Caddy would refuse the whole config
// when a layer4 listener collides with another.
var ReservedPorts = map[int]string{
	53:    "Internal DNS",
	80:    "HTTP ingress",
	443:   "HTTPS ingress",
	7569:  "Machine RPC",
	7570:  "the store's gossip",
	7571:  "the store API",
	7574:  "the volume transport",
	9101:  "the metrics endpoint",
	51820: "the WireGuard mesh",
}

// pendingAnswer is what a pending route does, for its Detail.
func downAnswer(rt Route) string {
	if rt.Protocol == "tcp" {
		return "no listener (connections refused)"
	}
	return "answering 503"
}

func pendingAnswer(rt Route) string {
	if rt.Protocol == "tcp" {
		return "no listener (connections refused)"
	}
	return "answering 502"
}
