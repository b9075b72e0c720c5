package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRetiredCommandsSayUpgrade: an older CLI's container_logs (a call)
// and follow_logs (a stream) get an unsupported error naming the command
// that replaced each and telling to upgrade the CLI, also through a
// forwarding entry; a command that never existed stays "not served".
func TestRetiredCommandsSayUpgrade(t *testing.T) {
	ms := cluster(t, "m1", "m2")
	c := client(t, ms[0])
	ctx := context.Background()
	for _, tg := range []Target{{}, {One: "m2"}} {
		err := c.Call(ctx, tg, "container_logs", map[string]any{"id": "c", "tail": 20}, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeUnsupported || e.Details["command"] != "container_logs" ||
			!strings.Contains(e.Message, "retired") || !strings.Contains(e.Message, CmdLogHistory) || !strings.Contains(e.Message, "upgrade the ployz CLI") {
			t.Fatalf("container_logs via %+v = %v", tg, err)
		}
		st, err := c.OpenStream(ctx, tg, "follow_logs", map[string]any{"id": "c"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		st.Close()
		if !errors.As(err, &e) || e.Code != CodeUnsupported || !strings.Contains(e.Message, CmdTailLogs) || !strings.Contains(e.Message, "retired") {
			t.Fatalf("follow_logs via %+v = %v", tg, err)
		}
	}
	err := c.Call(ctx, Target{}, "no_such_command", nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnsupported || strings.Contains(e.Message, "retired") {
		t.Fatalf("an unknown command = %v", err)
	}
}
