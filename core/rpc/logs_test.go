package rpc

import (
	"encoding/json"
	"testing"
)

// TestLogPayloadsPinned pins the wire shape of log_history and tail_logs:
// fields are only ever added.
func TestLogPayloadsPinned(t *testing.T) {
	h := LogHistory{MachineID: "m1", Lines: []LogRecord{{Time: 5, Stream: "stderr", Text: "boom", ContainerID: "c1",
		ContainerName: "web-1", Namespace: "p-prod", Service: "web", Deployment: "d1"}},
		Gaps: []LogGap{{From: 1, To: 2, Reason: "deleted by retention (size cap)"}}, Truncated: true, CorruptBytes: 3}
	b, _ := json.Marshal(h)
	want := `{"machine_id":"m1","lines":[{"time_unix_nano":5,"stream":"stderr","text":"boom","container_id":"c1","container_name":"web-1","namespace":"p-prod","service":"web","deployment":"d1"}],"gaps":[{"from_unix_nano":1,"to_unix_nano":2,"reason":"deleted by retention (size cap)"}],"truncated":true,"corrupt_bytes":3}`
	if string(b) != want {
		t.Fatalf("log_history payload\n got %s\nwant %s", b, want)
	}
	var req LogHistoryRequest
	if err := json.Unmarshal([]byte(`{"service":"web","namespace":"p-prod","since_unix_nano":10,"limit":5,"newest":true,"grep":"x","future":1}`), &req); err != nil ||
		req.Service != "web" || req.Since != 10 || req.Limit != 5 || !req.Newest || req.Grep != "x" {
		t.Fatalf("log_history request = %+v, %v", req, err)
	}
	var tr TailLogsRequest
	if err := json.Unmarshal([]byte(`{"service":"web","tail":3,"follow":true}`), &tr); err != nil || tr.Tail != 3 || !tr.Follow || tr.Service != "web" {
		t.Fatalf("tail_logs request = %+v, %v", tr, err)
	}
}
