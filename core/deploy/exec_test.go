package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// recorder is a test double of OUR OWN contract (core/rpc/containers.go),
// not of the daemon: it records each call the executor makes and answers
// from a script, which is how these tests inject a failure at any step.
// Its Serving Pointer answers are the simplest a daemon may give (one
// Machine, m1, acking every pointer at once); the daemon's real pointer,
// ack and membership logic drives the executor in core/daemon's
// TestExecutorAgainstTheDaemon (real store, real Docker).
type recorder struct {
	mu    sync.Mutex // the executor calls different Machines at once
	calls []string
	// fail maps "command target-id" to the error that call returns.
	fail map[string]error
	// wait maps a container id to the wait_ready answers in order.
	wait   map[string][]rpc.WaitReadyResult
	onCall func(call string)
	// The Serving Pointer commands are answered like an entry whose
	// single Machine m1 acks every pointer at once (unless noAck); with
	// legacy they are unsupported, like a daemon older than pointers.
	legacy bool
	noAck  bool
	// pointers are the Serving Pointers by Service key, each its own
	// like the daemon's rows (a test may set the starting ones).
	pointers map[string]*pointer
	moves    map[string]int // pointer moves answered, by Service
	// auths are the registry credentials pull_image calls carried.
	auths []string
}

// pointer is one Service's Serving Pointer as the recorder keeps it.
type pointer struct {
	id  string
	set []rpc.ServingContainer
}

// pointer returns key's pointer, empty when it has none.
func (r *recorder) pointer(key string) pointer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pointers[key]; p != nil {
		return *p
	}
	return pointer{}
}

func (r *recorder) servingCall(command string, payload, out any) (string, any, error) {
	if r.legacy {
		return "", nil, rpc.Errorf(rpc.CodeUnsupported, "unknown command %s", command)
	}
	if r.pointers == nil {
		r.pointers = map[string]*pointer{}
	}
	switch p := payload.(type) {
	case rpc.MoveServingPointerRequest:
		if p.Delete {
			delete(r.pointers, p.Service)
			return "delete", nil, nil
		}
		var ids []string
		for _, c := range p.Containers {
			ids = append(ids, c.ID)
		}
		// Named by the Service and its own count of moves: steps on
		// other Machines run at once, so a count of all calls would
		// differ from run to run.
		if r.moves == nil {
			r.moves = map[string]int{}
		}
		r.moves[p.Service]++
		np := &pointer{id: fmt.Sprintf("%s@%d", p.Service, r.moves[p.Service]), set: p.Containers}
		r.pointers[p.Service] = np
		return strings.Join(ids, ","), rpc.ServingPointerMoved{ID: np.id, Containers: p.Containers}, nil
	case rpc.ServingStatusRequest:
		var st rpc.ServingStatus
		for _, key := range p.Services {
			sv := rpc.ServiceServing{Service: key}
			if cur := r.pointers[key]; cur != nil {
				sv.Pointer, sv.Containers = cur.id, cur.set
			}
			ack := sv.Pointer
			if r.noAck {
				ack = ""
			}
			sv.Acks = []rpc.ServingAck{{MachineID: "m1", Machine: "m1", Membership: "up", Acked: ack}}
			st.Services = append(st.Services, sv)
		}
		return "", st, nil
	}
	return "", nil, fmt.Errorf("recorder: %s payload %T", command, payload)
}

