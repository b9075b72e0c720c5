package e2e

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

const drainCompose = `name: fleet
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "fleet"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
    x-ports:
      - hostname: fleet.example.test
        container_port: 8080
  agent:
    image: ployz-testapp:latest
    deploy: {mode: global}
  db:
    image: ployz-testapp:latest
    volumes: ["data:/data"]
    x-placement: {constraints: ["disk == ssd"]}
volumes:
  data: {}
`

// drainReport is `ployz machine drain --json`.
type drainReport struct {
	Machine    string `json:"machine"`
	Namespaces []struct {
		Namespace string `json:"namespace"`
		Error     string `json:"error"`
	} `json:"namespaces"`
	Remaining []struct {
		Service, Container, Reason string
	} `json:"remaining"`
}

// TestDrainRestartCatchUp covers the Machine-wide operations: a Machine
// added after a deploy gets the Global Service at once; draining a Machine
// under keep-alive load moves its Containers start-first with no failed
// request and names the one that cannot move (its volume is local);
// undrain brings the Global Service back; a rolling restart fails no
// request either.
func TestDrainRestartCatchUp(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	op.json(t, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2", "--label", "disk=ssd")
	if doc, errs, code := deployFile(t, op, drainCompose); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}

	t.Run("global-catch-up", func(t *testing.T) {
		op.json(t, &in, "machine", "add", "root@"+l.Machines[2].IP.String(), "--name", "m3", "-y")
		if got := machinesOf(t, op, "agent"); got != "m1,m2,m3" {
			t.Fatalf("agent after m3 joined runs on %s, want m1,m2,m3", got)
		}
	})

	t.Run("drain", func(t *testing.T) {
		loop := startLoop(l, "fleet.example.test")
		time.Sleep(time.Second)
		out, errs, code := op.run(t, "machine", "drain", "m2", "-y", "--json")
		loop.end(t, "drain of m2")
		var rep drainReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("drain output %q: %v\n%s", out, err, errs)
		}
		// db's volume is local to m2: it stays, named with the reason,
		// and the command says the drain is partial.
		if code != 3 || len(rep.Remaining) != 1 || rep.Remaining[0].Service != "db" || !strings.Contains(rep.Remaining[0].Reason, "volume") {
			t.Fatalf("drain: exit %d, report %+v\n%s", code, rep, errs)
		}
		for _, n := range rep.Namespaces {
			if n.Error != "" && !strings.Contains(n.Error, "incompletely applied") {
				t.Errorf("namespace %s: %s", n.Namespace, n.Error)
			}
		}
		for svc, want := range map[string]string{"web": "m1,m3", "agent": "m1,m3", "db": "m2"} {
			if got := machinesOf(t, op, svc); got != want {
				t.Errorf("%s after the drain runs on %s, want %s", svc, got, want)
			}
		}
		// Admission: a scale-up past what m1 and m3 hold is refused, naming
		// the eligible Machines: m2 is not one.
		if _, errs, code := op.run(t, "scale", "web", "3", "-p", "fleet", "-y"); code == 0 || !strings.Contains(errs, "(m1, m3)") {
			t.Fatalf("scale web 3 with m2 drained: exit %d\n%s", code, errs)
		}
	})

	t.Run("undrain", func(t *testing.T) {
		op.must(t, "machine", "undrain", "m2", "-y")
		if got := machinesOf(t, op, "agent"); got != "m1,m2,m3" {
			t.Fatalf("agent after undrain runs on %s, want m1,m2,m3", got)
		}
	})

	t.Run("restart", func(t *testing.T) {
		before := idsOf(t, op, "web")
		loop := startLoop(l, "fleet.example.test")
		time.Sleep(time.Second)
		op.must(t, "service", "restart", "web", "-p", "fleet", "-y")
		time.Sleep(time.Second)
		loop.end(t, "a rolling restart of web")
		after := idsOf(t, op, "web")
		if len(after) != 2 || strings.Join(after, ",") == strings.Join(before, ",") {
			t.Fatalf("web Containers before %v, after %v: want 2 fresh ones", before, after)
		}
		for _, id := range after {
			for _, old := range before {
				if id == old {
					t.Errorf("Container %s survived the restart", id)
				}
			}
		}
	})

	t.Run("roles-and-accepts", func(t *testing.T) { rolesAndAccepts(t, op) })
}

// rolesAndAccepts: a Service with a role goes only where a Machine has
// it (and is refused, naming the role, while none does); a Machine whose
// ployz.accepts leaves out services loses its Service Containers at the
// next deploy and shows its flags in `machine ls`.
func rolesAndAccepts(t *testing.T, op *operator) {
	const cache = "name: roles\nservices:\n  cache:\n    image: ployz-testapp:latest\n    x-placement: {roles: [cache]}\n"
	if _, errs, code := deployFile(t, op, cache); code == 0 || !strings.Contains(errs, `role "cache"`) {
		t.Fatalf("deploy with a role no Machine has: exit %d\n%s", code, errs)
	}
	op.must(t, "machine", "update", "m3", "--label-add", rpc.MachineLabelRolePrefix+"cache=true")
	if doc, errs, code := deployFile(t, op, cache); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy once m3 has the role: exit %d\n%s", code, errs)
	}
	for _, c := range ps(t, op, "roles").Containers {
		if c.Machine != "m3" {
			t.Errorf("cache runs on %s, want m3 only", c.Machine)
		}
	}
	op.must(t, "machine", "update", "m2", "--accepts", "ingress,builds")
	if ls := op.must(t, "machine", "ls"); !strings.Contains(ls, "ACCEPTS") || !strings.Contains(ls, "builds,ingress") {
		t.Fatalf("machine ls:\n%s", ls)
	}
	if _, errs, code := op.run(t, "machine", "update", "m2", "--accepts", "gpus"); code == 0 || !strings.Contains(errs, "gpus") {
		t.Fatalf("--accepts gpus: exit %d\n%s", code, errs)
	}
	// db may run only on m2 (disk == ssd), which takes no services now:
	// refused by name.
	if _, errs, code := deployFile(t, op, drainCompose); code == 0 || !strings.Contains(errs, `service "db"`) {
		t.Fatalf("deploy with db's Machine refusing services: exit %d\n%s", code, errs)
	}
	noDB := strings.Replace(drainCompose, "  db:\n", "  db:\n    deploy: {replicas: 0}\n", 1)
	if _, errs, code := deployFile(t, op, noDB); code != 0 {
		t.Fatalf("deploy without db: exit %d\n%s", code, errs)
	}
	if got := machinesOf(t, op, "agent"); got != "m1,m3" {
		t.Fatalf("agent with m2 accepting no services runs on %s, want m1,m3", got)
	}
}

// machinesOf lists, sorted and comma-joined, the Machines running a ready
// Container of service in project fleet.
func machinesOf(t *testing.T, op *operator, service string) string {
	t.Helper()
	var ms []string
	for _, c := range ps(t, op, "fleet").Containers {
		if c.Service == service && c.State == "running" && c.Ready {
			ms = append(ms, c.Machine)
		}
	}
	sort.Strings(ms)
	return strings.Join(ms, ",")
}

func idsOf(t *testing.T, op *operator, service string) []string {
	t.Helper()
	var ids []string
	for _, c := range ps(t, op, "fleet").Containers {
		if c.Service == service {
			ids = append(ids, c.ID)
		}
	}
	sort.Strings(ids)
	return ids
}
