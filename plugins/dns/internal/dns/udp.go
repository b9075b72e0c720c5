package dns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	miekg "github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// udpServer reads queries from one UDP socket with a worker per CPU.
// Internal names are answered on the wire hot path (answerWire); the
// rest is unpacked and answered by Handler.AnswerFrom in a goroutine of
// its own, so a slow upstream never holds a worker.
type udpServer struct {
	pc      *net.UDPConn
	h       *Handler
	workers int
	batch   int // queries per system call at most (default batch)
	notify  func()

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup // workers and general-path answers in flight
	// slots bounds the general-path answers in flight (a forward may wait
	// on its upstreams for seconds): a flood of outside names cannot grow
	// goroutines without end. Beyond it a query gets SERVFAIL at once.
	slots chan struct{}
}

// generalSlots is how many general-path answers may be in flight.
const generalSlots = 4096

func newUDPServer(pc net.PacketConn, h *Handler) (*udpServer, error) {
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return nil, errors.New("dns: the UDP socket is not a *net.UDPConn")
	}
	growReadBuffer(uc)
	return &udpServer{pc: uc, h: h, workers: max(1, runtime.GOMAXPROCS(0)), slots: make(chan struct{}, generalSlots)}, nil
}

// readBuffer is the UDP receive buffer asked for: ~4 MiB holds some
// thousands of queries while the process is off CPU (a burst on a busy
// Machine, a restart), where the kernel default (~208 KiB, a few hundred
// queries) would drop them.
const readBuffer = 4 << 20

// growReadBuffer raises the socket's receive buffer past the
// net.core.rmem_max cap when the process may (root, CAP_NET_ADMIN),
// else as far as the cap allows. Best effort: a small buffer still works.
func growReadBuffer(uc *net.UDPConn) {
	if rc, err := uc.SyscallConn(); err == nil {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, readBuffer)
		}); err == nil && serr == nil {
			return
		}
	}
	_ = uc.SetReadBuffer(readBuffer)
}

// ActivateAndServe answers queries until ShutdownContext; it returns nil
// after a shutdown and the read error otherwise.
func (u *udpServer) ActivateAndServe() error {
	errc := make(chan error, u.workers)
	u.mu.Lock()
	if u.stopped {
		u.mu.Unlock()
		return nil
	}
	u.wg.Add(u.workers)
	u.mu.Unlock()
	for range u.workers {
		go func() {
			defer u.wg.Done()
			errc <- u.work()
		}()
	}
	if u.notify != nil {
		u.notify()
	}
	err := <-errc
	u.mu.Lock()
	stopped := u.stopped
	u.mu.Unlock()
	if stopped {
		return nil
	}
	_ = u.pc.SetReadDeadline(time.Unix(1, 0)) // stop the other workers too
	return err
}

// batch is how many queries one worker reads (recvmmsg) and answers
// (sendmmsg) per system call when that many are queued: most of a
// query's cost is its two system calls.
const batch = 32

func (u *udpServer) work() error {
	pc := ipv4.NewPacketConn(u.pc)
	size := u.batch
	if size <= 0 {
		size = batch
	}
	in := make([]ipv4.Message, size)
	out := make([]ipv4.Message, 0, size)
	resp := make([][]byte, size)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, 4096)} // as the miekg server read before
		resp[i] = make([]byte, 0, 1232)
	}
	s := &wireScratch{}
	for {
		n, err := pc.ReadBatch(in, 0)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				u.mu.Lock()
				stopped := u.stopped
				u.mu.Unlock()
				if stopped {
					return nil
				}
			}
			return err
		}
		out = out[:0]
		for i := range n {
			m := &in[i]
			from, ok := m.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			q := m.Buffers[0][:m.N]
			s.out = resp[i][:0]
			if r, ok := u.h.answerWire(q, from.AddrPort().Addr().Unmap(), s); ok {
				resp[i] = r
				out = append(out, ipv4.Message{Buffers: [][]byte{r}, Addr: from})
				continue
			}
			u.general(append([]byte(nil), q...), from.AddrPort())
		}
		for len(out) > 0 {
			k, err := pc.WriteBatch(out, 0)
			if err != nil {
				k = 1 // the first answer could not go (its client's problem): skip it alone
			}
			out = out[k:]
		}
	}
}

// general answers a query the hot path does not, the way a miekg server
// would: unpack, ServeDNS's rules (in a goroutine, within slots), pack.
// Malformed queries go unanswered (as miekg's server leaves them).
func (u *udpServer) general(q []byte, from netip.AddrPort) {
	req := new(miekg.Msg)
	if err := req.Unpack(q); err != nil {
		return
	}
	w := &udpWriter{pc: u.pc, to: from}
	select {
	case u.slots <- struct{}{}:
	default:
		if !req.Response && len(req.Question) == 1 {
			fail := new(miekg.Msg)
			fail.SetRcode(req, miekg.RcodeServerFailure)
			_ = w.WriteMsg(withOPT(fail, req))
		}
		return
	}
	u.wg.Add(1)
	go func() {
		defer func() { <-u.slots; u.wg.Done() }()
		u.h.ServeDNS(w, req)
	}()
}

// ShutdownContext stops reading and waits for the answers in flight.
func (u *udpServer) ShutdownContext(ctx context.Context) error {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	_ = u.pc.SetReadDeadline(time.Unix(1, 0))
	done := make(chan struct{})
	go func() { u.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// udpWriter is the miekg.ResponseWriter of one general-path query.
type udpWriter struct {
	pc *net.UDPConn
	to netip.AddrPort
}

func (w *udpWriter) LocalAddr() net.Addr  { return w.pc.LocalAddr() }
func (w *udpWriter) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(w.to) }
func (w *udpWriter) WriteMsg(m *miekg.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *udpWriter) Write(b []byte) (int, error) { return w.pc.WriteToUDPAddrPort(b, w.to) }
func (w *udpWriter) Close() error                { return nil }
func (w *udpWriter) TsigStatus() error           { return nil }
func (w *udpWriter) TsigTimersOnly(bool)         {}
func (w *udpWriter) Hijack()                     {}
func (w *udpWriter) Network() string             { return "udp" }