func (r *recorder) Call(_ context.Context, t rpc.Target, command string, payload, out any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := ""
	switch p := payload.(type) {
	case rpc.CreateContainerRequest:
		id = p.Name
	case rpc.ContainerRef:
		id = p.ID
	case rpc.StopContainerRequest:
		id = p.ID
	case rpc.RemoveContainerRequest:
		id = p.ID
	case rpc.WaitReadyRequest:
		id = p.ID
	case rpc.LogHistoryRequest:
		id = p.Container
	case rpc.PullImageRequest:
		id = p.Image
		r.auths = append(r.auths, p.RegistryAuth)
	case rpc.CreateVolumeRequest:
		id = fmt.Sprintf("%s/%d", p.Name, p.SizeBytes)
	}
	if command == rpc.CmdServingStatus || command == rpc.CmdMoveServingPointer {
		id, answer, err := r.servingCall(command, payload, out)
		if err != nil || command == rpc.CmdServingStatus {
			if err == nil && out != nil {
				b, _ := json.Marshal(answer)
				return json.Unmarshal(b, out)
			}
			return err
		}
		r.calls = append(r.calls, "entry "+command+" "+id)
		if out != nil && answer != nil {
			b, _ := json.Marshal(answer)
			return json.Unmarshal(b, out)
		}
		return nil
	}
	call := fmt.Sprintf("%s %s %s", t.One, command, id)
	r.calls = append(r.calls, call)
	if r.onCall != nil {
		// onCall may block to prove that calls overlap.
		r.mu.Unlock()
		r.onCall(call)
		r.mu.Lock()
	}
	if err := r.fail[command+" "+id]; err != nil {
		return err
	}
	var answer any
	switch command {
	case rpc.CmdCreateContainer:
		answer = rpc.ContainerObservation{ID: "id-" + id, Name: id}
	case rpc.CmdWaitReady:
		answer = rpc.WaitReadyResult{Outcome: "ready"}
		if q := r.wait[id]; len(q) > 0 {
			answer, r.wait[id] = q[0], q[1:]
		}
	case rpc.CmdLogHistory:
		answer = rpc.LogHistory{Lines: []rpc.LogRecord{{Text: "log of " + id, ContainerID: id}}}
	}
	if out != nil && answer != nil {
		b, _ := json.Marshal(answer)
		return json.Unmarshal(b, out)
	}
	return nil
}

func (r *recorder) Fanout(context.Context, rpc.Target, string, any) (rpc.FanoutResult, error) {
	return rpc.FanoutResult{}, errors.New("recorder: no fan-out in execution")
}

func spec() *rpc.ContainerSpec { return &rpc.ContainerSpec{Image: "x"} }

func steps(o Outcome) string {
	var s []string
	for _, st := range o.Steps {
		c := ""
		if st.Compensation {
			c = " (compensation)"
		}
		s = append(s, fmt.Sprintf("%s %s %s %s%s", st.Machine, st.Action, st.Container, st.Status, c))
	}
	return strings.Join(s, "\n")
}

func TestExecuteStartFirstReplace(t *testing.T) {
	rec := &recorder{}
	p := Plan{Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "web", Op: OpReplace, Strategy: StartFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true}}}
	var events []Event
	o := (&Executor{C: rec, Progress: func(e Event) { events = append(events, e) }}).Run(context.Background(), p)
	want := "m1 create_container new\nm1 start_container id-new\nm1 wait_ready id-new\nentry move_serving_pointer id-new\nm1 stop_container old\nm1 remove_container old"
	if got := strings.Join(rec.calls, "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
	if o.Status != "completed" || o.Partial() || len(events) != 14 {
		t.Fatalf("outcome %+v, %d events", o, len(events))
	}
	if set := rec.pointer(ingress.ServiceKey("", "web")).set; len(set) != 1 || set[0].ID != "id-new" {
		t.Fatalf("pointer names %+v, want the new Container only", set)
	}
}

