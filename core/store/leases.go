package store

import sdkstore "github.com/ployz/ployz/sdk/store"

// LeaseBody is one scope's lease (table leases, keyed by scope): the
// operator whose command holds it, since when and until when (unix
// milliseconds), and the nonce the holder renews and releases it with.
type LeaseBody struct {
	Holder  LeaseHolder `json:"holder"`
	Command string      `json:"command"`
	Started int64       `json:"started"`
	Expires int64       `json:"expires"`
	Nonce   string      `json:"nonce"`
	// Entry is the id of the Machine that granted it.
	Entry string `json:"entry,omitempty"`
}

// Live reports whether the lease still holds at now (unix ms).
func (l LeaseBody) Live(now int64) bool { return l.Nonce != "" && l.Expires > now }

// LeaseHolder names the operator holding a lease, as operator.Operator
// encodes it (this package sits below the operator package).
type LeaseHolder struct {
	Name           string `json:"name"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// Leases is the leases table, one row per scope.
func Leases(c *sdkstore.Client) sdkstore.Table[LeaseBody] {
	return sdkstore.NewTable[LeaseBody](c, "leases", "id")
}
