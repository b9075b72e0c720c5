package gossip

import (
	"net"
	"sync/atomic"
)

// Traffic is what one member has put on the wire since it started, in
// bytes, after compression and encryption: the packets it sent (probes, acks, gossip and
// the store's best-effort messages) and both directions of every stream
// it opened (push-pull state exchanges, the store's reliable messages).
// A stream is counted by the member that dialed it only, so the sum over
// every member is the Cluster's traffic, each byte once.
type Traffic struct {
	PacketBytes int64 `json:"packet_bytes"`
	StreamBytes int64 `json:"stream_bytes"`
}

// Total is every byte counted.
func (t Traffic) Total() int64 { return t.PacketBytes + t.StreamBytes }

// traffic is the live counter behind Traffic.
type traffic struct{ packets, streams atomic.Int64 }

// Traffic returns the bytes this member has sent so far.
func (g *Gossip) Traffic() Traffic {
	return Traffic{PacketBytes: g.traffic.packets.Load(), StreamBytes: g.traffic.streams.Load()}
}

// countedConn adds every byte read and written on a dialed stream to n.
type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n.Add(int64(k))
	return k, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(int64(k))
	return k, err
}
