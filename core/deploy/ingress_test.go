package deploy

import (
	"context"
	"strconv"
	"strings"
	"testing"
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
	for _, bad := range []string{"localhost", "'bad_host.example'", "'*.example.com'"} {
		if _, err := load(bad, 80); err == nil || !strings.Contains(err.Error(), "hostname") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestTCPIngressRoutes: an x-ports ingress_port entry is a tcp route on
// the Container spec and in the Service's ingress summary; every bad
// field is refused with x-ports[i].field named.
func TestTCPIngressRoutes(t *testing.T) {
	load := func(entries ...string) (Service, error) {
		c := "name: p\nservices:\n  db:\n    image: x\n    x-ports:\n"
		for _, e := range entries {
			c += "      - " + e + "\n"
		}
		app, err := Load(context.Background(), Source{Compose: []byte(c)})
		if err != nil {
			return Service{}, err
		}
		return app.Services[0], nil
	}
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
