package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/operator"
)

// TestCertRmDNSProvider: `cert rm dns-provider:x` is refused before any
// Cluster is reached (there is none here), exit 1, naming the command
// that removes a DNS provider rather than calling it an ACME certificate.
func TestCertRmDNSProvider(t *testing.T) {
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	out, errs, code := cli(t, nil, "cert", "rm", "dns-provider:x")
	if code != 1 || out != "" || !strings.Contains(errs, "`ployz cert dns-provider rm x`") || strings.Contains(errs, "ACME") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
