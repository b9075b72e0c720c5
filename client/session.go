package client

import (
	"context"
	"strings"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Options say which operator context a Session opens and how it dials.
type Options struct {
	// StorePath is the operator store ("" is operator.DefaultPath()).
	StorePath string
	// Context names the operator context ("" is the current one).
	Context string
	// Connect, when set, is a connection URL used instead of the
	// context's connections; the Session's context is then Context as
	// given (possibly "").
	Connect string
	// SSHKey is the private key for an ssh:// Connect.
	SSHKey string
	Dial   operator.DialOptions
	// OnImport, when set, has Open import the context's local Saved
	// State, deploy records, allocations and removal marks into the
	// Cluster once (ImportLocalState) and hears how it went.
	OnImport func(ImportReport, error)
}

// Session is an open operator context: the local store, a connection to
// an Entry Machine and the context's name. It is safe for one caller at a
// time per operation; the dashboard shares one across requests (the store
// and the rpc client are safe for concurrent use).
type Session struct {
	st   *operator.Store
	ent  *rpc.Client
	name string
	own  bool
	// opts are what Open was given: an upgrade over SSH dials with them.
	opts Options
	// conn is the connection the entry was dialed over (its SSH key
	// names the operator).
	conn operator.Connection
	// leaseWait says whether a held scope is waited for (lease.go).
	leaseWait LeaseWait
}

// Open opens the operator store and connects to an Entry Machine.
func Open(ctx context.Context, o Options) (*Session, error) {
	path := o.StorePath
	if path == "" {
		path = operator.DefaultPath()
	}
	st, err := operator.Open(path)
	if err != nil {
		return nil, err
	}
	ent, conn, name, err := dial(ctx, st, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	s := &Session{st: st, ent: ent, name: name, own: true, opts: o, conn: conn}
	if o.OnImport != nil {
		o.OnImport(s.ImportLocalState(ctx))
	}
	return s, nil
}

// New is a Session over a store and an entry the caller opened and
// closes; Close leaves them open.
func New(st *operator.Store, ent *rpc.Client, contextName string) *Session {
	return &Session{st: st, ent: ent, name: contextName}
}

// Dial connects to the Entry Machine o names: Connect, else the
// context's connections in order. It returns the context's name.
func Dial(ctx context.Context, st *operator.Store, o Options) (*rpc.Client, string, error) {
	c, _, name, err := dial(ctx, st, o)
	return c, name, err
}

func dial(ctx context.Context, st *operator.Store, o Options) (*rpc.Client, operator.Connection, string, error) {
	if o.Connect != "" {
		conn := operator.Connection{URL: operator.NormalizeDest(o.Connect), SSHKey: o.SSHKey}
		c, err := operator.Dial(ctx, conn, o.Dial)
		return c, conn, o.Context, err
	}
	oc, err := ContextOf(st, o)
	if err != nil {
		return nil, operator.Connection{}, oc.Name, err
	}
	c, conn, err := operator.Connect(ctx, oc, o.Dial)
	return c, conn, oc.Name, err
}

// Operator is who this Session acts as: the context's operator name and
// the fingerprint of the SSH key it dialed with ("" over a local socket).
func (s *Session) Operator() operator.Operator {
	name, err := s.st.OperatorName(s.name)
	if err != nil {
		name = operator.DefaultOperatorName()
	}
	op := operator.Operator{Name: name}
	if strings.HasPrefix(s.conn.URL, "ssh://") {
		op.KeyFingerprint = s.opts.Dial.SSH(s.conn.SSHKey).Fingerprint()
	}
	return op
}

// ContextOf is the operator context o names: by default PLOYZ_CONTEXT's
// (a CI job's), else the current one (operator.Resolve).
func ContextOf(st *operator.Store, o Options) (operator.Context, error) {
	return operator.Resolve(st, o.Context)
}

// Close closes what Open opened.
func (s *Session) Close() error {
	if !s.own {
		return nil
	}
	s.ent.Close()
	return s.st.Close()
}

// Store is the operator store the Session reads and writes.
func (s *Session) Store() *operator.Store { return s.st }

// Entry is the connection to the Entry Machine.
func (s *Session) Entry() *rpc.Client { return s.ent }

// ContextName is the operator context's name.
func (s *Session) ContextName() string { return s.name }
