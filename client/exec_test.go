package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

func TestExecTarget(t *testing.T) {
	cs := []rpc.ContainerObservation{{ID: "c1", Name: "web-1", State: "exited"}, {ID: "c2", Name: "web-2", State: "running"}, {ID: "c3", Name: "web-3", State: "running"}}
	for container, want := range map[string]string{"": "c2", "web-3": "c3", "c3": "c3"} {
		if co, err := ExecTarget("web", "shop", deploy.Snapshot{}, cs, container); err != nil || co.ID != want {
			t.Errorf("container %q: %s, %v, want %s", container, co.ID, err, want)
		}
	}
	if _, err := ExecTarget("web", "shop", deploy.Snapshot{}, cs, "web-1"); err == nil || err.Error() != "service web in shop has no running Container named web-1" {
		t.Errorf("an exited one named: %v", err)
	}
	if _, err := ExecTarget("web", "shop", deploy.Snapshot{}, cs[:1], ""); err == nil || err.Error() != "service web in shop has no running Container" {
		t.Errorf("none running: %v", err)
	}
	var nse *NoServiceError
	if _, err := ExecTarget("web", "shop", deploy.Snapshot{}, nil, ""); !errors.As(err, &nse) || nse.Service != "web" {
		t.Errorf("no Containers: %v, want a NoServiceError", err)
	}
}

// TestExecRunsInTheContainer: Exec opens the exec stream on the Machine
// running the Container, sends stdin until it ends, splits stdout from
// stderr and answers the process's exit code.
func TestExecRunsInTheContainer(t *testing.T) {
	_, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	// A stdin that never reaches the process would hang it: fail instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, cs, err := s.ServiceContainers(ctx, "shop-production", "web")
	if err != nil {
		t.Fatal(err)
	}
	co, err := ExecTarget("web", "shop-production", snap, cs, "")
	if err != nil {
		t.Fatal(err)
	}
	var out, errw strings.Builder
	code, err := s.Exec(ctx, co, []string{"cat"}, false, ExecIO{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errw})
	if err != nil || code != 0 || out.String() != "cat\nhello\n" || errw.String() != "in "+co.Name+"\n" {
		t.Fatalf("cat: code %d, %v, stdout %q, stderr %q", code, err, out.String(), errw.String())
	}
	out.Reset()
	if code, err := s.Exec(ctx, co, []string{"exit", "3"}, false, ExecIO{Stdout: &out, Stderr: &errw}); err != nil || code != 3 || out.String() != "exit 3\n" {
		t.Fatalf("exit 3: code %d, %v, stdout %q", code, err, out.String())
	}
	co.ID = "gone"
	if _, err := s.Exec(ctx, co, []string{"true"}, false, ExecIO{Stdout: &out, Stderr: &errw}); err == nil {
		t.Fatal("exec in a Container the Machine does not have: no error")
	}
}
