package operator

import (
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/rpc"
)

// NormalizeDest turns what an operator types for a Machine into a
// connection URL: "local" is this computer's daemon socket, "user@host" and
// "host" are SSH (root by default), and a URL is kept as it is.
func NormalizeDest(dest string) string {
	switch {
	case dest == "local":
		return "unix://" + rpc.DefaultSocket
	case strings.Contains(dest, "://"):
		return dest
	case strings.Contains(dest, "@"):
		return "ssh://" + dest
	default:
		return "ssh://root@" + dest
	}
}

// ParseLabels parses --label key=value flags; none gives nil. A flag
// without "=" or with an empty key is refused, quoting it.
func ParseLabels(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}
