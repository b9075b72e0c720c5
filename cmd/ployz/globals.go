package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/enroll"
	"github.com/ployz/ployz/core/operator"
)

// globals are the flags every Cluster command shares.
type globals struct {
	context string // operator context; default the current one
	connect string // a connection URL that overrides the context
	sshKey  string
	// acceptNewHostKey replaces a changed, pinned SSH host key.
	acceptNewHostKey bool
	// acceptHostKey is the fingerprint an unpinned host may present.
	acceptHostKey  string
	json           bool
	yes            bool
	connectTimeout time.Duration
	// wait makes a command wait for another operator's lease on its
	// scope instead of refusing (lease.go).
	wait bool
}

var g globals

func addGlobalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVarP(&g.context, "context", "c", "", "operator context (default: the current one)")
	f.StringVar(&g.connect, "connect", os.Getenv("PLOYZ_CONNECT"), "connect to this Entry Machine instead (ssh://user@host, unix:///path; tcp://host:port reaches only plaintext test listeners: the mesh listener admits Machines alone)")
	f.StringVar(&g.sshKey, "ssh-key", "", "SSH private key for ssh:// connections")
	f.BoolVar(&g.acceptNewHostKey, "accept-new-host-key", false, "replace a Machine's pinned SSH host key that changed (after re-installing it)")
	f.StringVar(&g.acceptHostKey, "accept-host-key", os.Getenv("PLOYZ_ACCEPT_HOST_KEY"), "on first contact, trust a Machine whose SSH host key has this SHA256 fingerprint (comma separated for several; env PLOYZ_ACCEPT_HOST_KEY); without it a new host key is asked about on a terminal, refused elsewhere")
	f.BoolVar(&g.json, "json", false, "print one JSON document on stdout")
	f.DurationVar(&g.connectTimeout, "connect-timeout", operator.DefaultAnswerTimeout, "how long to wait for an Entry Machine's first answer (env PLOYZ_CONNECT_TIMEOUT)")
	f.BoolVar(&g.wait, "wait", false, "when another operator's command holds the namespace, volume or enrollment, wait for it instead of refusing")
	f.BoolVarP(&g.yes, "yes", "y", os.Getenv("PLOYZ_AUTO_CONFIRM") == "1", "skip confirmations (never data-loss confirmations)")
}

func (g globals) dialOptions() operator.DialOptions {
	return operator.DialOptions{AcceptNewHostKey: g.acceptNewHostKey, AcceptHostKey: g.acceptHostKey, AnswerTimeout: g.connectTimeout,
		AskHostKey: askHostKey(os.Stdin, os.Stderr)}
}

// envDefaults lets PLOYZ_CONNECT_TIMEOUT stand for --connect-timeout when
// the flag is not given; a malformed value is refused, not ignored.
func envDefaults(cmd *cobra.Command) error {
	v := os.Getenv("PLOYZ_CONNECT_TIMEOUT")
	if v == "" || cmd.Flags().Changed("connect-timeout") {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("PLOYZ_CONNECT_TIMEOUT=%q: want a positive duration such as 90s", v)
	}
	g.connectTimeout = d
	return nil
}

// withContexts runs f with the operator store's contexts open (the
// flags' context their default), closed after.
func withContexts(f func(cs *client.Contexts) error) error {
	cs, err := client.OpenContexts(g.context)
	if err != nil {
		return err
	}
	defer cs.Close()
	return f(cs)
}

// clientOptions is the operator context and connection the flags name.
func (g globals) clientOptions() client.Options {
	return client.Options{Context: g.context, Connect: g.connect, SSHKey: g.sshKey, Dial: g.dialOptions()}
}

// withClient runs f with an operator library Session on the flags'
// context, closed after.
func withClient(c *cobra.Command, f func(*client.Session) error) error {
	o := g.clientOptions()
	o.OnImport = importReport(c.ErrOrStderr())
	s, err := client.Open(c.Context(), o)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetLeaseWait(leaseWaitFor(c))
	return leaseRefusal(c.OutOrStdout(), f(s))
}

// show is how a command prints its result: err (the command's) wins;
// then v as JSON with --json, else text on standard output.
func show(c *cobra.Command, v any, err error, text func(w io.Writer) error) error {
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), v)
	}
	return text(c.OutOrStdout())
}

// showPartial is show for a result that may be partial: a partial err
// still prints v, then exits 3 (silent: the JSON document carries the
// failures); any other err is returned with nothing printed.
func showPartial(c *cobra.Command, v any, err error, silent bool, text func(w io.Writer) error) error {
	if err != nil && !client.IsPartial(err) {
		return err
	}
	if perr := show(c, v, nil, text); perr != nil {
		return perr
	}
	return exitFor(err, silent)
}

// orJSON returns err, or prints v as JSON on standard output.
func orJSON(c *cobra.Command, v any, err error) error {
	if err != nil {
		return err
	}
	return printJSON(c.OutOrStdout(), v)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func progressTo(c *cobra.Command) enroll.Progress {
	return func(f string, a ...any) { fmt.Fprintf(c.ErrOrStderr(), f+"\n", a...) }
}
