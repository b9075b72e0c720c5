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
	// msgSyncDigest: "here is my book's digest; if yours differs, ask
	// for my book". Sent only to peers whose gossip metadata says they
	// read it (nodeMeta.SyncDigest); older nodes ignore unknown kinds.
	msgSyncDigest uint8 = 3
	msgSyncWant   uint8 = 4 // "your digest differs from my book: send me your book"
)

// wireMagic prefixes every peer message so stray traffic is recognised.
const wireMagic = 'P'

type envelope struct {
	Kind       uint8
	From       string
	Changesets []crdt.Changeset
	Book       crdt.Book
	Digest     []byte // msgSyncDigest: crdt.Book.Digest of the sender's book
}

// shortEnvelope is an envelope without changesets or book (msgSyncDigest,
// msgSyncWant). Gob matches fields by name, so it decodes as an envelope;
// encoded on its own it skips the type descriptions of the changeset and
// book types, which every gob message carries and which made a digest
// request cost about 480 bytes instead of about 130.
type shortEnvelope struct {
	Kind   uint8
	From   string
	Digest []byte
}

func encodeEnvelope(e envelope) ([]byte, error) {
	var v any = e
	if len(e.Changesets) == 0 && e.Book == nil {
		v = shortEnvelope{Kind: e.Kind, From: e.From, Digest: e.Digest}
	}
	var buf bytes.Buffer
	buf.WriteByte(wireMagic)
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
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
