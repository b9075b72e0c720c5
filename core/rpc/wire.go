// Package rpc is Machine RPC: the JSON-in-gRPC protocol between the ployz
// CLI and ployzd, and between an Entry Machine and the Machines it
// forwards to.
//
// A request is {"protocol_major":1,"command":"...","payload":{...}}; a
// response is {"protocol_major":1,"payload":{...}} or carries
// {"error":{"code","message","details"}} instead. Every command has a
// capability name (ployz.<area>.<verb>.v1) listed by DescribeContract; a
// refusal of a catalogued command names it in details.capability
// (docs/architecture.md, Machine RPC rule 7). Readers ignore unknown fields.
//
// Each unary command is declared once with its request and answer types
// (methods.go, Declare); ployzd serves it through Bind and callers use
// Invoke, so the two sides cannot disagree on a type.
package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ployz/ployz/core/fieldpath"
)

// Request is the envelope of one call.
type Request struct {
	ProtocolMajor int             `json:"protocol_major"`
	Command       string          `json:"command"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// Response is the envelope of one answer: Payload or Error.
type Response struct {
	ProtocolMajor int             `json:"protocol_major"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Error         *Error          `json:"error,omitempty"`
}

// Error codes. A client branches on the code and on details, never on
// the message.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeNotFound        = "not_found"
	CodeAmbiguous       = "ambiguous"
	CodeUnsupported     = "unsupported"
	CodeUnavailable     = "unavailable"
	CodeConflict        = "conflict"
	CodeInternal        = "internal"
	CodeFailedPrecond   = "failed_precondition"
)

// Error is a refusal or failure with a stable code and free JSON details.
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e with details key set to v.
func (e *Error) With(key string, v any) *Error {
	c := *e
	c.Details = map[string]any{}
	for k, x := range e.Details {
		c.Details[k] = x
	}
	c.Details[key] = v
	return &c
}

// Capability returns the capability a refusal names in details.capability.
func Capability(err error) (string, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", false
	}
	c, ok := e.Details["capability"].(string)
	return c, ok
}

// InvalidField is the error for a malformed request field; it names the field.
func InvalidField(field, format string, args ...any) *Error {
	return Errorf(CodeInvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}

// Decode unmarshals a payload into v, refusing malformed JSON with an
// error that names the command. Unknown fields are ignored.
func Decode(command string, payload json.RawMessage, v any) error {
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	if err := json.Unmarshal(payload, v); err != nil {
		var te *json.UnmarshalTypeError
		isType := errors.As(err, &te) && te.Field != ""
		// The path with indexes (peers[1].subnet), also for a value
		// whose own parser failed, which encoding/json leaves unnamed.
		field := fieldpath.Locate(payload, v)
		switch {
		case isType && field == "":
			field = te.Field
		case field == "":
			return Errorf(CodeInvalidArgument, "%s payload: %v", command, err)
		}
		if isType {
			return InvalidField(field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return InvalidField(field, "%v", err)
	}
	return nil
}

// FanoutResult is the payload of a fanned-out call: what each target
// answered, and which targets were not asked or did not answer (bet 4).
type FanoutResult struct {
	Results []TargetResult `json:"results"`
	Omitted []Omission     `json:"omitted,omitempty"`
}

// TargetResult is one target's answer within a fan-out.
type TargetResult struct {
	MachineID   string          `json:"machine_id"`
	MachineName string          `json:"machine_name,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Error       *Error          `json:"error,omitempty"`
}

// Omission names a target a fan-out did not reach and why.
type Omission struct {
	MachineID   string `json:"machine_id"`
	MachineName string `json:"machine_name,omitempty"`
	Reason      string `json:"reason"`
}

// Machine names the target for people: its name, else its id.
func (r TargetResult) Machine() string { return nameOrID(r.MachineName, r.MachineID) }

// Machine names the omitted target for people: its name, else its id.
func (o Omission) Machine() string { return nameOrID(o.MachineName, o.MachineID) }

func nameOrID(name, id string) string {
	if name == "" {
		return id
	}
	return name
}

// Partial reports whether any target failed or was omitted.
func (f FanoutResult) Partial() bool {
	if len(f.Omitted) > 0 {
		return true
	}
	for _, r := range f.Results {
		if r.Error != nil {
			return true
		}
	}
	return false
}
