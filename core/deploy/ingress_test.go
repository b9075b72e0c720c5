package deploy

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"golang.org/x/crypto/bcrypt"
)

// TestIngressRoutesInSpec: a Service's hostname routes are stamped on its
// Container spec, so a route change changes the spec hash (the Containers
// are replaced and publish the new routes); hostnames are normalised and
// invalid ones refused with the field named.
func TestIngressRoutesInSpec(t *testing.T) {
	load := func(host string, port int) (Service, error) {
		c := "name: p\nservices:\n  web:\n    image: x\n    x-ports:\n      - {hostname: " + host + ", container_port: " + strconv.Itoa(port) + "}\n"
		app, err := Load(context.Background(), Source{Compose: []byte(c)})
		if err != nil {
			return Service{}, err
		}
		return app.Services[0], nil
	}
	a, err := load("Hello.Example.Test", 8080)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Spec.Ingress) != 1 || a.Spec.Ingress[0].Hostname != "hello.example.test" || a.Spec.Ingress[0].ContainerPort != 8080 ||
		a.Ingress[0].Hostname != "hello.example.test" {
		t.Fatalf("spec ingress %+v, service ingress %+v", a.Spec.Ingress, a.Ingress)
	}
	must := func(host string, port int) Service {
		t.Helper()
		s, err := load(host, port)
		if err != nil {
			t.Fatalf("%s:%d: %v", host, port, err)
		}
		return s
	}
	b, c, same := must("hello.example.test", 9090), must("other.example.test", 8080), must("hello.example.test", 8080)
	if SpecHash(a.Spec) == SpecHash(b.Spec) || SpecHash(a.Spec) == SpecHash(c.Spec) || SpecHash(a.Spec) != SpecHash(same.Spec) {
		t.Fatal("the spec hash does not follow the ingress routes")
	}
	// A wildcard is a route of its own since path routing came; only in
	// the first label, above at least two.
	for _, bad := range []string{"localhost", "'bad_host.example'", "'*.com'", "'a.*.example.com'", "'*.*.example.com'", "'*'"} {
		if _, err := load(bad, 80); err == nil || !strings.Contains(err.Error(), "hostname") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestTCPIngressRoutes: an x-ports ingress_port entry is a tcp route on
// the Container spec and in the Service's ingress summary; every bad
// field is refused with x-ports[i].field named.
func TestTCPIngressRoutes(t *testing.T) {
	load := func(entries ...string) (Service, error) { return loadXPorts("db", entries...) }
	s, err := load("{ingress_port: 8081, container_port: 8080, protocol: tcp}", "{ingress_port: 5432, container_port: 5432}",
		"{hostname: db.example.test, container_port: 8080}")
	if err != nil {
		t.Fatal(err)
	}
	want := []IngressRoute{{Protocol: "tcp", Port: 8081, ContainerPort: 8080}, {Protocol: "tcp", Port: 5432, ContainerPort: 5432},
		{Hostname: "db.example.test", ContainerPort: 8080}}
	if len(s.Ingress) != 3 || len(s.Spec.Ingress) != 3 || len(s.Spec.Ports) != 0 || len(s.HostPorts) != 0 {
		t.Fatalf("service ingress %+v, spec ingress %+v, ports %+v", s.Ingress, s.Spec.Ingress, s.Spec.Ports)
	}
	for i, w := range want {
		sp := s.Spec.Ingress[i]
		if s.Ingress[i] != w || sp.Protocol != w.Protocol || sp.Port != w.Port || sp.ContainerPort != w.ContainerPort || sp.Hostname != w.Hostname {
			t.Errorf("route %d: service %+v, spec %+v, want %+v", i, s.Ingress[i], sp, w)
		}
	}
	if k := s.Ingress[0].Key(); k != "tcp/8081" {
		t.Errorf("key %q", k)
	}
	if k := s.Ingress[2].Key(); k != "db.example.test" {
		t.Errorf("key %q", k)
	}
	a, errA := load("{ingress_port: 8081, container_port: 8080}")
	b, errB := load("{ingress_port: 8082, container_port: 8080}")
	if errA != nil || errB != nil {
		t.Fatalf("load: %v, %v", errA, errB)
	}
	if SpecHash(a.Spec) == SpecHash(b.Spec) {
		t.Error("the spec hash does not follow the ingress port")
	}

	for name, c := range map[string]struct {
		entries []string
		want    string
	}{
		"zero container_port":   {[]string{"{ingress_port: 8081}"}, "x-ports[0].container_port"},
		"ingress_port > 65535":  {[]string{"{ingress_port: 70000, container_port: 80}"}, "x-ports[0].ingress_port: 70000 is not 1-65535"},
		"negative ingress_port": {[]string{"{ingress_port: -1, container_port: 80}"}, "x-ports[0].ingress_port: -1 is not 1-65535"},
		"dns":                   {[]string{"{ingress_port: 53, container_port: 80}"}, "x-ports[0].ingress_port: 53 is used by"},
		"http":                  {[]string{"{ingress_port: 80, container_port: 80}"}, "x-ports[0].ingress_port: 80 is used by"},
		"https":                 {[]string{"{ingress_port: 443, container_port: 80}"}, "x-ports[0].ingress_port: 443"},
		"rpc":                   {[]string{"{ingress_port: 7569, container_port: 80}"}, "x-ports[0].ingress_port: 7569"},
		"gossip":                {[]string{"{ingress_port: 7570, container_port: 80}"}, "x-ports[0].ingress_port: 7570"},
		"store api":             {[]string{"{ingress_port: 7571, container_port: 80}"}, "x-ports[0].ingress_port: 7571"},
		"wireguard":             {[]string{"{ingress_port: 51820, container_port: 80}"}, "x-ports[0].ingress_port: 51820"},
		"volume transport":      {[]string{"{ingress_port: 7574, container_port: 80}"}, "x-ports[0].ingress_port: 7574 is used by the volume transport"},
		"metrics":               {[]string{"{ingress_port: 9101, container_port: 80}"}, "x-ports[0].ingress_port: 9101 is used by the metrics endpoint"},
		"udp":                   {[]string{"{ingress_port: 8081, container_port: 80, protocol: udp}"}, "x-ports[0].protocol: udp ingress is not supported"},
		"bad protocol":          {[]string{"{ingress_port: 8081, container_port: 80, protocol: sctp}"}, "x-ports[0].protocol"},
		"with hostname":         {[]string{"{ingress_port: 8081, hostname: a.example.test, container_port: 80}"}, "x-ports[0].ingress_port: excludes hostname"},
		"with host_port":        {[]string{"{ingress_port: 8081, host_port: 8081, container_port: 80}"}, "x-ports[0].ingress_port: excludes host_port"},
		"twice":                 {[]string{"{ingress_port: 8081, container_port: 80}", "{ingress_port: 8081, container_port: 81}"}, "x-ports[1].ingress_port: 8081 is already x-ports[0]'s"},
		"second entry":          {[]string{"{hostname: a.example.test, container_port: 80}", "{ingress_port: 0, container_port: 80}"}, "x-ports[1]: want hostname, ingress_port or host_port"},
	} {
		if _, err := load(c.entries...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestHTTPRouteOptions: x-ports hostname entries take a path prefix
// (normalised: no final slash, "/" is the whole hostname), strip_prefix,
// redirect_https (only its opt-out is kept, so true hashes like leaving it
// out) and wildcard hostnames; they reach the Container spec and the
// Service's routes, and change the spec hash. Each bad value is refused
// naming x-ports[i].field.
func TestHTTPRouteOptions(t *testing.T) {
	load := func(entries ...string) (Service, error) { return loadXPorts("web", entries...) }
	s, err := load("{hostname: app.example.test, container_port: 8080, path: /api/, strip_prefix: true, redirect_https: false}",
		"{hostname: app.example.test, container_port: 8081, path: /}",
		"{hostname: '*.Example.Test', container_port: 8082, redirect_https: true}")
	if err != nil {
		t.Fatal(err)
	}
	no := false
	want := []IngressRoute{
		{Hostname: "app.example.test", ContainerPort: 8080, Path: "/api", Options: routeopt.Options{StripPrefix: true, RedirectHTTPS: &no}},
		{Hostname: "app.example.test", ContainerPort: 8081},
		{Hostname: "*.example.test", ContainerPort: 8082},
	}
	if len(s.Ingress) != 3 || len(s.Spec.Ingress) != 3 {
		t.Fatalf("routes %+v, spec %+v", s.Ingress, s.Spec.Ingress)
	}
	for i, w := range want {
		got, sp := s.Ingress[i], s.Spec.Ingress[i]
		if got.Key() != w.Key() || got.Path != w.Path || got.StripPrefix != w.StripPrefix || (got.RedirectHTTPS == nil) != (w.RedirectHTTPS == nil) ||
			sp.Hostname != w.Hostname || sp.Path != w.Path || sp.StripPrefix != w.StripPrefix || (sp.RedirectHTTPS == nil) != (w.RedirectHTTPS == nil) {
			t.Errorf("route %d: %+v, spec %+v, want %+v", i, got, sp, w)
		}
	}
	if s.Ingress[0].Key() != "app.example.test/api" || !s.Ingress[0].Extended() || s.Ingress[1].Extended() || !s.Ingress[2].Extended() {
		t.Errorf("keys and options: %s %v %v %v", s.Ingress[0].Key(), s.Ingress[0].Extended(), s.Ingress[1].Extended(), s.Ingress[2].Extended())
	}

	hash := func(entry string) string {
		t.Helper()
		s, err := load(entry)
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		return SpecHash(s.Spec)
	}
	plain := hash("{hostname: app.example.test, container_port: 80}")
	if plain != hash("{hostname: app.example.test, container_port: 80, path: /, redirect_https: true}") {
		t.Error("path / or redirect_https: true changed the spec hash of a plain route")
	}
	for _, e := range []string{"{hostname: app.example.test, container_port: 80, path: /api}", "{hostname: app.example.test, container_port: 80, redirect_https: false}",
		"{hostname: app.example.test, container_port: 80, path: /api, strip_prefix: true}"} {
		if hash(e) == plain {
			t.Errorf("%s hashes like the plain route", e)
		}
	}

	for name, c := range map[string]struct {
		entries []string
		want    string
	}{
		"relative path":       {[]string{"{hostname: a.example.test, container_port: 80, path: api}"}, `x-ports[0].path: "api" does not start with /`},
		"query":               {[]string{"{hostname: a.example.test, container_port: 80, path: '/a?b'}"}, "x-ports[0].path:"},
		"wildcard path":       {[]string{"{hostname: a.example.test, container_port: 80, path: '/api/*'}"}, "x-ports[0].path:"},
		"double slash":        {[]string{"{hostname: a.example.test, container_port: 80, path: '/a//b'}"}, "x-ports[0].path: \"/a//b\" has an empty segment"},
		"dot dot":             {[]string{"{hostname: a.example.test, container_port: 80, path: '/a/../b'}"}, "x-ports[0].path:"},
		"escape":              {[]string{"{hostname: a.example.test, container_port: 80, path: '/a%2Fb'}"}, "x-ports[0].path:"},
		"verify path":         {[]string{"{hostname: a.example.test, container_port: 80, path: /.ployz-verify}"}, "x-ports[0].path:"},
		"strip without path":  {[]string{"{hostname: a.example.test, container_port: 80, strip_prefix: true}"}, "x-ports[0].strip_prefix: needs a path"},
		"path on tcp":         {[]string{"{ingress_port: 8081, container_port: 80, path: /api}"}, "x-ports[0].path: needs hostname"},
		"strip on host port":  {[]string{"{host_port: 8081, container_port: 80, strip_prefix: true}"}, "x-ports[0].strip_prefix: needs hostname"},
		"redirect on tcp":     {[]string{"{ingress_port: 8081, container_port: 80, redirect_https: false}"}, "x-ports[0].redirect_https: needs hostname"},
		"redirect not a bool": {[]string{"{hostname: a.example.test, container_port: 80, redirect_https: sometimes}"}, "redirect_https"},
		"same route twice": {[]string{"{hostname: a.example.test, container_port: 80, path: /api}", "{host_port: 8080, container_port: 80}",
			"{hostname: A.example.test, container_port: 81, path: /api/}"}, "x-ports[2]: route a.example.test/api is already x-ports[0]'s"},
		"wildcard in the middle": {[]string{"{hostname: 'a.*.example.test', container_port: 80}"}, "x-ports[0].hostname:"},
		"unknown key":            {[]string{"{hostname: a.example.test, container_port: 80, prefix: /api}"}, `unknown field "prefix"`},
	} {
		if _, err := load(c.entries...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}

// loadXPorts loads a project whose one Service, service, has the x-ports
// entries given (YAML flow mappings).
func loadXPorts(service string, entries ...string) (Service, error) {
	c := "name: p\nservices:\n  " + service + ":\n    image: x\n    x-ports:\n"
	for _, e := range entries {
		c += "      - " + e + "\n"
	}
	app, err := Load(context.Background(), Source{Compose: []byte(c)})
	if err != nil {
		return Service{}, err
	}
	return app.Services[0], nil
}

// TestHTTPRouteLimitsAndRules: max_body_size (bytes or a size), a
// response_timeout, header rules (canonical names) and basic_auth (bcrypt
// hashes, their $ written $$ as compose interpolation wants) reach the
// route and its Container spec; each bad value, and any of them without a
// hostname, is refused naming x-ports[i].field.
func TestHTTPRouteLimitsAndRules(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	s, err := loadXPorts("web", "{hostname: a.example.test, container_port: 80, max_body_size: 10m, response_timeout: 90s, "+
		"headers: {request: {set: {x-env: prod}, remove: [x-debug]}, response: {remove: [server]}}, basic_auth: {realm: staff, users: {alice: '"+strings.ReplaceAll(string(hash), "$", "$$")+"'}}}",
		"{hostname: b.example.test, container_port: 80, max_body_size: 1024, compress: true, upstream_protocol: gRPC}")
	if err != nil {
		t.Fatal(err)
	}
	r, sp := s.Ingress[0], s.Spec.Ingress[0]
	if r.MaxBodyBytes != 10<<20 || r.ResponseTimeoutMS != 90000 || r.Headers.Request.Set["X-Env"] != "prod" ||
		r.Headers.Request.Remove[0] != "X-Debug" || r.Headers.Response.Remove[0] != "Server" || r.BasicAuth.Users["alice"] != string(hash) ||
		r.BasicAuth.Realm != "staff" || !r.Extended() {
		t.Fatalf("route %+v", r)
	}
	if sp.MaxBodyBytes != r.MaxBodyBytes || sp.ResponseTimeoutMS != r.ResponseTimeoutMS || sp.Headers == nil || sp.BasicAuth == nil {
		t.Fatalf("spec route %+v", sp)
	}
	if s.Ingress[1].UpstreamProtocol != "h2c" || s.Spec.Ingress[1].UpstreamProtocol != "h2c" || r.UpstreamProtocol != "" || !s.Ingress[1].Extended() {
		t.Fatalf("upstream_protocol grpc: %+v", s.Ingress[1])
	}
	if s.Ingress[1].MaxBodyBytes != 1024 || !s.Ingress[1].Compress || !s.Spec.Ingress[1].Compress || r.Compress {
		t.Fatalf("max_body_size in bytes: %+v", s.Ingress[1])
	}
	for name, c := range map[string]struct{ entry, want string }{
		"size word":       {"{hostname: a.example.test, container_port: 80, max_body_size: lots}", `x-ports[0].max_body_size: "lots" is not a size`},
		"size zero":       {"{hostname: a.example.test, container_port: 80, max_body_size: 0}", "x-ports[0].max_body_size: 0 is not a whole number"},
		"size fraction":   {"{hostname: a.example.test, container_port: 80, max_body_size: 1.5}", "x-ports[0].max_body_size: 1.5"},
		"timeout word":    {"{hostname: a.example.test, container_port: 80, response_timeout: soon}", `x-ports[0].response_timeout: "soon" is not a duration`},
		"timeout zero":    {"{hostname: a.example.test, container_port: 80, response_timeout: 0s}", "x-ports[0].response_timeout:"},
		"timeout too big": {"{hostname: a.example.test, container_port: 80, response_timeout: 48h}", "x-ports[0].response_timeout:"},
		"header host":     {"{hostname: a.example.test, container_port: 80, headers: {request: {set: {host: x}}}}", "x-ports[0].headers: request.set: Host is the proxy's"},
		"header typo":     {"{hostname: a.example.test, container_port: 80, headers: {request: {sett: {a: b}}}}", `unknown field "sett"`},
		"auth plain":      {"{hostname: a.example.test, container_port: 80, basic_auth: {users: {alice: pw}}}", "x-ports[0].basic_auth: users.alice: not a bcrypt hash"},
		"auth nobody":     {"{hostname: a.example.test, container_port: 80, basic_auth: {realm: x}}", "x-ports[0].basic_auth: users: none"},
		"size on tcp":     {"{ingress_port: 8081, container_port: 80, max_body_size: 1m}", "x-ports[0].max_body_size: needs hostname"},
		"timeout on host": {"{host_port: 8081, container_port: 80, response_timeout: 1s}", "x-ports[0].response_timeout: needs hostname"},
		"headers on tcp":  {"{ingress_port: 8081, container_port: 80, headers: {}}", "x-ports[0].headers: needs hostname"},
		"auth on tcp":     {"{ingress_port: 8081, container_port: 80, basic_auth: {}}", "x-ports[0].basic_auth: needs hostname"},
		"compress on tcp": {"{ingress_port: 8081, container_port: 80, compress: true}", "x-ports[0].compress: needs hostname"},
		"compress word":   {"{hostname: a.example.test, container_port: 80, compress: gzip}", "compress"},
		"protocol word":   {"{hostname: a.example.test, container_port: 80, upstream_protocol: h3}", `x-ports[0].upstream_protocol: "h3" is not http1, h2c or grpc`},
		"protocol on tcp": {"{ingress_port: 8081, container_port: 80, upstream_protocol: h2c}", "x-ports[0].upstream_protocol: needs hostname"},
		"tls word":        {"{hostname: '*.example.test', container_port: 80, tls: always}", `x-ports[0].tls: "always" is not on_demand`},
		"tls no wildcard": {"{hostname: a.example.test, container_port: 80, tls: on_demand}", "x-ports[0].tls: on_demand needs a wildcard hostname"},
		"tls on tcp":      {"{ingress_port: 8081, container_port: 80, tls: on_demand}", "x-ports[0].tls: needs hostname"},
	} {
		if _, err := loadXPorts("web", c.entry); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestTLSOnDemand: tls on_demand on a wildcard route reaches the route
// and its Container spec, and is gated like other newer options.
func TestTLSOnDemand(t *testing.T) {
	s, err := loadXPorts("web", "{hostname: '*.example.test', container_port: 80, tls: on_demand}")
	if err != nil {
		t.Fatal(err)
	}
	if s.Ingress[0].TLS != routeopt.TLSOnDemand || s.Spec.Ingress[0].TLS != routeopt.TLSOnDemand {
		t.Fatalf("route %+v spec %+v", s.Ingress[0], s.Spec.Ingress[0])
	}
	if i := slices.IndexFunc(optionGates, func(g optionGate) bool { return g.field == "tls" }); i < 0 || !optionGates[i].uses(s.Ingress[0]) {
		t.Fatal("tls on_demand is not gated")
	}
}

// TestRedirectFrom: redirect_from adds one route per hostname, with the
// entry's path, container port and redirect_https, answering 308 to the
// entry's hostname; the routes reach the spec and change its hash. Bad
// names are refused naming x-ports[i].redirect_from[j].
func TestRedirectFrom(t *testing.T) {
	s, err := loadXPorts("web", "{hostname: example.test, container_port: 8080, path: /shop, redirect_https: false, compress: true, redirect_from: [WWW.example.test, shop.example.test.]}")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Ingress) != 3 || len(s.Spec.Ingress) != 3 {
		t.Fatalf("routes %+v spec %+v", s.Ingress, s.Spec.Ingress)
	}
	for i, h := range []string{"www.example.test", "shop.example.test"} {
		r, sp := s.Ingress[i+1], s.Spec.Ingress[i+1]
		if r.Hostname != h || r.Path != "/shop" || r.ContainerPort != 8080 || r.RedirectTo != "example.test" || r.RedirectHTTPS == nil || *r.RedirectHTTPS ||
			r.Compress || !r.Redirects() || !r.Extended() || sp.RedirectTo != "example.test" || sp.Hostname != h {
			t.Errorf("redirect route %d: %+v spec %+v", i, r, sp)
		}
	}
	if s.Ingress[0].Redirects() || s.Ingress[0].RedirectTo != "" {
		t.Errorf("canonical route %+v", s.Ingress[0])
	}
	hash := func(e string) string {
		s, err := loadXPorts("web", e)
		if err != nil {
			t.Fatal(err)
		}
		return SpecHash(s.Spec)
	}
	if hash("{hostname: example.test, container_port: 80}") == hash("{hostname: example.test, container_port: 80, redirect_from: [www.example.test]}") {
		t.Error("redirect_from left the spec hash unchanged")
	}

	for name, c := range map[string]struct {
		entries []string
		want    string
	}{
		"wildcard from":   {[]string{"{hostname: example.test, container_port: 80, redirect_from: ['*.example.test']}"}, "x-ports[0].redirect_from[0]: \"*.example.test\" is a wildcard"},
		"wildcard target": {[]string{"{hostname: '*.example.test', container_port: 80, redirect_from: [example.test]}"}, "x-ports[0].redirect_from: needs a hostname that is not a wildcard"},
		"bad name":        {[]string{"{hostname: example.test, container_port: 80, redirect_from: [www.example.test, 'bad_name!']}"}, "x-ports[0].redirect_from[1]:"},
		"empty name":      {[]string{"{hostname: example.test, container_port: 80, redirect_from: ['']}"}, "x-ports[0].redirect_from[0]:"},
		"itself":          {[]string{"{hostname: example.test, container_port: 80, redirect_from: [Example.test]}"}, "x-ports[0].redirect_from[0]: \"Example.test\" is the hostname it redirects to"},
		"twice":           {[]string{"{hostname: example.test, container_port: 80, redirect_from: [www.example.test, WWW.example.test]}"}, "x-ports[0].redirect_from[1]: \"WWW.example.test\" is listed twice"},
		"not a list":      {[]string{"{hostname: example.test, container_port: 80, redirect_from: www.example.test}"}, "redirect_from"},
		"on tcp":          {[]string{"{ingress_port: 8081, container_port: 80, redirect_from: [www.example.test]}"}, "x-ports[0].redirect_from: needs hostname"},
		"another entry's": {[]string{"{hostname: www.example.test, container_port: 80}", "{hostname: example.test, container_port: 80, redirect_from: [www.example.test]}"},
			"x-ports[1]: route www.example.test is already x-ports[0]'s"},
	} {
		if _, err := loadXPorts("web", c.entries...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
