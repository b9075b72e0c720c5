package footprint

import (
	"strings"
	"testing"
)

// TestChainRemovalDeletesJumpsFirst: a chain still jumped to cannot be
// deleted, so each parent's jumps go before -F/-X.
func TestChainRemovalDeletesJumpsFirst(t *testing.T) {
	for _, c := range chains {
		it := c.item()
		for _, p := range c.parents {
			j := strings.Index(it.Remove, "-D "+p+" -j "+c.name)
			if j < 0 || j > strings.Index(it.Remove, "-X "+c.name) {
				t.Errorf("%s: jump from %s not deleted before the chain", it.Name, p)
			}
		}
		if c.v6 != strings.Contains(it.Probe, "ip6tables") {
			t.Errorf("%s: families in probe: %s", it.Name, it.Probe)
		}
	}
}
