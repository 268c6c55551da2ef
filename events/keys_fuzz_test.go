package events

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vibemq/broker/pebblestore"
)

// FuzzDecodeStreamHead: a stored stream head row never panics the
// decoder; a malformed one is ErrCorruption; a decoded one re-encodes to
// a row that decodes equal (v2 rows of a live, never-truncated stream
// re-encode as v1) and keeps truncateBefore within [0, last revision + 1].
func FuzzDecodeStreamHead(f *testing.F) {
	for _, h := range []streamHead{
		{LastRevision: 4, LastPosition: 9, Name: "live"},
		{LastRevision: 4, LastPosition: 9, State: streamDeleted, TruncateBefore: 5, Name: "deleted"},
		{LastRevision: 6, LastPosition: 12, State: streamLive, TruncateBefore: 5, Name: "recreated"},
		{LastRevision: 6, LastPosition: 12, State: streamTombstoned, TruncateBefore: 7, Name: "tombstoned"},
	} {
		f.Add(h.encode())
	}
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := decodeStreamHead(raw, []byte("k"))
		if err != nil {
			if !errors.Is(err, pebblestore.ErrCorruption) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if h.State > streamTombstoned || h.TruncateBefore < 0 || (h.TruncateBefore > 0 && h.TruncateBefore-1 > h.LastRevision) {
			t.Fatalf("decoded an impossible head %+v", h)
		}
		again, err := decodeStreamHead(h.encode(), []byte("k"))
		if err != nil || again != h {
			t.Fatalf("%+v re-encoded decodes as %+v, %v", h, again, err)
		}
	})
}

// FuzzDecodeIdempotencyEntry: an idempotency row never panics the
// decoder, a malformed one is ErrCorruption, a decoded one round-trips.
func FuzzDecodeIdempotencyEntry(f *testing.F) {
	f.Add(idempotencyEntry{Position: 3, StreamID: 1, Revision: 2, BatchFirst: 2, BatchLen: 2, EventID: "id-1"}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := decodeIdempotencyEntry(raw, []byte("k"))
		if err != nil {
			if !errors.Is(err, pebblestore.ErrCorruption) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if !bytes.Equal(e.encode(), raw) {
			t.Fatalf("%+v does not re-encode to %x", e, raw)
		}
	})
}

// FuzzDecodeConsumerRow: a consumer row never panics the decoder, a
// malformed one is ErrCorruption, a decoded one round-trips with a
// position >= 0.
func FuzzDecodeConsumerRow(f *testing.F) {
	f.Add(consumerRow{Position: 7, CreatedMs: 1, UpdatedMs: 2, Start: "first"}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := decodeConsumerRow(raw, []byte("k"))
		if err != nil {
			if !errors.Is(err, pebblestore.ErrCorruption) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if c.Position < 0 || !bytes.Equal(c.encode(), raw) {
			t.Fatalf("%+v does not re-encode to %x", c, raw)
		}
	})
}