func TestExecuteFailedStartFirstLeavesOldUntouched(t *testing.T) {
	rec := &recorder{wait: map[string][]rpc.WaitReadyResult{"id-new": {{Outcome: "unhealthy", LogTail: []string{"boom"}}}}}
	p := Plan{Services: []ServiceSummary{{Name: "web"}, {Name: "front", DependsOn: []string{"web"}}}, Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpReplace, Strategy: StartFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true},
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpCreate, NewName: "new2", Spec: spec()},
		{MachineID: "m2", Machine: "m2", Service: "front", Op: OpCreate, NewName: "f", Spec: spec()},
		{MachineID: "m3", Machine: "m3", Service: "other", Op: OpRemove, OldID: "o", OldName: "o"},
	}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	want := strings.Join([]string{
		"m1 create_container new completed",
		"m1 start_container new completed",
		"m1 wait_ready new failed",
		"m1 stop_container new completed (compensation)",
		"m1 create_container new2 never_attempted",
		"m1 start_container new2 never_attempted",
		"m1 wait_ready new2 never_attempted",
		"(cluster) move_serving_pointer /web@1 -> 1 Container(s) completed",
		"m1 stop_container old never_attempted",
		"m1 remove_container old never_attempted",
		"m2 create_container f never_attempted",
		"m2 start_container f never_attempted",
		"m2 wait_ready f never_attempted",
		"m3 stop_container o completed",
		"m3 remove_container o completed",
	}, "\n")
	if got := steps(o); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	if o.Status != "partial" || o.Steps[2].LogTail[0] != "boom" || !strings.Contains(o.Steps[11].Error, `"web" it depends on failed`) {
		t.Fatalf("outcome = %+v", o)
	}
	for _, c := range rec.calls {
		if strings.Contains(c, " old") && !strings.HasPrefix(c, "entry ") {
			t.Fatalf("old Container touched: %s", c)
		}
	}
	// The failed replacement's old Container is what stays served.
	if set := rec.pointer(ingress.ServiceKey("", "web")).set; len(set) != 1 || set[0].ID != "old" {
		t.Fatalf("pointer names %+v, want the old Container only", set)
	}
	if p := rec.pointer(ingress.ServiceKey("", "front")); p.id != "" {
		t.Fatalf("a Service none of whose rows ran got a pointer: %+v", p)
	}
}

func TestExecuteFailedStopFirstStartsOldAgain(t *testing.T) {
	rec := &recorder{fail: map[string]error{"start_container id-new": errors.New("port is already allocated")}}
	p := Plan{Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "db", Op: OpReplace, Strategy: StopFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true}}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	want := strings.Join([]string{
		"m1 stop_container old completed",
		"m1 create_container new completed",
		"m1 start_container new failed",
		"m1 wait_ready new never_attempted",
		"m1 stop_container new completed (compensation)",
		"m1 start_container old completed (compensation)",
		"(cluster) move_serving_pointer /db@1 -> 1 Container(s) completed",
		"(cluster) wait_serving_acks /db@1 completed",
		"m1 remove_container old never_attempted",
	}, "\n")
	if got := steps(o); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	if got := o.Steps[2].LogTail; len(got) != 1 || got[0] != "log of id-new" {
		t.Fatalf("log tail of the failed Container = %v", got)
	}
	if set := rec.pointer(ingress.ServiceKey("", "db")).set; len(set) != 1 || set[0].ID != "old" {
		t.Fatalf("pointer names %+v, want the restarted old Container", set)
	}
}

func TestExecuteCancelBetweenSteps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{onCall: func(c string) {
		if strings.Contains(c, "wait_ready id-a") {
			cancel()
		}
	}}
	p := Plan{Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpCreate, NewName: "a", Spec: spec()},
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpCreate, NewName: "b", Spec: spec()},
		{MachineID: "m1", Machine: "m1", Service: "api", Op: OpCreate, NewName: "c", Spec: spec()},
	}}
	p.Services = []ServiceSummary{{Name: "web"}, {Name: "api", DependsOn: []string{"web"}}}
	o := (&Executor{C: rec}).Run(ctx, p)
	if o.Status != "cancelled" || !o.Partial() {
		t.Fatalf("status = %s", o.Status)
	}
	if o.Steps[2].Status != StepCompleted || o.Steps[3].Status != StepNeverAttempted || !strings.Contains(o.Steps[3].Error, "cancelled") {
		t.Fatalf("steps:\n%s", steps(o))
	}
	for _, c := range rec.calls {
		if strings.HasSuffix(c, " b") || strings.HasSuffix(c, " c") || strings.HasSuffix(c, "-b") || strings.HasSuffix(c, "-c") {
			t.Fatalf("a step ran after cancellation: %s", c)
		}
	}
}

