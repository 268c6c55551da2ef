package events

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Keys and values of the event store, under the prefixes 0x40-0x47 that
// pebblestore/keys.go reserves. The layouts are part of the file format.
//
//	0x40 storeName                              storeRecord, JSON
//	0x41 "next-store-id"                        u32
//	0x42 storeID u32 | streamName               streamID u64
//	0x43 storeID u32 | streamID u64             streamHead, one of:
//	                                            v1 u8 | lastRevision u64 | lastPosition u64 | name
//	                                            v2 u8 | lastRevision u64 | lastPosition u64 | state u8 |
//	                                            truncateBefore u64 | name
//	0x44 storeID u32 | streamID u64 | rev u64   position u64
//	0x45 storeID u32 | sha256(eventID)[:16]     idempotencyEntry: v1 u8 | position u64 | streamID u64 |
//	                                            revision u64 | batchFirst u64 | batchLen u32 | eventID
//	0x46 storeID u32 | second u64               position u64: the first event stamped in that Unix second
//	0x47 storeID u32 | consumerName             consumer checkpoint: v1 u8 | position u64 | created_ms i64 |
//	                                            updated_ms i64 | start (consumer.go)
//
// A consumer row (0x47) is written alone, in a batch of its own, by a
// create or a commit; position is the next position the consumer reads.
//
// Every row of one append (0x42 for a new stream, 0x43, 0x44, 0x45, 0x46) is
// written in the Pebble batch that carries the appended RecordBatch
// (topics.Append.Extra), so the log and its indexes are durable together.
//
// A stream head is written as v1 while the stream was never deleted (state
// live, truncateBefore 0), so data of streams that were never deleted reads
// the same on brokers before stream deletion; a deletion, and every later
// append to that stream, writes v2. state: 0 live, 1 deleted (soft), 2
// tombstoned. truncateBefore is the first revision reads show: a soft
// delete hides every revision below it, the stream index rows stay.
// A deletion writes only the stream's head, in a batch of its own; nothing
// goes to the log, so positions stay gap-free. Brokers before v2 refuse a
// v2 head as malformed (ErrCorruption).

func storeKey(name string) []byte {
	return append([]byte{pebblestore.PrefixEventStore}, name...)
}

func storePrefix() []byte { return []byte{pebblestore.PrefixEventStore} }

func nextStoreIDKey() []byte {
	return append([]byte{pebblestore.PrefixEventStoreNextID}, "next-store-id"...)
}

func storeTablePrefix(prefix byte, storeID uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefix}, storeID)
}

func streamCatalogKey(storeID uint32, stream string) []byte {
	return append(storeTablePrefix(pebblestore.PrefixEventStream, storeID), stream...)
}

func streamHeadKey(storeID uint32, streamID uint64) []byte {
	return binary.BigEndian.AppendUint64(storeTablePrefix(pebblestore.PrefixEventStreamHead, storeID), streamID)
}

func streamIndexPrefix(storeID uint32, streamID uint64) []byte {
	return binary.BigEndian.AppendUint64(storeTablePrefix(pebblestore.PrefixEventStreamIndex, storeID), streamID)
}

func streamIndexKey(storeID uint32, streamID uint64, revision int64) []byte {
	return binary.BigEndian.AppendUint64(streamIndexPrefix(storeID, streamID), uint64(revision))
}

func idempotencyKey(storeID uint32, eventID string) []byte {
	sum := sha256.Sum256([]byte(eventID))
	return append(storeTablePrefix(pebblestore.PrefixEventIdempotency, storeID), sum[:16]...)
}

func consumerKey(storeID uint32, consumer string) []byte {
	return append(storeTablePrefix(pebblestore.PrefixEventConsumer, storeID), consumer...)
}

func timeIndexKey(storeID uint32, second int64) []byte {
	return binary.BigEndian.AppendUint64(storeTablePrefix(pebblestore.PrefixEventTimeIndex, storeID), uint64(second))
}

// storeTables are the per-store tables, all keyed by storeID first.
var storeTables = []byte{
	pebblestore.PrefixEventStream,
	pebblestore.PrefixEventStreamHead,
	pebblestore.PrefixEventStreamIndex,
	pebblestore.PrefixEventIdempotency,
	pebblestore.PrefixEventTimeIndex,
	pebblestore.PrefixEventConsumer,
}

