package dockernet

import (
	"os"
	"os/exec"
	"sync"
)

// Debian 12 and 13 ship iptables with two backends, nf_tables
// (iptables-nft, the default) and the old xtables (iptables-legacy). Rules
// added through one are invisible to the other, and both rulesets apply to
// every packet, so our chains must sit beside Docker's, in the backend
// dockerd itself used: never a mix.
const (
	iptablesNft    = "iptables-nft"
	iptablesLegacy = "iptables-legacy"
	iptablesPlain  = "iptables" // the system's alternative, what dockerd runs
)

// EnvIptables overrides the detection with a command name, for hosts
// where it guesses wrong.
const EnvIptables = "PLOYZ_IPTABLES"

var (
	iptablesMu     sync.Mutex
	iptablesChosen string // set once the choice is known, not guessed
)

// iptablesCommand returns the iptables command to run. The backend holding
// Docker's chains wins; while neither does (dockerd not started yet), the
// system's `iptables` alternative is used and the question is asked again
// next time, since that is what dockerd will pick when it starts.
func iptablesCommand() string {
	if v := os.Getenv(EnvIptables); v != "" {
		return v
	}
	iptablesMu.Lock()
	defer iptablesMu.Unlock()
	if iptablesChosen != "" {
		return iptablesChosen
	}
	bin, sure := chooseIptables(hasCommand, hasDockerChains)
	if sure {
		iptablesChosen = bin
	}
	return bin
}

// chooseIptables picks the backend whose tables hold Docker's chains,
// preferring nf_tables when both do. sure is false when neither does.
func chooseIptables(has func(string) bool, dockerIn func(string) bool) (bin string, sure bool) {
	for _, b := range []string{iptablesNft, iptablesLegacy} {
		if has(b) && dockerIn(b) {
			return b, true
		}
	}
	return iptablesPlain, false
}

func hasCommand(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

// hasDockerChains reports whether bin's ruleset has Docker's DOCKER chain
// in the filter table (created by every dockerd that manages iptables).
func hasDockerChains(bin string) bool {
	return exec.Command(bin, "-w", "5", "-t", "filter", "-n", "-L", "DOCKER").Run() == nil
}
