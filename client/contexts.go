package client

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Contexts is this computer's operator store: the contexts, each a
// Cluster and the connections that reach it, and what the operator keeps
// per context (release setting, operator name, deploy records). No
// Machine is asked.
type Contexts struct {
	st *operator.Store
	// Default names the context a command uses when it names none
	// (--context); empty is PLOYZ_CONTEXT's, else the current one.
	Default string
}

// OpenContexts opens the operator store at its default path.
func OpenContexts(defaultContext string) (*Contexts, error) {
	st, err := operator.Open(operator.DefaultPath())
	if err != nil {
		return nil, err
	}
	return &Contexts{st: st, Default: defaultContext}, nil
}

// Close closes the operator store.
func (c *Contexts) Close() error { return c.st.Close() }

// List is every context (empty, not nil, for none).
func (c *Contexts) List() ([]operator.Context, error) {
	all, err := c.st.Contexts()
	return append([]operator.Context{}, all...), err
}

// Use makes name the current context.
func (c *Contexts) Use(name string) error { return c.st.Use(name) }

// Remove removes the context name (its allocation history is kept).
func (c *Contexts) Remove(name string) error { return c.st.RemoveContext(name) }

// Named is the context name names, else the Default one.
func (c *Contexts) Named(name string) (operator.Context, error) {
	return operator.Resolve(c.st, cmp.Or(name, c.Default))
}

// knownHosts is the operator's pinned SSH host keys.
func knownHosts() rpc.HostKeys { return rpc.HostKeys{Path: operator.KnownHostsPath()} }

// Export is the context name as a teammate or CI job imports it:
// connections and pinned host keys, never a private key.
func (c *Contexts) Export(name string) (operator.Export, error) {
	x, err := c.Named(name)
	if err != nil {
		return operator.Export{}, err
	}
	return operator.ExportContext(x, knownHosts())
}

// Import saves an exported context (under name when given) and pins its
// host keys; a pin this computer holds for another key is refused.
func (c *Contexts) Import(b []byte, name string, replace, use bool) (operator.Export, error) {
	e, err := operator.ParseExport(b)
	if err != nil {
		return e, err
	}
	if name != "" {
		e.Name = name
	}
	return e, c.st.Import(e, knownHosts(), replace, use)
}

// ContextRelease is a context's release setting (`ployz ctx release`).
type ContextRelease struct {
	Context string `json:"context"`
	operator.ReleaseSetting
}

// ReleaseUpdate changes a context's release setting: Clear first, then
// the fields given; the zero value changes nothing.
type ReleaseUpdate struct {
	Clear bool
	operator.ReleaseSetting
}

// Release shows, or with upd changes, the release setting of the
// context name names; a channel without a source is refused, changing
// nothing.
func (c *Contexts) Release(name string, upd ReleaseUpdate) (ContextRelease, error) {
	x, err := c.Named(name)
	if err != nil {
		return ContextRelease{}, err
	}
	rs, err := c.st.ReleaseSetting(x.Name)
	if err != nil {
		return ContextRelease{}, err
	}
	if upd.Clear {
		rs = operator.ReleaseSetting{}
	}
	rs.Source, rs.Channel = cmp.Or(upd.Source, rs.Source), cmp.Or(upd.Channel, rs.Channel)
	if upd.Clear || upd.Source != "" || upd.Channel != "" {
		if rs.Source == "" && rs.Channel != "" {
			return ContextRelease{}, fmt.Errorf("--channel %s: the context has no release source; pass --release-source too", rs.Channel)
		}
		if err := c.st.SetReleaseSetting(x.Name, rs); err != nil {
			return ContextRelease{}, err
		}
	}
	return ContextRelease{Context: x.Name, ReleaseSetting: rs}, nil
}

// SelfUpdateChannel is the channel `ployz self-update` follows: the
// flags, else the Default context's setting (when there is one), else
// the environment.
func SelfUpdateChannel(defaultContext string, flags operator.ReleaseSetting) (ReleaseChannel, error) {
	var saved operator.ReleaseSetting
	if cs, err := OpenContexts(defaultContext); err == nil {
		if r, err := cs.Release("", ReleaseUpdate{}); err == nil {
			saved = r.ReleaseSetting
		}
		cs.Close()
	}
	rc, ok := PickChannel(flags, saved)
	if !ok {
		return rc, fmt.Errorf("--release-source: no release source named (flag, `ployz ctx release`, or $%s)", EnvReleaseSource)
	}
	return rc, nil
}

// ContextOperator is the operator name a context's records carry
// (`ployz ctx operator`).
type ContextOperator struct {
	Context string `json:"context"`
	Name    string `json:"name"`
	// Overridden is the environment's operator name that wins over a
	// name just set or reset, while it is set (not in the JSON).
	Overridden string `json:"-"`
}

// OperatorName shows the Default context's operator name, or sets it
// (set) or goes back to the default user@host (reset).
func (c *Contexts) OperatorName(set *string, reset bool) (ContextOperator, error) {
	if reset && set != nil {
		return ContextOperator{}, fmt.Errorf("--reset: takes no NAME")
	}
	x, err := c.Named("")
	if err != nil {
		return ContextOperator{}, err
	}
	switch {
	case reset:
		err = c.st.SetOperatorName(x.Name, "")
	case set != nil:
		err = c.st.SetOperatorName(x.Name, *set)
	}
	if err != nil {
		return ContextOperator{}, err
	}
	out := ContextOperator{Context: x.Name}
	if out.Name, err = c.st.OperatorName(x.Name); err != nil {
		return ContextOperator{}, err
	}
	if v := strings.TrimSpace(os.Getenv(operator.EnvOperator)); v != "" && (reset || set != nil) {
		out.Overridden = v
	}
	return out, nil
}

// DeployList is `ployz deploy ls`: the Deploys this computer ran in a
// context, newest first, with each Service's last outcome.
type DeployList struct {
	Deploys      []deploy.Record      `json:"deploys"`
	LastOutcomes []deploy.LastOutcome `json:"last_outcomes"`
	Unreadable   []string             `json:"unreadable,omitempty"`
}

// Deploys lists the Default context's last limit deploy records.
func (c *Contexts) Deploys(limit int) (DeployList, error) {
	if limit < 1 {
		return DeployList{}, fmt.Errorf("--limit: must be at least 1, got %d", limit)
	}
	x, err := c.Named("")
	if err != nil {
		return DeployList{}, err
	}
	recs, skipped, err := DeployRecords(c.st, x.Name, limit)
	if err != nil {
		return DeployList{}, err
	}
	return DeployList{Deploys: append([]deploy.Record{}, recs...), LastOutcomes: deploy.LastOutcomes(recs), Unreadable: skipped}, nil
}