func encodeU64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func decodeU64(v []byte, what string, key []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s row %x has %d bytes, want 8", pebblestore.ErrCorruption, what, key, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

const rowVersion = 1

// streamState is the life-cycle state of a stream (a v2 stream head).
type streamState uint8

const (
	streamLive       streamState = 0
	streamDeleted    streamState = 1 // soft: no_stream or any starts it again
	streamTombstoned streamState = 2 // hard: no more appends
)

// String is the state's name in the API.
func (s streamState) String() string {
	switch s {
	case streamDeleted:
		return StreamStateDeleted
	case streamTombstoned:
		return StreamStateTombstoned
	}
	return StreamStateLive
}

// streamHead is the value of a 0x43 row.
type streamHead struct {
	LastRevision int64
	LastPosition int64
	State        streamState
	// TruncateBefore is the first revision reads show (0 unless the stream
	// was deleted).
	TruncateBefore int64
	Name           string
}

// version is the row version h is written in: v1 while the stream was
// never deleted.
func (h streamHead) version() byte {
	if h.State == streamLive && h.TruncateBefore == 0 {
		return 1
	}
	return 2
}

func (h streamHead) encode() []byte {
	v := h.version()
	out := make([]byte, 0, 26+len(h.Name))
	out = append(out, v)
	out = binary.BigEndian.AppendUint64(out, uint64(h.LastRevision))
	out = binary.BigEndian.AppendUint64(out, uint64(h.LastPosition))
	if v == 2 {
		out = append(out, byte(h.State))
		out = binary.BigEndian.AppendUint64(out, uint64(h.TruncateBefore))
	}
	return append(out, h.Name...)
}

func decodeStreamHead(v []byte, key []byte) (streamHead, error) {
	bad := func() (streamHead, error) {
		return streamHead{}, fmt.Errorf("%w: stream head row %x is malformed (%d bytes)", pebblestore.ErrCorruption, key, len(v))
	}
	if len(v) < 17 || (v[0] != 1 && v[0] != 2) {
		return bad()
	}
	h := streamHead{
		LastRevision: int64(binary.BigEndian.Uint64(v[1:])),
		LastPosition: int64(binary.BigEndian.Uint64(v[9:])),
	}
	rest := v[17:]
	if v[0] == 2 {
		if len(rest) < 9 || rest[0] > byte(streamTombstoned) {
			return bad()
		}
		h.State = streamState(rest[0])
		h.TruncateBefore = int64(binary.BigEndian.Uint64(rest[1:]))
		rest = rest[9:]
		if h.TruncateBefore < 0 || h.TruncateBefore > h.LastRevision+1 {
			return bad()
		}
	}
	h.Name = string(rest)
	return h, nil
}

// idempotencyEntry is the value of a 0x45 row: where an event id was
// appended and which append it belonged to.
type idempotencyEntry struct {
	Position   int64
	StreamID   uint64
	Revision   int64
	BatchFirst int64 // position of the first event of the append
	BatchLen   uint32
	EventID    string
}

func (e idempotencyEntry) encode() []byte {
	out := make([]byte, 0, 37+len(e.EventID))
	out = append(out, rowVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(e.Position))
	out = binary.BigEndian.AppendUint64(out, e.StreamID)
	out = binary.BigEndian.AppendUint64(out, uint64(e.Revision))
	out = binary.BigEndian.AppendUint64(out, uint64(e.BatchFirst))
	out = binary.BigEndian.AppendUint32(out, e.BatchLen)
	return append(out, e.EventID...)
}

func decodeIdempotencyEntry(v []byte, key []byte) (idempotencyEntry, error) {
	if len(v) < 37 || v[0] != rowVersion {
		return idempotencyEntry{}, fmt.Errorf("%w: idempotency row %x is malformed (%d bytes)", pebblestore.ErrCorruption, key, len(v))
	}
	return idempotencyEntry{
		Position:   int64(binary.BigEndian.Uint64(v[1:])),
		StreamID:   binary.BigEndian.Uint64(v[9:]),
		Revision:   int64(binary.BigEndian.Uint64(v[17:])),
		BatchFirst: int64(binary.BigEndian.Uint64(v[25:])),
		BatchLen:   binary.BigEndian.Uint32(v[33:]),
		EventID:    string(v[37:]),
	}, nil
}
