package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/rpc"
)

// The dashboard reads `ployz logs -f`'s printed lines back; this pins
// parseLogLine to printLine's format. The line is built by reflection so
// the test holds whatever printLine's line type is (a Machine name and an
// embedded rpc.LogRecord).
func TestParseLogLineReadsPrintLine(t *testing.T) {
	var b lineBuffer
	at := time.Date(2026, 12, 1, 10, 0, 0, 5e6, time.UTC)
	rec := rpc.LogRecord{Time: at.UnixNano(), ContainerName: "app-prod-web-1", Text: "GET / | 200"}
	fn := reflect.ValueOf(printLine)
	line := reflect.New(fn.Type().In(1)).Elem()
	line.FieldByName("Machine").SetString("m2")
	line.FieldByName("LogRecord").Set(reflect.ValueOf(rec))
	fn.Call([]reflect.Value{reflect.ValueOf(&b), line, reflect.ValueOf(false)})
	got := parseLogLine(string(b[:len(b)-1]))
	want := dashboard.LogLine{Machine: "m2", Container: containerLabel(rec), Time: "10:00:00.005", Text: "GET / | 200"}
	if got != want {
		t.Fatalf("parsed %+v from %q, want %+v", got, b, want)
	}
	if l := parseLogLine("no separator"); l.Text != "no separator" || l.Machine != "" {
		t.Fatalf("unparsed line %+v", l)
	}
}

type lineBuffer []byte

func (b *lineBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
