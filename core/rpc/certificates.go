package rpc

// Certificate states in IngressStatus.Certificates.
const (
	// CertIssued: valid material is loaded for the hostname (a renewal
	// may be pending or failing; Error says so).
	CertIssued = "issued"
	// CertPending: no material yet; issuance waits its turn or runs.
	CertPending = "pending"
	// CertFailed: no valid material and the last attempt failed.
	CertFailed = "failed"
)

// CertificateState is the HTTPS state of one hostname the Ingress Proxy
// routes, as this Machine sees the replicated certificates table.
type CertificateState struct {
	Hostname string `json:"hostname"`
	State    string `json:"state"`
	// NotAfter is the loaded material's expiry (unix seconds).
	NotAfter int64 `json:"not_after,omitempty"`
	// Issuer is the Machine that wrote the material (or holds the
	// challenge of the issuance in progress).
	Issuer string `json:"issuer,omitempty"`
	// Error is the last failed attempt's error; NextAttemptAt (unix
	// seconds) is when the Cluster tries again.
	Error         string `json:"error,omitempty"`
	NextAttemptAt int64  `json:"next_attempt_at,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

// SkippedCertificate is a certificates row that was not loaded, with the
// reason naming the offending field.
type SkippedCertificate struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
