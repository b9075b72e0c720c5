package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// deployDoc is `ployz deploy --json`.
type deployDoc struct {
	Plan    deploy.Plan     `json:"plan"`
	Outcome *deploy.Outcome `json:"outcome"`
}

type psDoc struct {
	Containers []struct {
		Machine string `json:"machine"`
		Down    bool   `json:"down"`
		rpc.ContainerObservation
	} `json:"containers"`
}

// formCluster enrolls every lab Machine with the CLI: m1 founds, the rest join.
func formCluster(t testing.TB, l *lab.Lab, op *operator) {
	t.Helper()
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", l.Machines[0].Name)
	for _, m := range l.Machines[1:] {
		op.json(t, &in, "machine", "add", "root@"+m.IP.String(), "--name", m.Name)
	}
}

// deployFile writes compose to a file and deploys it with --json -y.
func deployFile(t testing.TB, op *operator, compose string, extra ...string) (deployDoc, string, int) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(f, []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := op.run(t, append([]string{"deploy", "-f", f, "-y", "--json"}, extra...)...)
	var doc deployDoc
	if code == 0 || code == 3 {
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("deploy output %q: %v\n%s", out, err, errs)
		}
	}
	return doc, errs, code
}

func ps(t testing.TB, op *operator, project string) psDoc {
	t.Helper()
	var doc psDoc
	op.json(t, &doc, "ps", "-p", project)
	return doc
}

// count returns how many Containers of service are running and ready, and
// on how many distinct Machines.
func count(doc psDoc, service string) (ready, machines int) {
	seen := map[string]bool{}
	for _, c := range doc.Containers {
		if c.Service == service && c.State == "running" && c.Ready {
			ready++
			seen[c.Machine] = true
		}
	}
	return ready, len(seen)
}

func ops(plan deploy.Plan, service string) map[string]int {
	out := map[string]int{}
	for _, r := range plan.Rows {
		if r.Service == service {
			out[r.Op]++
		}
	}
	return out
}

const helloBase = `name: hello
services:
  web:
    image: ployz-testapp:latest
    environment: {MESSAGE: "%s"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
  api:
    image: ployz-testapp:latest
    environment: {READY_DELAY: "3s"}
    x-readiness: notify
    deploy: {replicas: %d}
%s`

const storeService = `  store:
    image: ployz-testapp:latest
    volumes: ["data:/data"]
    deploy: {replicas: %d}
volumes:
  data:
`

// composeKeysFile declares the host keys (docs/compose.md) and a Swarm
// placement constraint; TestDeploy/compose-keys reads them back from Docker.
const composeKeysFile = `name: keys
services:
  tuned:
    image: ployz-testapp:latest
    cap_add: [NET_ADMIN]
    cap_drop: [MKNOD]
    tmpfs: ["/scratch:size=8m"]
    sysctls: {net.core.somaxconn: "512"}
    extra_hosts: ["db.example:10.9.9.9"]
    ulimits: {nofile: {soft: 1024, hard: 2048}}
    shm_size: 32m
    pids_limit: 100
    stop_signal: SIGINT
    volumes: ["/cache"]
    init: true
    deploy:
      placement: {constraints: ["node.hostname==m2"]}
      restart_policy: {condition: on-failure, max_attempts: 3}
`