func TestExecuteHookWaitsForExit(t *testing.T) {
	rec := &recorder{wait: map[string][]rpc.WaitReadyResult{"id-h": {{Outcome: "ready"}, {Outcome: "exited", ExitCode: 0}}}}
	p := Plan{Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "api", Op: OpHook, NewName: "h", Spec: spec(), HookTimeoutSeconds: 30},
		{MachineID: "m1", Machine: "m1", Service: "api", Op: OpCreate, NewName: "a", Spec: spec()},
	}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	if o.Status != "completed" {
		t.Fatalf("steps:\n%s", steps(o))
	}
	want := "m1 create_container h\nm1 start_container id-h\nm1 wait_ready id-h\nm1 wait_ready id-h\nm1 remove_container id-h\nm1 create_container a\nm1 start_container id-a\nm1 wait_ready id-a\nentry move_serving_pointer id-a"
	if got := strings.Join(rec.calls, "\n"); got != want {
		t.Fatalf("calls:\n%s", got)
	}
	rec = &recorder{wait: map[string][]rpc.WaitReadyResult{"id-h": {{Outcome: "exited", ExitCode: 3, LogTail: []string{"migration failed"}}}}}
	o = (&Executor{C: rec}).Run(context.Background(), p)
	if o.Status != "partial" || o.Steps[2].Status != StepFailed || o.Steps[5].Status != StepNeverAttempted || !strings.Contains(o.Steps[2].Error, "exit code 3") {
		t.Fatalf("failed hook:\n%s", steps(o))
	}
}

func TestExecuteMovesServingPointerBeforeStopping(t *testing.T) {
	rec := &recorder{pointers: map[string]*pointer{"demo/web": {id: "p0", set: []rpc.ServingContainer{{ID: "old", MachineID: "m1"}, {ID: "gone", MachineID: "m2"}}}}}
	p := Plan{DeploymentID: "d2", Namespace: "demo", Services: []ServiceSummary{{Name: "web", Ingress: []IngressRoute{{Hostname: "a.example.test", ContainerPort: 80}}}}, Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpReplace, Strategy: StartFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true},
		{MachineID: "m2", Machine: "m2", Service: "web", Op: OpRemove, OldID: "gone", OldName: "gone"},
	}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	// The pointer names the new Container only, and is acked, before
	// anything the move left out stops; m1 and m2 then stop at once.
	want := strings.Join([]string{
		"m1 create_container new",
		"m1 start_container id-new",
		"m1 wait_ready id-new",
		"entry move_serving_pointer id-new",
		"m1 stop_container old",
		"m1 remove_container old",
		"m2 stop_container gone",
		"m2 remove_container gone",
	}, "\n")
	if got := strings.Join(inMachineOrder(rec.calls[:4], rec.calls[4:]), "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(rec.calls, "\n"), want)
	}
	now := rec.pointer("demo/web")
	if o.Status != "completed" || !strings.Contains(steps(o), "(cluster) wait_serving_acks "+now.id+" completed") {
		t.Fatalf("outcome %s:\n%s", o.Status, steps(o))
	}
	if len(now.set) != 1 || now.set[0].ID != "id-new" || now.set[0].Deployment != "d2" || now.set[0].MachineID != "m1" {
		t.Fatalf("pointer set %+v", now.set)
	}
}

func TestExecuteStopFirstLeavesPointerFirst(t *testing.T) {
	rec := &recorder{pointers: map[string]*pointer{"demo/db": {id: "p0", set: []rpc.ServingContainer{{ID: "a", MachineID: "m1"}, {ID: "b", MachineID: "m2"}}}}}
	p := Plan{Namespace: "demo", Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpReplace, Strategy: StopFirst, OldID: "a", OldName: "a", NewName: "a2", Spec: spec(), OldRunning: true},
		{MachineID: "m2", Machine: "m2", Service: "db", Op: OpUnchanged, OldID: "b", OldName: "b"},
	}}
	(&Executor{C: rec}).Run(context.Background(), p)
	want := "entry move_serving_pointer b\nm1 stop_container a\nm1 create_container a2\nm1 start_container id-a2\nm1 wait_ready id-a2\nentry move_serving_pointer id-a2,b\nm1 remove_container a"
	if got := strings.Join(rec.calls, "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
}

