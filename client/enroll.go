package client

import (
	"context"
	"fmt"
	"net/url"

	"golang.org/x/crypto/ssh"

	"github.com/ployz/ployz/core/enroll"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Enrollment is a Machine to found a Cluster on or add to one.
type Enrollment struct {
	// Dest is where the Machine is: [user@]host, ssh://..., or local.
	Dest string
	// Options are the Machine's name, endpoints, labels, the Cluster
	// network (Init) and progress; the library sets Store and Context.
	Options enroll.Options
	// InstallDir, when set, gives the binaries to install over SSH on a
	// Machine without Ployz, and what removes them after.
	InstallDir func() (dir string, cleanup func(), err error)
	// Channel, when set, is where a Machine without Ployz gets it from
	// instead (ChannelInstallDir); Init saves it as the new context's
	// release source.
	Channel *ReleaseChannel
}

// Init founds a Cluster on the Machine and saves the operator context
// o.Context ("" is "default") with its connection, made current. A
// context that exists is refused: a new Cluster needs a new name.
func Init(ctx context.Context, o Options, e Enrollment) (rpc.Inspection, error) {
	path := o.StorePath
	if path == "" {
		path = operator.DefaultPath()
	}
	st, err := operator.Open(path)
	if err != nil {
		return rpc.Inspection{}, err
	}
	defer st.Close()
	name := o.Context
	if name == "" {
		name = "default"
	}
	if _, err := st.Context(name); err == nil {
		return rpc.Inspection{}, fmt.Errorf("context %q already exists; pass --context NAME for a new Cluster, or `ployz machine add` to grow it", name)
	}
	target, dest, err := dialTarget(ctx, o, e)
	if err != nil {
		return rpc.Inspection{}, err
	}
	defer target.Close()
	// The founding Machine's allocation is recorded in the Cluster it
	// founds, once it is initialized.
	founder := &Session{st: st, ent: target, name: name, opts: o, conn: operator.Connection{URL: dest, SSHKey: o.SSHKey}}
	alloc := founder.allocations()
	alloc.founding = true
	e.Options.Allocations = alloc
	in, err := enroll.Init(ctx, target, e.Options)
	if err != nil {
		return in, err
	}
	if err := st.SaveContext(operator.Context{Name: name, Network: in.Network, Connections: []operator.Connection{{URL: dest, SSHKey: o.SSHKey}}}); err != nil {
		return in, err
	}
	if e.Channel != nil {
		if err := st.SetReleaseSetting(name, operator.ReleaseSetting{Source: e.Channel.Source, Channel: e.Channel.Channel}); err != nil {
			return in, err
		}
	}
	return in, st.Use(name)
}

// AddMachine enrolls the Machine into the Session's Cluster and adds its
// connection to the context.
func (s *Session) AddMachine(ctx context.Context, e Enrollment) (rpc.Inspection, error) {
	e.Options.Allocations = s.allocations()
	// One enrollment at a time across operators: subnet choice reads
	// the Cluster's allocation history and the Machines the last one
	// published.
	ctx, release, err := s.Hold(ctx, EnrollScope, "machine add "+e.Dest, nil)
	if err != nil {
		return rpc.Inspection{}, err
	}
	defer release()
	target, dest, err := dialTarget(ctx, s.opts, e)
	if err != nil {
		return rpc.Inspection{}, err
	}
	defer target.Close()
	in, err := enroll.Add(ctx, s.ent, target, e.Options)
	if err != nil || s.name == "" {
		return in, err
	}
	return in, s.st.AddConnection(s.name, operator.Connection{URL: dest, SSHKey: s.opts.SSHKey})
}

// dialTarget connects to a Machine being enrolled; over SSH it first
// installs and starts Ployz there when missing. It returns the
// connection URL.
func dialTarget(ctx context.Context, o Options, e Enrollment) (*rpc.Client, string, error) {
	raw := operator.NormalizeDest(e.Dest)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, raw, fmt.Errorf("destination %q: %w", e.Dest, err)
	}
	if u.Scheme == "ssh" {
		if err := ensureInstalled(ctx, u, o, e); err != nil {
			return nil, raw, err
		}
	}
	c, err := operator.Dial(ctx, operator.Connection{URL: raw, SSHKey: o.SSHKey}, o.Dial)
	return c, raw, err
}

// ensureInstalled installs and starts Ployz over SSH when missing.
func ensureInstalled(ctx context.Context, u *url.URL, o Options, e Enrollment) error {
	t, err := rpc.NewSSHTunnel(u, o.Dial.SSH(o.SSHKey))
	if err != nil {
		return err
	}
	defer t.Close()
	sc, err := t.Client(ctx)
	if err != nil {
		return err
	}
	return installOver(ctx, sc, e)
}

// installOver is ensureInstalled on an open SSH connection: what the
// server runs picks the bundle, wherever this CLI runs.
func installOver(ctx context.Context, sc *ssh.Client, e Enrollment) error {
	progress := e.Options.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	// What the server runs decides the bundle, and an unsupported one is
	// refused here, before anything (Docker included) is written there.
	plat, err := DetectPlatform(sc)
	if err != nil {
		return err
	}
	dir, cleanup := "", func() {}
	switch {
	case installed(sc):
	case e.Channel != nil:
		if dir, cleanup, err = ChannelInstallDir(ctx, *e.Channel, plat, progress); err != nil {
			return err
		}
	case e.InstallDir != nil:
		if dir, cleanup, err = e.InstallDir(); err != nil {
			return err
		}
	}
	defer cleanup()
	return enroll.EnsureInstalled(ctx, sc, dir, progress)
}

// installed reports whether the server behind c already has ployzd
// (then nothing is fetched for it).
func installed(c *ssh.Client) bool {
	s, err := c.NewSession()
	if err != nil {
		return false
	}
	defer s.Close()
	return s.Run("test -x /usr/local/bin/ployzd") == nil
}
