package deploy

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestSocketActivationCompose: x-socket-activation marks the Service's one
// TCP host port (compose ports or x-ports host_port), leaves UDP ports and
// hashes as before when absent or false.
func TestSocketActivationCompose(t *testing.T) {
	for name, yaml := range map[string]string{
		"ports":   "name: p\nservices:\n  web:\n    image: x\n    ports: [\"8080:80\", \"9000:9000/udp\"]\n    x-socket-activation: true\n",
		"x-ports": "name: p\nservices:\n  web:\n    image: x\n    x-ports:\n      - {host_port: 8080, container_port: 80}\n      - {host_port: 9000, container_port: 9000, protocol: udp}\n    x-socket-activation: true\n",
	} {
		a, err := load(t, yaml, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ps := a.Services[0].Spec.Ports
		if len(ps) != 2 || !ps[0].SocketActivation || ps[0].HostPort != 8080 || ps[1].SocketActivation {
			t.Fatalf("%s: ports = %+v, want 8080/tcp activated, 9000/udp not", name, ps)
		}
		if hp := clashingHostPorts(a.Services[0]); len(hp) != 1 || hp[0] != 9000 {
			t.Fatalf("%s: clashing host ports = %v, want [9000]", name, hp)
		}
	}
	plain := "name: p\nservices:\n  web:\n    image: x\n    ports: [\"8080:80\"]\n"
	off, err := load(t, plain+"    x-socket-activation: false\n", "")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := load(t, plain, "")
	if SpecHash(off.Services[0].Spec) != SpecHash(before.Services[0].Spec) {
		t.Fatal("x-socket-activation: false changed the spec hash")
	}
}

// TestSocketActivationRefused: bad input names the key and says why.
func TestSocketActivationRefused(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"no host port":  {"    ports: [\"80\"]\n", `service "web": x-socket-activation: the Service publishes no TCP host port`},
		"udp only":      {"    ports: [\"53:53/udp\"]\n", `x-socket-activation: the Service publishes no TCP host port`},
		"http route":    {"    ports: [\"8080:80\"]\n    x-ports:\n      - {hostname: a.example.com, container_port: 80}\n", `x-socket-activation: the Service has ingress route a.example.com`},
		"ingress port":  {"    x-ports:\n      - {ingress_port: 5432, container_port: 5432}\n", `x-socket-activation: the Service has ingress route tcp/5432`},
		"two tcp ports": {"    ports: [\"8080:80\", \"8443:443\"]\n", `x-socket-activation: the Service publishes TCP host ports 8080, 8443; socket activation passes one`},
		"string":        {"    ports: [\"8080:80\"]\n", `x-socket-activation: want true or false`},
		"mapping":       {"    ports: [\"8080:80\"]\n", `x-socket-activation: want true or false`},
	}
	values := map[string]string{"string": `"yes"`, "mapping": "{port: 8080}"}
	for name, c := range cases {
		v := "true"
		if s, ok := values[name]; ok {
			v = s
		}
		yaml := "name: p\nservices:\n  web:\n    image: x\n" + c.yaml + "    x-socket-activation: " + v + "\n"
		_, err := load(t, yaml, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

// TestSocketActivationPlan: an activated Service replaces start-first
// (both Containers share the Machine's socket) and is placed only on
// Machines that pass sockets.
func TestSocketActivationPlan(t *testing.T) {
	act := func(s *Service) {
		s.HostPorts = []int{8080}
		s.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80, HostPort: 8080, Protocol: "tcp", SocketActivation: true}}
	}
	web := svc("web", 1, act)
	capable := func(m MachineState) MachineState {
		m.Capabilities = []string{rpc.CapContainerSocketActivation}
		return m
	}
	p, err := MakePlan(app(web), snapOf(capable(machine("m1", nil, ctr("web", "old", "running")))), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(p); got != "m1 web replace start-first" {
		t.Fatalf("plan = %q, want a start-first replacement", got)
	}
	_, err = MakePlan(app(web), snapOf(machine("m1", nil), capable(machine("m2", nil))), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = MakePlan(app(web), snapOf(machine("m1", nil)), PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "x-socket-activation") {
		t.Fatalf("plan on a Machine without the capability: %v", err)
	}
}
