package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// pulls lists "machine service image" for every row that pulls.
func pulls(p Plan) string {
	var out []string
	for _, r := range p.Rows {
		if r.Pull {
			out = append(out, r.Machine+" "+r.Service+" "+r.Op+" "+r.Spec.Image)
		}
	}
	return lines(out...)
}

func TestPlanPullsWhatAMachineLacks(t *testing.T) {
	pg := svc("db", 2, func(s *Service) { s.Spec.Image = "postgres:17" })
	web := svc("web", 2)
	m1, m2 := machine("m1", nil), machine("m2", nil)
	m2.Images = append(m2.Images, "postgres:17")
	unknown := machine("m3", nil)
	unknown.ImagesKnown, unknown.Images = false, nil

	p, err := MakePlan(app(pg, web), snapOf(m1, m2), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pulls(p), "m1 db create postgres:17"; got != want {
		t.Fatalf("pulls (missing):\n%s\nwant:\n%s", got, want)
	}
	// Every Machine lacks it: a registry can provide it, so no refusal.
	p, err = MakePlan(app(svc("db", 3, func(s *Service) { s.Spec.Image = "postgres:17"; s.MaxPerMachine = 0 })), snapOf(m1), PlanOptions{})
	if err != nil {
		t.Fatalf("plan refused an image a registry can provide: %v", err)
	}
	if got, want := pulls(p), "m1 db create postgres:17"; got != want {
		t.Fatalf("one pull per Machine and image:\n%s\nwant:\n%s", got, want)
	}
	p, err = MakePlan(app(web), snapOf(m1, m2), PlanOptions{Pull: PullAlways})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pulls(p), lines("m1 web create ployz-testapp:latest", "m2 web create ployz-testapp:latest"); got != want {
		t.Fatalf("pulls (always):\n%s\nwant:\n%s", got, want)
	}
	_, err = MakePlan(app(svc("db", 1, func(s *Service) { s.Spec.Image = "postgres:17" })), snapOf(m1), PlanOptions{Pull: PullNever})
	if err == nil || !strings.Contains(err.Error(), "postgres:17 is missing on every target Machine") {
		t.Fatalf("pull never: %v", err)
	}
	// A service's own pull_policy counts unless --pull overrides it.
	never := svc("db", 1, func(s *Service) { s.Spec.Image = "postgres:17"; s.PullPolicy = PullNever })
	if _, err = MakePlan(app(never), snapOf(m1), PlanOptions{}); err == nil {
		t.Fatal("pull_policy never was ignored")
	}
	if _, err = MakePlan(app(never), snapOf(m1), PlanOptions{Pull: PullMissing}); err != nil {
		t.Fatalf("--pull missing over pull_policy never: %v", err)
	}
	// Images not observed: no pull is guessed, create says what is there.
	p, err = MakePlan(app(pg), snapOf(unknown), PlanOptions{})
	if err != nil || pulls(p) != "" {
		t.Fatalf("unknown images: pulls %q err %v", pulls(p), err)
	}
}

func TestPlanPullPrecedesHook(t *testing.T) {
	s := svc("web", 1, func(s *Service) {
		s.Spec.Image = "app:2"
		s.Hooks = []Hook{{Command: []string{"/app", "migrate"}}}
	})
	p, err := MakePlan(app(s), snapOf(machine("m1", nil)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pulls(p); got != "m1 web hook app:2" {
		t.Fatalf("pulls: %q (the hook runs first, so it pulls)", got)
	}
}

func TestExecutePullStepFirstAndNamed(t *testing.T) {
	rec := &recorder{}
	sp := &rpc.ContainerSpec{Image: "reg.example:5000/app:1"}
	p := Plan{Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpReplace, Strategy: StopFirst, OldID: "old", OldName: "old", NewName: "new", Spec: sp, OldRunning: true, Pull: true},
		{MachineID: "m2", Machine: "m2", Service: "db", Op: OpCreate, NewName: "new2", Spec: sp, Pull: true},
	}}
	rec.fail = map[string]error{}
	ex := &Executor{C: rec, RegistryAuth: func(image string) string { return "cred-for-" + image }}
	o := ex.Run(context.Background(), p)
	want := strings.Join([]string{
		"m1 pull_image reg.example:5000/app:1 completed",
		"m2 pull_image reg.example:5000/app:1 completed",
		"m1 stop_container old completed",
		"m1 create_container new completed",
		"m1 start_container new completed",
		"m1 wait_ready new completed",
		"m2 create_container new2 completed",
		"m2 start_container new2 completed",
		"m2 wait_ready new2 completed",
		"(cluster) move_serving_pointer /db@1 -> 2 Container(s) completed",
		"(cluster) wait_serving_acks /db@1 completed",
		"m1 remove_container old completed",
	}, "\n")
	if got := steps(o); got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	if len(rec.auths) != 2 || rec.auths[0] != "cred-for-reg.example:5000/app:1" {
		t.Fatalf("auths sent: %q", rec.auths)
	}
	b, _ := json.Marshal(struct {
		P Plan
		O Outcome
	}{p, o})
	if strings.Contains(string(b), "cred-for") {
		t.Fatal("a credential reached the plan or outcome")
	}
}

func TestExecuteFailedPullChangesNothing(t *testing.T) {
	rec := &recorder{fail: map[string]error{"pull_image app:9": errors.New("pull app:9: unauthorized")}}
	sp := &rpc.ContainerSpec{Image: "app:9"}
	p := Plan{Rows: []Row{
		{MachineID: "m1", Machine: "m1", Service: "db", Op: OpReplace, Strategy: StopFirst, OldID: "old", OldName: "old", NewName: "new", Spec: sp, OldRunning: true, Pull: true},
		{MachineID: "m2", Machine: "m2", Service: "db", Op: OpCreate, NewName: "new2", Spec: sp, Pull: true},
	}}
	o := (&Executor{C: rec}).Run(context.Background(), p)
	// Every Machine's pull is tried and named; nothing else runs.
	want := strings.Join([]string{
		"m1 pull_image app:9 failed",
		"m2 pull_image app:9 failed",
		"m1 stop_container old never_attempted",
		"m1 create_container new never_attempted",
		"m1 start_container new never_attempted",
		"m1 wait_ready new never_attempted",
		"m2 create_container new2 never_attempted",
		"m2 start_container new2 never_attempted",
		"m2 wait_ready new2 never_attempted",
		"m1 remove_container old never_attempted",
	}, "\n")
	if got := steps(o); o.Status != "partial" || got != want || !strings.Contains(o.Steps[1].Error, "unauthorized") {
		t.Fatalf("status %s, steps:\n%s\nwant:\n%s", o.Status, got, want)
	}
	for _, c := range rec.calls {
		if !strings.Contains(c, "pull_image") {
			t.Fatalf("a failed pull was followed by %s", c)
		}
	}
}

// streamRecorder is a recorder whose pulls may stream: OpenStream goes to
// a real Machine RPC server that serves pull_image_progress or not.
type streamRecorder struct {
	*recorder
	c *rpc.Client
}

func (s streamRecorder) OpenStream(ctx context.Context, t rpc.Target, command string, payload any) (*rpc.ClientStream, error) {
	return s.c.OpenStream(ctx, rpc.Target{}, command, payload)
}

func pullServer(t *testing.T, serve bool, got *[]rpc.PullImageRequest) *rpc.Client {
	t.Helper()
	srv := rpc.NewServer(rpc.Options{})
	if serve {
		srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdPullImageProgress, Capability: rpc.CapPullImageProgress,
			Handler: func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
				var req rpc.PullImageRequest
				json.Unmarshal(raw, &req)
				*got = append(*got, req)
				for _, p := range []rpc.PullProgress{{Layers: 2, Bytes: 10, Total: 100}, {Layers: 2, LayersDone: 2, Bytes: 100, Total: 100}} {
					b, _ := json.Marshal(rpc.PullImageEvent{Progress: &p})
					if err := s.Send(rpc.StreamFrame{Event: b}); err != nil {
						return err
					}
				}
				b, _ := json.Marshal(rpc.PullImageEvent{Result: &rpc.PullImageResult{Image: req.Image, ID: "sha256:x"}})
				return s.Send(rpc.StreamFrame{Event: b})
			}})
	}
	sock := filepath.Join(t.TempDir(), "rpc.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(lis) // ends with Stop
	t.Cleanup(g.Stop)
	c, err := rpc.DialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestExecutePullShowsProgress: a Machine that streams its pull tells
// Progress the bytes and layers, with the credential in the request; a
// Machine without pull_image_progress is asked pull_image instead.
func TestExecutePullShowsProgress(t *testing.T) {
	sp := &rpc.ContainerSpec{Image: "reg.example:5000/app:1"}
	p := Plan{Rows: []Row{{MachineID: "m1", Machine: "m1", Service: "db", Op: OpCreate, NewName: "new", Spec: sp, Pull: true}}}
	for _, serve := range []bool{true, false} {
		var got []rpc.PullImageRequest
		rec := &recorder{}
		var pulls []rpc.PullProgress
		ex := &Executor{C: streamRecorder{rec, pullServer(t, serve, &got)}, RegistryAuth: func(string) string { return "cred" },
			Progress: func(e Event) {
				if e.Pull != nil {
					if e.Step.Action != rpc.CmdPullImage || e.Step.Machine != "m1" {
						t.Errorf("progress of step %+v", e.Step)
					}
					pulls = append(pulls, *e.Pull)
				}
			}}
		o := ex.Run(context.Background(), p)
		if o.Status != "completed" {
			t.Fatalf("serve=%v: %s", serve, steps(o))
		}
		pulled := slices.ContainsFunc(rec.calls, func(c string) bool { return strings.Contains(c, " "+rpc.CmdPullImage+" ") })
		if serve {
			if len(pulls) != 2 || pulls[1].LayersDone != 2 || pulls[1].Bytes != 100 {
				t.Errorf("progress %+v", pulls)
			}
			if len(got) != 1 || got[0].RegistryAuth != "cred" || got[0].Image != sp.Image {
				t.Errorf("streamed pull requests %+v", got)
			}
			if pulled {
				t.Errorf("pulled twice: %v", rec.calls)
			}
		} else if len(pulls) != 0 || !pulled {
			t.Errorf("without the stream: progress %+v, calls %v", pulls, rec.calls)
		}
	}
}
