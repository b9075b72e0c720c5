package server

import (
	"bytes"
	"encoding/gob"
	"fmt"

	"github.com/ployz/ployz/core/store/crdt"
)

// Peer message kinds.
const (
	msgChanges uint8 = 1 // changesets pushed or answered to a sync request
	msgSyncReq uint8 = 2 // "here is my book, send what I lack"
)

// wireMagic prefixes every peer message so stray traffic is recognised.
const wireMagic = 'P'

type envelope struct {
	Kind       uint8
	From       string
	Changesets []crdt.Changeset
	Book       crdt.Book
}

func encodeEnvelope(e envelope) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(wireMagic)
	if err := gob.NewEncoder(&buf).Encode(e); err != nil {
		return nil, fmt.Errorf("encode peer message: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeEnvelope(b []byte) (envelope, error) {
	var e envelope
	if len(b) == 0 || b[0] != wireMagic {
		return e, fmt.Errorf("peer message: bad magic")
	}
	if err := gob.NewDecoder(bytes.NewReader(b[1:])).Decode(&e); err != nil {
		return e, fmt.Errorf("decode peer message: %w", err)
	}
	return e, nil
}
