package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
)

// TestMeshGateClosesUnauthenticated: a flood of idle connections from one
// address is capped (all but maxPendingPerIP closed at once) and the rest
// are closed at the handshake deadline; a connection that completes TLS
// without a Machine's key is closed after unauthGrace; meanwhile a
// participating Machine from its own address is admitted.
func TestMeshGateClosesUnauthenticated(t *testing.T) {
	defer func(d, g time.Duration, p int) { handshakeDeadline, unauthGrace, maxPendingPerIP = d, g, p }(handshakeDeadline, unauthGrace, maxPendingPerIP)
	handshakeDeadline, unauthGrace, maxPendingPerIP = 2*time.Second, time.Second, 8
	c := newMeshCluster(t, 2)
	target := c.ms[0].peer

	const flood = 300
	start := time.Now()
	closedAt := make([]time.Duration, flood)
	var wg sync.WaitGroup
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}}
	for i := range flood {
		conn, err := d.Dial("tcp", target.Address)
		if err != nil {
			prereq.Missing(t, "127.0.0.9 on the loopback", err)
		}
		defer conn.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := conn.Read(make([]byte, 1))
			closedAt[i] = time.Since(start)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				closedAt[i] = time.Hour
			}
		}()
	}

	// A participating Machine gets in during the flood.
	if err := dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.3")}, target).Call(context.Background(), Target{}, "whoami", nil, nil); err != nil {
		t.Fatalf("a member's call during the flood: %v", err)
	}
	if took := time.Since(start); took > handshakeDeadline {
		t.Fatalf("a member's call waited %v for the flood", took)
	}

	// A TLS client without a certificate that then idles.
	tc, err := tls.Dial("tcp", target.Address, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"}}) // a test client
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tlsStart := time.Now()
	_, _ = tc.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"))
	_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		if _, err := tc.Read(buf); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("a TLS connection without a Machine's key was kept open for 10 s")
			}
			break
		}
	}
	if took := time.Since(tlsStart); took < unauthGrace/2 || took > unauthGrace+2*time.Second {
		t.Errorf("a TLS connection without a Machine's key closed after %v, want about %v", took, unauthGrace)
	}

	wg.Wait()
	early, late := 0, 0
	for _, at := range closedAt {
		switch {
		case at < 500*time.Millisecond:
			early++
		case at <= handshakeDeadline+2*time.Second:
			late++
		}
	}
	if early < flood-maxPendingPerIP || early+late != flood {
		t.Fatalf("of %d idle connections %d closed at once and %d by the deadline; want at least %d at once and all by %v",
			flood, early, late, flood-maxPendingPerIP, handshakeDeadline+2*time.Second)
	}
}
