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
	b, _ := load("hello.example.test", 9090)
	c, _ := load("other.example.test", 8080)
	same, _ := load("hello.example.test", 8080)
	if SpecHash(a.Spec) == SpecHash(b.Spec) || SpecHash(a.Spec) == SpecHash(c.Spec) || SpecHash(a.Spec) != SpecHash(same.Spec) {
		t.Fatal("the spec hash does not follow the ingress routes")
	}
	for _, bad := range []string{"localhost", "'bad_host.example'", "'*.example.com'"} {
		if _, err := load(bad, 80); err == nil || !strings.Contains(err.Error(), "hostname") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
