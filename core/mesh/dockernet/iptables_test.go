package dockernet

import "testing"

func TestChooseIptablesFollowsDocker(t *testing.T) {
	all := func(string) bool { return true }
	for _, c := range []struct {
		name     string
		has      func(string) bool
		docker   map[string]bool
		want     string
		wantSure bool
	}{
		{"docker on nft", all, map[string]bool{iptablesNft: true}, iptablesNft, true},
		{"docker on legacy", all, map[string]bool{iptablesLegacy: true}, iptablesLegacy, true},
		{"both hold chains: nft", all, map[string]bool{iptablesNft: true, iptablesLegacy: true}, iptablesNft, true},
		{"docker not started yet", all, map[string]bool{}, iptablesPlain, false},
		{"only legacy installed", func(b string) bool { return b == iptablesLegacy }, map[string]bool{iptablesNft: true, iptablesLegacy: true}, iptablesLegacy, true},
		{"no variants installed", func(string) bool { return false }, map[string]bool{iptablesNft: true}, iptablesPlain, false},
	} {
		got, sure := chooseIptables(c.has, func(b string) bool { return c.docker[b] })
		if got != c.want || sure != c.wantSure {
			t.Errorf("%s: got %s sure=%v, want %s sure=%v", c.name, got, sure, c.want, c.wantSure)
		}
	}
}

func TestIptablesCommandOverride(t *testing.T) {
	t.Setenv(EnvIptables, "/usr/sbin/iptables-legacy")
	if got := iptablesCommand(); got != "/usr/sbin/iptables-legacy" {
		t.Errorf("override ignored: %s", got)
	}
}
