package queues

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"github.com/vibemq/broker/pebblestore"
)

// dedupRecheckMinMs is the shortest time before the sweep looks again at a
// dedup entry kept alive by dedup_scope in_queue.
const dedupRecheckMinMs = 60000

// dedupEntry is the value of a dedup row (pebblestore 0x37): the message a
// dedup id (or body, with content_dedup) was first sent as.
//
//	partition u32 | offset u64 | expires i64 | body hash [16]
//
// expires is the end of the dedup window (send + dedup_window_ms); it never
// moves, dedup_scope in_queue only keeps the row past it. The body hash
// (SHA-256(body)[:16]) tells a duplicate from a dedup_conflict. Rows written
// before it existed are 20 bytes (no body hash): they still deduplicate,
// and a different body under their id is accepted as a duplicate.
type dedupEntry struct {
	m        msgKey
	expires  int64
	bodyHash [16]byte
	hasBody  bool
}

const (
	dedupEntrySizeV1 = 20
	dedupEntrySize   = 36
)

func encodeDedup(d dedupEntry) []byte {
	b := make([]byte, 0, dedupEntrySize)
	b = binary.BigEndian.AppendUint32(b, uint32(d.m.part))
	b = binary.BigEndian.AppendUint64(b, uint64(d.m.off))
	b = binary.BigEndian.AppendUint64(b, uint64(d.expires))
	return append(b, d.bodyHash[:]...)
}

func decodeDedup(v []byte) (dedupEntry, bool) {
	if len(v) != dedupEntrySizeV1 && len(v) != dedupEntrySize {
		return dedupEntry{}, false
	}
	d := dedupEntry{
		m:       msgKey{part: int32(binary.BigEndian.Uint32(v)), off: int64(binary.BigEndian.Uint64(v[4:]))},
		expires: int64(binary.BigEndian.Uint64(v[12:])),
	}
	if len(v) == dedupEntrySize {
		copy(d.bodyHash[:], v[20:])
		d.hasBody = true
	}
	return d, true
}

// dedupIDHash is the dedup row key of a dedup_id.
func dedupIDHash(id string) [16]byte {
	sum := sha256.Sum256([]byte(id))
	var h [16]byte
	copy(h[:], sum[:])
	return h
}

// bodyHashes returns the body hash stored in a dedup entry and the dedup
// row key of content deduplication: SHA-256 of 0x00 and the body's SHA-256.
// A dedup id is printable ASCII, never starting with 0x00, so a content key
// never equals the key of a dedup_id. The body is hashed once.
func bodyHashes(body []byte) (bodyHash, contentKey [16]byte) {
	sum := sha256.Sum256(body)
	copy(bodyHash[:], sum[:])
	var in [1 + sha256.Size]byte
	copy(in[1:], sum[:])
	ck := sha256.Sum256(in[:])
	copy(contentKey[:], ck[:])
	return bodyHash, contentKey
}

// originalQueuedLocked says whether the message a dedup entry points at is
// still queued: it has a state row and is not an acked one kept for
// retain_acked_ms. Dead-lettered, expired, purged and acked messages have
// no state row.
// REQUIRES: q.mu held.
func (e *Engine) originalQueuedLocked(q *queue, m msgKey) (bool, error) {
	st, ok, err := e.getState(q, m)
	if err != nil || !ok {
		return false, err
	}
	return st.State != stateAcked, nil
}

// dedupLookupLocked returns the entry under hash when it still makes a send
// a duplicate: inside its window, or (dedup_scope in_queue) while its
// original is queued.
// REQUIRES: q.mu held.
func (e *Engine) dedupLookupLocked(q *queue, a *Attributes, hash [16]byte, now int64) (dedupEntry, bool, error) {
	v, err := e.store.Get(dedupKey(q.id, hash))
	if err != nil {
		if errors.Is(err, pebblestore.ErrNotFound) {
			return dedupEntry{}, false, nil
		}
		return dedupEntry{}, false, err
	}
	d, valid := decodeDedup(v)
	if !valid {
		return dedupEntry{}, false, nil // unreadable: treated as absent, the sweep drops it
	}
	if d.expires > now {
		return d, true, nil
	}
	if a.DedupScope != DedupScopeInQueue {
		return dedupEntry{}, false, nil
	}
	queued, err := e.originalQueuedLocked(q, d.m)
	if err != nil || !queued {
		return dedupEntry{}, false, err
	}
	return d, true, nil
}