func TestExecuteUnackedPointerIsReported(t *testing.T) {
	rec := &recorder{noAck: true}
	p := Plan{Namespace: "demo", Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "web", Op: OpCreate, NewName: "a", Spec: spec()}}}
	o := (&Executor{C: rec, AckTimeout: 300 * time.Millisecond}).Run(context.Background(), p)
	last := o.Steps[len(o.Steps)-1]
	if o.Status != "partial" || last.Action != ActionWaitAcks || last.Status != StepFailed || !strings.Contains(last.Error, "m1 (up)") {
		t.Fatalf("outcome %s, last step %+v", o.Status, last)
	}
}

func TestExecuteRemovalDeletesPointer(t *testing.T) {
	rec := &recorder{pointers: map[string]*pointer{"demo/web": {id: "p0", set: []rpc.ServingContainer{{ID: "a", MachineID: "m1"}}}}}
	p := Plan{Namespace: "demo", Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "web", Op: OpRemove, OldID: "a", OldName: "a"}}}
	(&Executor{C: rec}).Run(context.Background(), p)
	want := "entry move_serving_pointer \nm1 stop_container a\nm1 remove_container a\nentry move_serving_pointer delete"
	if got := strings.Join(rec.calls, "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
	if p := rec.pointer("demo/web"); p.id != "" {
		t.Fatalf("a removed Service kept its pointer %+v", p)
	}
}

// inMachineOrder is head followed by tail's calls grouped by Machine (in
// order of first appearance), each Machine's calls in the order made:
// calls to different Machines may interleave in any order.
func inMachineOrder(head, tail []string) []string {
	by := map[string][]string{}
	var machines []string
	for _, c := range tail {
		m, _, _ := strings.Cut(c, " ")
		if _, ok := by[m]; !ok {
			machines = append(machines, m)
		}
		by[m] = append(by[m], c)
	}
	sort.Strings(machines)
	out := append([]string(nil), head...)
	for _, m := range machines {
		out = append(out, by[m]...)
	}
	return out
}

// TestExecuteRunsMachinesAndServicesAtOnce proves the overlap: each
// Machine's first create blocks until every independent create has
// started, which only happens if they run at once; the dependent Service
// starts only after the Service it depends on finished.
func TestExecuteRunsMachinesAndServicesAtOnce(t *testing.T) {
	var mu sync.Mutex
	started := map[string]bool{}
	all := make(chan struct{})
	var order []string
	rec := &recorder{onCall: func(c string) {
		mu.Lock()
		order = append(order, c)
		if strings.Contains(c, "create_container") {
			started[c] = true
			if len(started) == 3 {
				close(all)
			}
		}
		mu.Unlock()
		if strings.Contains(c, "create_container") && !strings.Contains(c, " api") {
			select {
			case <-all:
			case <-time.After(5 * time.Second):
				t.Errorf("%s: the other creates never started alongside it", c)
			}
		}
	}}
	p := Plan{Services: []ServiceSummary{{Name: "web"}, {Name: "db"}, {Name: "api", DependsOn: []string{"db"}}}, Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "web", Op: OpCreate, NewName: "w1", Spec: spec()},
		{MachineID: "m2", Machine: "m2", Service: "web", Op: OpCreate, NewName: "w2", Spec: spec()},
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpCreate, NewName: "d1", Spec: spec()},
		{MachineID: "m2", Machine: "m2", Service: "api", Op: OpCreate, NewName: "api", Spec: spec()},
	}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	if o.Status != "completed" {
		t.Fatalf("outcome %s:\n%s", o.Status, steps(o))
	}
	// Steps stay in plan order whatever order the calls finished in.
	if o.Steps[0].Container != "w1" || o.Steps[3].Container != "w2" || o.Steps[7].Container != "d1" || o.Steps[11].Container != "api" {
		t.Fatalf("steps out of plan order:\n%s", steps(o))
	}
	dbReady, apiCreate := -1, -1
	for k, c := range order {
		if c == "m1 wait_ready id-d1" {
			dbReady = k
		}
		if c == "m2 create_container api" {
			apiCreate = k
		}
	}
	if dbReady < 0 || apiCreate < dbReady {
		t.Fatalf("api created before db was ready:\n%s", strings.Join(order, "\n"))
	}
	// Each Service's pointer names its own Containers and no other's.
	for svc, want := range map[string]string{"web": "id-w1,id-w2", "db": "id-d1", "api": "id-api"} {
		var ids []string
		for _, c := range rec.pointer(ingress.ServiceKey("", svc)).set {
			ids = append(ids, c.ID)
		}
		sort.Strings(ids)
		if got := strings.Join(ids, ","); got != want {
			t.Errorf("pointer of %s names %s, want %s", svc, got, want)
		}
	}
}

