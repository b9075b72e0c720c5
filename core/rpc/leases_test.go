package rpc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLeaseRequestsValidate refuses each malformed lease request naming
// the field, and accepts the well-formed ones.
func TestLeaseRequestsValidate(t *testing.T) {
	soon := time.Now().Add(time.Minute).UnixMilli()
	ok := AcquireLeaseRequest{Scope: "namespace:web-prod", Holder: LeaseHolder{Name: "ana"}, Command: "deploy", Nonce: "0123456789ab", Expires: soon}
	cases := []struct {
		name  string
		req   interface{ Validate() error }
		field string
	}{
		{"empty scope", func() AcquireLeaseRequest { r := ok; r.Scope = ""; return r }(), "scope"},
		{"unknown scope kind", func() AcquireLeaseRequest { r := ok; r.Scope = "project:x"; return r }(), "scope"},
		{"empty scope name", func() AcquireLeaseRequest { r := ok; r.Scope = "volume:"; return r }(), "scope"},
		{"no holder", func() AcquireLeaseRequest { r := ok; r.Holder.Name = " "; return r }(), "holder.name"},
		{"no command", func() AcquireLeaseRequest { r := ok; r.Command = ""; return r }(), "command"},
		{"short nonce", func() AcquireLeaseRequest { r := ok; r.Nonce = "x"; return r }(), "nonce"},
		{"expiry in the past", func() AcquireLeaseRequest { r := ok; r.Expires = time.Now().Add(-time.Second).UnixMilli(); return r }(), "expires"},
		{"expiry too far", func() AcquireLeaseRequest { r := ok; r.Expires = time.Now().Add(time.Hour).UnixMilli(); return r }(), "expires"},
		{"renew in the past", RenewLeaseRequest{Scope: "enroll", Nonce: ok.Nonce, Expires: 1}, "expires"},
		{"release no nonce", ReleaseLeaseRequest{Scope: "volume:pg"}, "nonce"},
	}
	for _, c := range cases {
		err := c.req.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Details["field"] != c.field {
			t.Errorf("%s: got %v, want a refusal naming %q", c.name, err, c.field)
		}
	}
	for _, r := range []interface{ Validate() error }{ok, RenewLeaseRequest{Scope: "enroll", Nonce: ok.Nonce, Expires: soon}, ReleaseLeaseRequest{Scope: "volume:pg", Nonce: ok.Nonce}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

// TestLeaseHeldNamesHolder: the refusal names holder, command and since,
// in the message and in details.
func TestLeaseHeldNamesHolder(t *testing.T) {
	e := LeaseHeld(Lease{Scope: "namespace:a", Holder: LeaseHolder{Name: "ana"}, Command: "deploy", Started: 1764470000000, Expires: 1764470060000})
	if e.Code != CodeConflict || !strings.Contains(e.Message, "ana") || !strings.Contains(e.Message, `"deploy"`) || !strings.Contains(e.Message, "2025-11-30T02:33:20Z") {
		t.Fatalf("%v", e)
	}
	if e.Details[DetailLeaseHolder] != "ana" || e.Details[DetailLeaseStarted] != int64(1764470000000) {
		t.Fatalf("details %v", e.Details)
	}
}