// TestDeploy drives deploys of a three-Service app across three real
// Machines: first deploy, a change to one Service, scaling, replicas 0,
// pruning, a failing redeploy with compensation, a partition mid-deploy,
// readiness notification timing and refusals of bad input (issue 6).
func TestDeploy(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	formCluster(t, l, op)
	var planned []deploy.Plan // plans that created Containers, for spec-hashes-salted

	t.Run("first-deploy", func(t *testing.T) {
		doc, errs, code := deployFile(t, op, fmt.Sprintf(helloBase, "v1", 2, fmt.Sprintf(storeService, 1)))
		planned = append(planned, doc.Plan)
		if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		p := ps(t, op, "hello")
		for svc, want := range map[string]int{"web": 2, "api": 2, "store": 1} {
			if n, _ := count(p, svc); n != want {
				t.Errorf("%s: %d ready, want %d", svc, n, want)
			}
		}
		if _, m := count(p, "web"); m != 2 {
			t.Errorf("web spread over %d Machines, want 2 (max_per_machine 1)", m)
		}
		// Readiness notification: api notifies 3 s after its process
		// starts, which happens during start_container, so a row's
		// start_container and wait_ready together cannot take less.
		waits := 0
		startMS := map[int]int64{}
		for _, s := range doc.Outcome.Steps {
			if s.Service == "api" && s.Action == rpc.CmdStartContainer {
				startMS[s.Row] = s.DurationMS
			}
		}
		for _, s := range doc.Outcome.Steps {
			if s.Service == "api" && s.Action == rpc.CmdWaitReady {
				waits++
				if total := startMS[s.Row] + s.DurationMS; total < 2900 {
					t.Errorf("api counted ready %d ms after its start began, before its 3 s notification", total)
				}
			}
		}
		if waits != 2 {
			t.Errorf("%d wait_ready steps for api's 2 Containers: %+v", waits, doc.Outcome.Steps)
		}
	})

	t.Run("logs", func(t *testing.T) {
		// A Machine whose Log Store is not serving yet (m3 joined moments
		// ago) is named and the command exits 3: wait until every Machine
		// answers, then check the merge.
		out := logsFromEvery(t, op, func(string) error { return nil }, "logs", "web", "-p", "hello", "--tail", "5")
		if strings.Count(out, "testapp: listening") != 2 {
			t.Errorf("logs of web's two Containers, merged:\n%s", out)
		}
		// -f shows the tail of both, then follows: a line one Container
		// logs afterwards arrives while the command runs.
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		f := op.stream(fctx, t, "logs", "web", "-p", "hello", "--tail", "5", "-f")
		// the tail holds both Containers' "listening" lines: wait for two.
		first := until(f.Stdout, "testapp: listening", 30*time.Second)
		tail := first && until(f.Stdout, "testapp: listening", 30*time.Second)
		var web psDoc
		for _, c := range ps(t, op, "hello").Containers {
			if c.Service == "web" {
				web.Containers = append(web.Containers, c)
			}
		}
		marker := fmt.Sprintf("followed-%d", time.Now().UnixNano())
		if len(web.Containers) > 0 {
			c := web.Containers[0]
			if _, err := l.Exec(ctx, c.Machine, "docker", "exec", c.ID, "/testapp", "get", "http://127.0.0.1:8080/log?line="+marker); err != nil {
				t.Fatal(err)
			}
		}
		followed := until(f.Stdout, marker, 30*time.Second)
		cancel()
		out, errs, _ := f.wait()
		if !tail || !followed {
			t.Errorf("logs -f of web's two Containers: tail %t, followed the new line %t:\n%s\n%s", tail, followed, out, errs)
		}
	})

	t.Run("exec", func(t *testing.T) {
		out := op.must(t, "exec", "web", "-p", "hello", "--", "/testapp", "get", "http://127.0.0.1:8080/env")
		if !strings.Contains(out, `"MESSAGE":"v1"`) {
			t.Errorf("exec output %q", out)
		}
		_, _, code := op.run(t, "exec", "web", "-p", "hello", "--", "/testapp", "get", "http://127.0.0.1:1/")
		if code != 1 {
			t.Errorf("exec of a failing command: exit %d, want the process's 1", code)
		}
	})

	t.Run("change-one-service", func(t *testing.T) {
		doc, errs, code := deployFile(t, op, fmt.Sprintf(helloBase, "v2", 2, fmt.Sprintf(storeService, 1)))
		planned = append(planned, doc.Plan)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errs)
		}
		if o := ops(doc.Plan, "web"); o["replace"] != 2 {
			t.Errorf("web rows %v, want 2 replace", o)
		}
		for _, svc := range []string{"api", "store"} {
			if o := ops(doc.Plan, svc); o["unchanged"] == 0 || len(o) != 1 {
				t.Errorf("%s rows %v, want only unchanged", svc, o)
			}
		}
	})

	t.Run("spec-hashes-salted", func(t *testing.T) {
		// Labels and replicated rows carry the Cluster-salted hash only:
		// neither the unsalted hash of the spec the plan ran nor its digest
		// appears anywhere, and a redeploy of the same file replaces nothing.
		compose := fmt.Sprintf(helloBase, "v2", 2, fmt.Sprintf(storeService, 1))
		doc, errs, code := deployFile(t, op, compose)
		if code != 0 {
			t.Fatalf("redeploy of the unchanged file: exit %d\n%s", code, errs)
		}
		unsalted := map[string]string{}
		for _, r := range doc.Plan.Rows {
			if r.Op != deploy.OpUnchanged {
				t.Errorf("redeploy of the unchanged file: %s %s %s (%s)", r.Machine, r.Service, r.Op, r.Reason)
			}
		}
		// Unchanged rows carry no spec: the specs running now are those
		// the first deploy and the change created.
		for _, p := range planned {
			for _, r := range p.Rows {
				if r.Spec != nil {
					unsalted[deploy.SpecHash(*r.Spec)] = r.Service
					unsalted[deploy.SpecDigest(*r.Spec)] = r.Service
				}
			}
		}
		var labels []string
		for _, m := range l.Machines {
			out, err := l.Exec(ctx, m.Name, "docker", "ps", "-a", "--filter", "label=ployz.service", "--format", `{{.Label "ployz.spec_hash"}} {{.Labels}}`)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				h, _, _ := strings.Cut(line, " ")
				if !strings.HasPrefix(h, "s1:") {
					t.Errorf("%s: a Container carries the unsalted spec hash %q", m.Name, h)
				}
				labels = append(labels, m.Name+": "+line)
			}
		}
		rows, err := l.Exec(ctx, "m1", "curl", "-sS", "--unix-socket", storeSocket, "-H", "Content-Type: application/json",
			"-d", `"SELECT body FROM containers"`, "http://store/v1/queries")
		if err != nil || !strings.Contains(rows, `s1:`) || regexp.MustCompile(`spec_hash\W+[0-9a-f]{16}\b`).MatchString(rows) {
			t.Errorf("containers rows' spec hashes: %v\n%s", err, rows)
		}
		if len(unsalted) == 0 {
			t.Fatal("no spec in the plans to check the store against")
		}
		for h, svc := range unsalted {
			if strings.Contains(rows, h) {
				t.Errorf("a replicated containers row holds %s's unsalted spec hash or digest %s", svc, h)
			}
			for _, lb := range labels {
				if strings.Contains(lb, h) {
					t.Errorf("a Container label holds %s's unsalted spec hash or digest %s: %s", svc, h, lb)
				}
			}
		}
	})

	t.Run("scale", func(t *testing.T) {
		op.must(t, "scale", "api", "3", "-p", "hello", "-y")
		if n, m := count(ps(t, op, "hello"), "api"); n != 3 || m != 3 {
			t.Errorf("after scale 3: %d ready on %d Machines", n, m)
		}
		op.must(t, "scale", "api", "1", "-p", "hello", "-y")
		if n, _ := count(ps(t, op, "hello"), "api"); n != 1 {
			t.Errorf("after scale 1: %d ready", n)
		}
	})

	t.Run("replicas-zero-and-prune", func(t *testing.T) {
		_, errs, code := deployFile(t, op, fmt.Sprintf(helloBase, "v2", 1, fmt.Sprintf(storeService, 0)))
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errs)
		}
		if n, _ := count(ps(t, op, "hello"), "store"); n != 0 {
			t.Errorf("store still has %d ready Containers at replicas 0", n)
		}
		var ls struct {
			Services []map[string]any `json:"services"`
		}
		op.json(t, &ls, "ls", "-p", "hello")
		declared := false
		for _, s := range ls.Services {
			if s["service"] == "store" && s["desired"] == "0" {
				declared = true
			}
		}
		if !declared {
			t.Errorf("store at replicas 0 should stay declared: %v", ls)
		}
		// Remove store from the file: pruned.
		_, errs, code = deployFile(t, op, fmt.Sprintf(helloBase, "v2", 1, ""))
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errs)
		}
		for _, c := range ps(t, op, "hello").Containers {
			if c.Service == "store" {
				t.Errorf("store Container %s left after it was removed from the file", c.Name)
			}
		}
	})

	t.Run("failing-redeploy-compensates", func(t *testing.T) {
		before := ps(t, op, "hello")
		bad := strings.Replace(fmt.Sprintf(helloBase, "v3", 1, ""), `{MESSAGE: "v3"}`, `{MESSAGE: "v3", READY_DELAY: "1h"}`, 1)
		doc, errs, code := deployFile(t, op, bad, "--ready-timeout", "15s")
		if code != 3 || doc.Outcome == nil {
			t.Fatalf("exit %d, want 3 (partial)\n%s", code, errs)
		}
		failed := false
		for _, s := range doc.Outcome.Steps {
			if s.Service == "web" && s.Status == deploy.StepFailed {
				failed = true
				// The failure report carries the Container's last lines.
				if !strings.Contains(strings.Join(s.LogTail, "\n"), "testapp: listening") {
					t.Errorf("web's failed step has no output of its Container: %q", s.LogTail)
				}
			}
		}
		if !failed {
			t.Errorf("outcome should name web's failed step: %+v", doc.Outcome.Steps)
		}
		// Compensation stopped what the failed deploy started: no web
		// Container other than the old ones runs.
		old := map[string]bool{}
		for _, c := range before.Containers {
			old[c.ID] = true
		}
		// The old web Containers still serve.
		after := ps(t, op, "hello")
		for _, c := range after.Containers {
			if c.Service == "web" && !old[c.ID] && c.State == "running" {
				t.Errorf("web Container %s on %s of the failed deploy still runs after compensation", c.Name, c.Machine)
			}
		}
		n, _ := count(after, "web")
		if n < 2 {
			t.Errorf("%d web Containers ready after the failed redeploy, want the 2 old ones", n)
		}
		for _, c := range before.Containers {
			if c.Service != "web" {
				continue
			}
			out, err := l.Exec(ctx, c.Machine, "curl", "-fsS", "--max-time", "3", "http://"+c.IP+":8080/")
			if err != nil || !strings.Contains(out, "v2") {
				t.Errorf("old web %s on %s: %q %v", c.Name, c.Machine, out, err)
			}
		}
	})

	t.Run("partition-mid-deploy", func(t *testing.T) {
		slow := fmt.Sprintf(helloBase, "v2", 3, "")
		slow = strings.Replace(slow, `READY_DELAY: "3s"`, `READY_DELAY: "4s", MESSAGE: "p"`, 1)
		// Partition m2 once the deploy waits on m2's new api Container:
		// mid-deploy by the deploy's own progress, not by a timer.
		f := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(f, []byte(slow), 0o644); err != nil {
			t.Fatal(err)
		}
		d := op.stream(ctx, t, "deploy", "-f", f, "-y", "--json", "--ready-timeout", "20s")
		mid := until(d.Stderr, "... m2 api "+rpc.CmdWaitReady, 3*time.Minute)
		if err := l.Partition(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		out, errs, code := d.wait()
		if err := l.Heal(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		if !mid {
			t.Fatalf("the deploy never waited on m2's api Container:\n%s", errs)
		}
		var doc deployDoc
		if code != 3 || json.Unmarshal([]byte(out), &doc) != nil || doc.Outcome == nil {
			t.Fatalf("exit %d, want 3 (partial)\n%s", code, errs)
		}
		named := false
		for _, s := range doc.Outcome.Steps {
			if s.Machine == "m2" && (s.Status == deploy.StepFailed || s.Status == deploy.StepNeverAttempted) {
				named = true
			}
		}
		if !named {
			t.Errorf("outcome should name m2's steps as failed or never attempted: %+v", doc.Outcome.Steps)
		}
		eventually(t, 60*time.Second, "rerun after heal completes", func() error {
			doc, errs, code := deployFile(t, op, slow, "--ready-timeout", "30s")
			if code != 0 || doc.Outcome != nil && doc.Outcome.Status != "completed" {
				return fmt.Errorf("exit %d: %s", code, errs)
			}
			return nil
		})
		if p := ps(t, op, "hello"); true {
			if n, m := count(p, "api"); n != 3 || m != 3 {
				var seen []string
				for _, c := range p.Containers {
					if c.Service == "api" {
						seen = append(seen, fmt.Sprintf("%s %s %s ready=%t", c.Machine, c.Name, c.State, c.Ready))
					}
				}
				t.Errorf("api after the rerun: %d ready on %d Machines: %v", n, m, seen)
				for _, m := range l.Machines {
					j, _ := l.Exec(ctx, m.Name, "sh", "-c", "journalctl -u ployz --no-pager -o cat | grep -i retire | tail -5")
					t.Logf("%s retire log:\n%s", m.Name, j)
				}
			}
		}
	})

	t.Run("compose-keys", func(t *testing.T) {
		// The host keys of a compose file reach Docker as Docker Compose
		// sets them, on the Machine the Swarm constraint names; a key
		// that would run something else is refused, naming Service and key.
		doc, errs, code := deployFile(t, op, composeKeysFile)
		if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy with host keys: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		out, err := l.Exec(ctx, "m2", "sh", "-c", `docker inspect $(docker ps -q --filter label=ployz.service=tuned)`)
		if err != nil {
			t.Fatal(err)
		}
		var got []struct {
			Config     struct{ StopSignal string }
			HostConfig struct {
				CapAdd, CapDrop, ExtraHosts []string
				Tmpfs, Sysctls              map[string]string
				Init                        *bool
				ShmSize                     int64
				PidsLimit                   *int64
				Ulimits                     []struct {
					Name       string
					Soft, Hard int64
				}
				RestartPolicy struct {
					Name              string
					MaximumRetryCount int
				}
			}
			Mounts []struct{ Type, Name, Destination string }
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
			t.Fatalf("docker inspect of tuned on m2 (the constraint's Machine): %v\n%s", err, out)
		}
		h := got[0].HostConfig
		anon := false
		for _, m := range got[0].Mounts {
			anon = anon || (m.Type == "volume" && m.Destination == "/cache")
		}
		for what, ok := range map[string]bool{
			"cap_add":          slices.Contains(h.CapAdd, "NET_ADMIN") || slices.Contains(h.CapAdd, "CAP_NET_ADMIN"),
			"cap_drop":         slices.Contains(h.CapDrop, "MKNOD") || slices.Contains(h.CapDrop, "CAP_MKNOD"),
			"tmpfs":            h.Tmpfs["/scratch"] == "size=8m",
			"sysctls":          h.Sysctls["net.core.somaxconn"] == "512",
			"extra_hosts":      slices.Contains(h.ExtraHosts, "db.example:10.9.9.9"),
			"init":             h.Init != nil && *h.Init,
			"shm_size":         h.ShmSize == 32<<20,
			"pids_limit":       h.PidsLimit != nil && *h.PidsLimit == 100,
			"ulimits":          len(h.Ulimits) == 1 && h.Ulimits[0].Name == "nofile" && h.Ulimits[0].Soft == 1024 && h.Ulimits[0].Hard == 2048,
			"restart_policy":   h.RestartPolicy.Name == "on-failure" && h.RestartPolicy.MaximumRetryCount == 3,
			"stop_signal":      got[0].Config.StopSignal == "SIGINT",
			"anonymous volume": anon,
		} {
			if !ok {
				t.Errorf("%s did not reach Docker on m2: %+v mounts %+v", what, h, got[0].Mounts)
			}
		}
		_, errs, code = deployFile(t, op, strings.Replace(composeKeysFile, "    init: true", "    init: true\n    network_mode: host", 1))
		if code == 0 || !strings.Contains(errs, "tuned") || !strings.Contains(errs, "network_mode") {
			t.Errorf("network_mode: host: exit %d, want a refusal naming the Service and the key:\n%s", code, errs)
		}
		op.must(t, "project", "rm", "keys", "-y")
	})

	t.Run("bad-input", func(t *testing.T) {
		before := len(ps(t, op, "hello").Containers)
		for name, c := range map[string]struct{ compose, want string }{
			"invalid":       {"name: hello\nservices:\n  web: [not, a, service]\n", "web"},
			"unknown-label": {strings.Replace(fmt.Sprintf(helloBase, "v2", 3, ""), "{max_per_machine: 1}", `{max_per_machine: 1, constraints: ["zone==mars"]}`, 1), "zone"},
			"no-image":      {strings.Replace(fmt.Sprintf(helloBase, "v2", 3, ""), "image: ployz-testapp:latest", "image: ployz-nope:1", 1), "ployz-nope:1"},
		} {
			_, errs, code := deployFile(t, op, c.compose)
			if code == 0 || !strings.Contains(errs, c.want) {
				t.Errorf("%s: exit %d, error should name %q:\n%s", name, code, c.want, errs)
			}
		}
		if after := len(ps(t, op, "hello").Containers); after != before {
			t.Errorf("bad input changed the Cluster: %d Containers, were %d", after, before)
		}
	})
}

// logsFromEvery runs ployz with args (a logs command) until every Machine
// answers (exit 0: a Machine whose Log Store is still starting is named
// and the command exits 3) and check accepts the output, then returns it.
func logsFromEvery(t *testing.T, op *operator, check func(string) error, args ...string) string {
	t.Helper()
	var out string
	eventually(t, 60*time.Second, "ployz "+strings.Join(args, " ")+" answered by every Machine", func() error {
		var errs string
		var code int
		out, errs, code = op.run(t, args...)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		return check(out)
	})
	return out
}
