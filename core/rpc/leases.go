package rpc

import (
	"strings"
	"time"
)

// Lease commands: one mutating command at a time per scope, across
// operators. The CLI acquires a lease through its entry before a Deploy,
// a drain's redeploys, a Volume Run or an enrollment, renews it while it
// runs and releases it at the end (docs/leases.md).
const (
	CmdAcquireLease = "acquire_lease"
	CapAcquireLease = "ployz.lease.acquire.v1"
	CmdRenewLease   = "renew_lease"
	CapRenewLease   = "ployz.lease.renew.v1"
	CmdReleaseLease = "release_lease"
	CapReleaseLease = "ployz.lease.release.v1"
	CmdListLeases   = "list_leases"
	CapListLeases   = "ployz.lease.list.v1"

	// MaxLeaseTTL bounds one grant: a holder that dies frees its scope
	// at most this long after its last renewal.
	MaxLeaseTTL = 10 * time.Minute
)

// LeaseHolder names the operator who holds a lease.
type LeaseHolder struct {
	Name           string `json:"name"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// AcquireLeaseRequest asks for scope's lease until Expires (unix ms).
// Nonce is the caller's random token: it renews and releases with it,
// and an acquire with the nonce already holding the lease extends it.
type AcquireLeaseRequest struct {
	Scope   string      `json:"scope"`
	Holder  LeaseHolder `json:"holder"`
	Command string      `json:"command"`
	Nonce   string      `json:"nonce"`
	Expires int64       `json:"expires"`
}

// RenewLeaseRequest extends the lease scope holds under Nonce.
type RenewLeaseRequest struct {
	Scope   string `json:"scope"`
	Nonce   string `json:"nonce"`
	Expires int64  `json:"expires"`
}

// ReleaseLeaseRequest frees the lease scope holds under Nonce; releasing
// a lease no longer held (expired, taken over) succeeds and does nothing.
type ReleaseLeaseRequest struct {
	Scope string `json:"scope"`
	Nonce string `json:"nonce"`
}

// Lease is one scope's lease as the entry reads it. The nonce is never
// answered: it is the holder's secret to renew and release with.
type Lease struct {
	Scope   string      `json:"scope"`
	Holder  LeaseHolder `json:"holder"`
	Command string      `json:"command"`
	Started int64       `json:"started"`
	Expires int64       `json:"expires"`
	Entry   string      `json:"entry,omitempty"`
}

// Leases answers list_leases: the live leases, by scope.
type Leases struct {
	Leases []Lease `json:"leases"`
}

// Lease-held refusals are CodeConflict with these details, so a client
// rebuilds who holds the scope without parsing the message.
const (
	DetailLeaseHolder      = "lease_holder"
	DetailLeaseFingerprint = "lease_key_fingerprint"
	DetailLeaseCommand     = "lease_command"
	DetailLeaseStarted     = "lease_started"
	DetailLeaseExpires     = "lease_expires"
)

// LeaseHeld is the refusal of a scope another holder has.
func LeaseHeld(l Lease) *Error {
	return Errorf(CodeConflict, "%s is held by %s running %q since %s (expires %s)", l.Scope, l.Holder.Name, l.Command,
		time.UnixMilli(l.Started).UTC().Format(time.RFC3339), time.UnixMilli(l.Expires).UTC().Format(time.RFC3339)).
		With("scope", l.Scope).With(DetailLeaseHolder, l.Holder.Name).With(DetailLeaseFingerprint, l.Holder.KeyFingerprint).
		With(DetailLeaseCommand, l.Command).With(DetailLeaseStarted, l.Started).With(DetailLeaseExpires, l.Expires)
}

// ValidLeaseScope refuses a scope that is not "namespace:<ns>",
// "volume:<name>" or "enroll".
func ValidLeaseScope(scope string) error {
	if scope == "" {
		return InvalidField("scope", "empty")
	}
	if scope == "enroll" {
		return nil
	}
	kind, name, ok := strings.Cut(scope, ":")
	switch {
	case !ok || (kind != "namespace" && kind != "volume"):
		return InvalidField("scope", "%q: want namespace:<name>, volume:<name> or enroll", clip(scope))
	case name == "" || len(name) > 255 || strings.ContainsAny(name, " \t\r\n/:"):
		return InvalidField("scope", "%q: the %s name is empty or malformed", clip(scope), kind)
	}
	return nil
}

func validNonce(nonce string) error {
	if len(nonce) < 8 || len(nonce) > 128 {
		return InvalidField("nonce", "want 8 to 128 characters, got %d", len(nonce))
	}
	return nil
}

// validExpiry refuses an expiry in the past or beyond MaxLeaseTTL.
func validExpiry(expires int64, now time.Time) error {
	switch {
	case expires <= now.UnixMilli():
		return InvalidField("expires", "%d is in the past", expires)
	case expires > now.Add(MaxLeaseTTL).UnixMilli():
		return InvalidField("expires", "%d is more than %s away", expires, MaxLeaseTTL)
	}
	return nil
}

// Validate refuses a malformed request, naming the field.
func (r AcquireLeaseRequest) Validate() error {
	if err := ValidLeaseScope(r.Scope); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(r.Holder.Name) == "":
		return InvalidField("holder.name", "empty")
	case strings.TrimSpace(r.Command) == "":
		return InvalidField("command", "empty")
	case len(r.Command) > 200:
		return InvalidField("command", "%d characters, at most 200", len(r.Command))
	}
	if err := validNonce(r.Nonce); err != nil {
		return err
	}
	return validExpiry(r.Expires, time.Now())
}

// Validate refuses a malformed request, naming the field.
func (r RenewLeaseRequest) Validate() error {
	if err := ValidLeaseScope(r.Scope); err != nil {
		return err
	}
	if err := validNonce(r.Nonce); err != nil {
		return err
	}
	return validExpiry(r.Expires, time.Now())
}

// Validate refuses a malformed request, naming the field.
func (r ReleaseLeaseRequest) Validate() error {
	if err := ValidLeaseScope(r.Scope); err != nil {
		return err
	}
	return validNonce(r.Nonce)
}
