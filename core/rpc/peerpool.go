package rpc

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// peerIdle is how long a forwarding connection to a peer is kept without
// a call. Short enough that a Machine that vanished without closing its
// connections (power loss, partition) is dialed afresh, with the dial's
// 5 s timeout, by the next deploy rather than found through the kept
// connection's TCP timeout. A variable for tests.
var peerIdle = 30 * time.Second

// peerPool keeps one Client per peer Machine for forwarded calls, so a
// fan-out pays one mutual-TLS handshake per Machine instead of one per
// call. A kept Client serves its Machine only while the Machine's row
// still names the same address and rpc_key: a changed row retires it and
// the next call dials (and verifies the new key) afresh.
type peerPool struct {
	dial func(ctx context.Context, p Peer) (*Client, error)
	idle time.Duration

	mu    sync.Mutex
	conns map[string]*keptClient // by Machine ID
}

// keptClient is one pooled Client and who is using it.
type keptClient struct {
	id, addr, key string
	c             *Client
	users         int
	retired       bool        // out of the pool; closed when users reach 0
	timer         *time.Timer // closes it after idle without users
}

func newPeerPool(dial func(ctx context.Context, p Peer) (*Client, error), idle time.Duration) *peerPool {
	return &peerPool{dial: dial, idle: idle, conns: map[string]*keptClient{}}
}

// get returns p's kept Client, or a new one when none is kept or the
// kept one no longer fits p's row or is no longer usable; kept says
// whether it had been kept. The caller puts it back with put.
func (pp *peerPool) get(ctx context.Context, p Peer) (k *keptClient, kept bool, err error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if k := pp.conns[p.ID]; k != nil {
		if k.addr == p.Address && k.key == p.RPCKey && k.c.usable() {
			k.users++
			if k.timer != nil {
				k.timer.Stop()
				k.timer = nil
			}
			return k, true, nil
		}
		pp.retireLocked(k)
	}
	// NewClient does not connect (the first call does), so dialing under
	// the lock is cheap and keeps one Client per Machine.
	c, err := pp.dial(ctx, p)
	if err != nil {
		return nil, false, err
	}
	k = &keptClient{id: p.ID, addr: p.Address, key: p.RPCKey, c: c, users: 1}
	pp.conns[p.ID] = k
	return k, false, nil
}

// put returns k after a call that ended with err. A call that failed in
// its transport retires k: the next call dials afresh instead of waiting
// out gRPC's reconnect backoff on a connection that just failed. So does
// a refusal by the peer's admission: the connection may carry what this
// Machine was when it dialed (its identity or management address before
// a reset and rejoin), which a new dial brings up to date.
func (pp *peerPool) put(k *keptClient, err error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	k.users--
	if c := status.Code(err); transportFailed(err) || c == codes.PermissionDenied || c == codes.Unauthenticated {
		pp.retireLocked(k)
	}
	if k.users > 0 {
		return
	}
	if k.retired {
		k.close()
		return
	}
	k.timer = time.AfterFunc(pp.idle, func() { pp.expire(k) })
}

// expire closes k if it is still idle and pooled.
func (pp *peerPool) expire(k *keptClient) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if k.users == 0 && !k.retired {
		pp.retireLocked(k)
	}
}

// retireLocked takes k out of the pool; it is closed now when unused,
// else by its last user's put (closing a Client cancels its calls).
func (pp *peerPool) retireLocked(k *keptClient) {
	if k.retired {
		return
	}
	k.retired = true
	if pp.conns[k.id] == k {
		delete(pp.conns, k.id)
	}
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if k.users == 0 {
		k.close()
	}
}

// close closes k's Client in the background: gRPC's Close waits for the
// connection's reader to stop, which must not hold up the pool's lock.
func (k *keptClient) close() { go k.c.Close() }

// call sends f (command cmd) to p on its kept connection.
//
// What is never sent twice: gRPC itself re-sends a call, once, only when
// the server cannot have processed it (gRFC A6 transparent retry: the
// connection was already closing when the stream was created, or the
// server refused the stream with REFUSED_STREAM or left it out of a
// GOAWAY's last stream ID). A connection the peer closed before this
// call is not used at all: get checks the socket's TCP state (usable),
// and a restarted Machine's kernel closed the old process's connection
// before the new process could accept anything. What remains is a
// connection that failed after the request left, with no sign of whether
// the Machine ran it (a close whose FIN was still on its way, a Machine
// crashing mid-call, a path lost): that is retried once on a fresh
// connection only for a command that reads (retryable), and otherwise
// returned to the caller, whose executor reports it and does not repeat it.
func (pp *peerPool) call(ctx context.Context, p Peer, cmd string, f *machinepb.Frame) (*machinepb.Frame, error) {
	k, kept, err := pp.get(ctx, p)
	if err != nil {
		return nil, err
	}
	out, err := k.c.raw.Call(ctx, f)
	pp.put(k, err)
	if err == nil || !kept || !transportFailed(err) || !retryable(cmd) || ctx.Err() != nil {
		return out, err
	}
	k, _, err2 := pp.get(ctx, p) // k was retired by put: a new connection
	if err2 != nil {
		return nil, errors.Join(err, err2)
	}
	out, err = k.c.raw.Call(ctx, f)
	pp.put(k, err)
	return out, err
}

// transportFailed: err is gRPC's own Unavailable (the connection failed
// or could not be made), not an answer from the Machine, which comes
// back inside a frame.
func transportFailed(err error) bool {
	return err != nil && status.Code(err) == codes.Unavailable
}

// readCommands change nothing on the Machine they run on and answer
// the same whether run once or twice: the only calls retried after a
// connection failed with the request possibly delivered. (wait_ready is
// not one: a second run takes a new baseline of restarts and could miss
// one the first saw.)
var readCommands = map[string]bool{
	CmdDescribeContract: true, CmdInspect: true, CmdListMachines: true, CmdMembership: true,
	CmdListContainers: true, CmdListImages: true, CmdServingStatus: true,
	CmdIngressStatus: true, CmdListJobs: true, CmdListLeases: true, CmdListHistory: true,
	CmdListRevisions: true, CmdListDeployRecords: true, CmdListCertificates: true,
	CmdListDNSProviders: true, CmdListAllocations: true, CmdListRemovals: true,
	CmdListVolumeRuns: true, CmdListVolumes: true, CmdInspectVolume: true,
	CmdListVolumeSnapshots: true, CmdUpgradeStatus: true,
}

func retryable(cmd string) bool { return readCommands[cmd] }
