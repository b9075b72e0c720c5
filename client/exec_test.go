package client

import (
	"errors"
	"testing"

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
