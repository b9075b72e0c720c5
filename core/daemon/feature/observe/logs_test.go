package observe

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
)

// TestLogRoutesValidateAndNameTheCapability: bad requests are refused
// naming the field before any plugin is asked; without a plugin host the
// refusal names the capability.
func TestLogRoutesValidateAndNameTheCapability(t *testing.T) {
	f := New(testHost{}, hclog.NewNullLogger())
	for payload, field := range map[string]string{
		`{"limit":-1}`:                               "limit",
		`{"limit":50001}`:                            "limit",
		`{"since_unix_nano":-5}`:                     "since_unix_nano",
		`{"since_unix_nano":10,"until_unix_nano":5}`: "until_unix_nano",
		`{"grep":"("}`:                               "grep",
		`{"service":7}`:                              "service",
	} {
		_, err := featuretest.Typed(f.logHistory)(context.Background(), json.RawMessage(payload))
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeInvalidArgument || e.Details["field"] != field {
			t.Errorf("%s: %v, want invalid_argument naming %s", payload, err, field)
		}
	}
	_, err := featuretest.Typed(f.logHistory)(context.Background(), json.RawMessage(`{"service":"web"}`))
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeUnavailable || e.Details["capability"] != sdkobserve.CapLogHistory {
		t.Fatalf("without a plugin host: %v", err)
	}
	if err := f.tailLogs(context.Background(), rpc.TailLogsRequest{Tail: -1}, nil); !errors.As(err, &e) || e.Details["field"] != "tail" {
		t.Fatalf("tail -1: %v", err)
	}
	if rpc.CapLogHistory != sdkobserve.CapLogHistory || rpc.CapTailLogs != sdkobserve.CapTailLogs {
		t.Fatal("core/rpc and sdk/observe disagree on the log capability names")
	}
}
