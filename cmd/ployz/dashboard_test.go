package main

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/rpc"
)

// The dashboard reads `ployz logs -f`'s printed lines back; this pins
// the two against each other.
func TestParseLogLineReadsPrintLine(t *testing.T) {
	var b lineBuffer
	at := time.Date(2026, 12, 1, 10, 0, 0, 5e6, time.UTC)
	printLine(&b, machineLine{Machine: "m2", LogRecord: rpc.LogRecord{Time: at.UnixNano(), ContainerName: "app-prod-web-1", Text: "GET / | 200"}}, false)
	got := parseLogLine(string(b[:len(b)-1]))
	want := dashboard.LogLine{Machine: "m2", Container: containerLabel(rpc.LogRecord{ContainerName: "app-prod-web-1"}), Time: "10:00:00.005", Text: "GET / | 200"}
	if got != want {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	if l := parseLogLine("no separator"); l.Text != "no separator" || l.Machine != "" {
		t.Fatalf("unparsed line %+v", l)
	}
}

type lineBuffer []byte

func (b *lineBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
