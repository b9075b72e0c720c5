package iocount

import (
	"io"
	"sync/atomic"
)

// Reader counts what is read through it. The count is atomic because the
// reader is usually drained on one goroutine (Docker's client, a pipe)
// while another reports N.
type Reader struct {
	r io.Reader
	n atomic.Int64
}

// NewReader counts the bytes read from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

func (c *Reader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// N is the number of bytes read so far.
func (c *Reader) N() int64 { return c.n.Load() }