// TestExecuteWithoutServingPointers: against a daemon older than Serving
// Pointers the executor replaces as before, with no pointer steps.
func TestExecuteWithoutServingPointers(t *testing.T) {
	rec := &recorder{legacy: true}
	p := Plan{Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "web", Op: OpReplace, Strategy: StartFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true}}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	want := "m1 create_container new\nm1 start_container id-new\nm1 wait_ready id-new\nm1 stop_container old\nm1 remove_container old"
	if got := strings.Join(rec.calls, "\n"); got != want || o.Status != "completed" || strings.Contains(steps(o), "serving") {
		t.Fatalf("calls:\n%s\nwant:\n%s\nsteps:\n%s", got, want, steps(o))
	}
}

// TestExecuteFailureReportWithoutLogStore: the failed Container's output
// comes from log_history; a Machine whose Log Store cannot answer gets a
// line naming the capability instead of an empty report.
func TestExecuteFailureReportWithoutLogStore(t *testing.T) {
	missing := rpc.Errorf(rpc.CodeUnavailable, "%s is not advertised by this Machine right now", rpc.CapLogHistory)
	rec := &recorder{fail: map[string]error{"start_container id-new": errors.New("port is already allocated"),
		"log_history id-new": missing}}
	p := Plan{Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "db", Op: OpReplace, Strategy: StopFirst, OldID: "old", OldName: "old", NewName: "new", Spec: spec(), OldRunning: true}}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	got := o.Steps[2].LogTail
	if len(got) != 1 || !strings.Contains(got[0], "output not available") || !strings.Contains(got[0], rpc.CapLogHistory) {
		t.Fatalf("log tail without a Log Store = %q", got)
	}
	for _, c := range rec.calls {
		if strings.Contains(c, "container_logs") {
			t.Fatalf("the retired container_logs was called: %s", c)
		}
	}
}

func TestExecuteCreatesVolumeBeforeItsContainer(t *testing.T) {
	p := Plan{Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpCreateVolume, Volume: "pg", SizeBytes: 1 << 20},
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpCreate, NewName: "new", Spec: spec()},
	}}
	rec := &recorder{}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	want := "m1 create_volume pg/1048576\nm1 create_container new\nm1 start_container id-new\nm1 wait_ready id-new\nentry move_serving_pointer id-new"
	if got := strings.Join(rec.calls, "\n"); got != want || o.Status != "completed" {
		t.Fatalf("status %s, calls:\n%s\nwant:\n%s", o.Status, got, want)
	}
	if got := steps(o); !strings.HasPrefix(got, "m1 create_volume volume pg completed\n") {
		t.Fatalf("steps:\n%s", got)
	}

	// A volume that cannot be created leaves its Service's Containers
	// uncreated.
	rec = &recorder{fail: map[string]error{"create_volume pg/1048576": errors.New("no pool")}}
	o = (&Executor{C: rec}).Run(context.Background(), p)
	if got := strings.Join(rec.calls, "\n"); got != "m1 create_volume pg/1048576" || o.Status != "partial" {
		t.Fatalf("status %s, calls:\n%s", o.Status, got)
	}
}
