package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// AppendResult is the outcome of an append.
type AppendResult struct {
	FirstPosition int64
	LastPosition  int64
	FirstRevision int64
	LastRevision  int64
	// Idempotent is true when every event id was already appended by an
	// earlier, identical append: nothing was written and the original
	// positions are returned.
	Idempotent bool
	// EventIDs are the ids of the appended events, generated ones included.
	EventIDs []string
}

// NextExpectedRevision is the expected revision of the stream's next append.
func (r AppendResult) NextExpectedRevision() int64 { return r.LastRevision }

// validateAppend checks an append and fills generated ids and default
// content types in evs.
func (st *Store) validateAppend(stream string, evs []ProposedEvent, now int64) error {
	cfg := &st.svc.cfg
	if err := ValidateStream(stream); err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("%w: an append needs at least one event", ErrOutOfRange)
	}
	if len(evs) > cfg.MaxAppendEvents {
		return fmt.Errorf("%w: %d events in one append, the limit is %d", ErrOutOfRange, len(evs), cfg.MaxAppendEvents)
	}
	total := 0
	seen := make(map[string]int, len(evs))
	for i := range evs {
		e := &evs[i]
		if err := validateType(e.Type); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if e.ID == "" {
			e.ID = newUUIDv7(now)
		} else if err := validateEventID(e.ID); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if j, dup := seen[e.ID]; dup {
			return fmt.Errorf("%w: events %d and %d both have id %q", ErrDuplicateEventID, j, i, e.ID)
		}
		seen[e.ID] = i
		switch e.ContentType {
		case "":
			e.ContentType = ContentTypeJSON
			fallthrough
		case ContentTypeJSON:
			if !json.Valid(e.Data) {
				return fmt.Errorf("event %d: %w: data is not valid JSON; send binary data base64-encoded", i, ErrOutOfRange)
			}
		case ContentTypeBinary:
		default:
			return fmt.Errorf("event %d: %w: content type %q is not %s or %s", i, ErrOutOfRange, e.ContentType, ContentTypeJSON, ContentTypeBinary)
		}
		if len(e.Metadata) > MaxMetadataBytes {
			return fmt.Errorf("event %d: %w: metadata is %d bytes, the limit is %d", i, ErrEventTooLarge, len(e.Metadata), MaxMetadataBytes)
		}
		if len(e.Metadata) > 0 && !json.Valid(e.Metadata) {
			return fmt.Errorf("event %d: %w: metadata is not valid JSON", i, ErrInvalidMetadata)
		}
		size := len(e.Data) + len(e.Metadata)
		if size > cfg.MaxEventBytes {
			return fmt.Errorf("event %d: %w: data and metadata are %d bytes, the limit is %d", i, ErrEventTooLarge, size, cfg.MaxEventBytes)
		}
		total += size
	}
	if total > cfg.MaxAppendBytes {
		return fmt.Errorf("%w: the events hold %d bytes of data and metadata, the limit per append is %d", ErrAppendTooLarge, total, cfg.MaxAppendBytes)
	}
	return nil
}

// Append appends evs to stream if the stream satisfies expected, at time now
// (Unix ms). It returns once the events are durable. Positions are
// contiguous and revisions continue the stream's. Exactly one of several
// concurrent appends expecting the same revision succeeds; the others get a
// *WrongExpectedRevisionError.
//
// A soft-deleted stream (DeleteStream) counts as absent: NoStream and Any
// start it again and its revisions continue where they stopped, so reads
// show only the new events. A tombstoned stream is ErrStreamTombstoned.
//
// Idempotency: when every event id was appended before by one append of
// exactly these ids to this stream, the original result is returned with
// Idempotent set and nothing is written; when only some are known, or they
// belong to another stream or append, the append fails with
// ErrIdempotencyConflict. The expected revision is not checked on an
// idempotent retry: the original append passed it, and the retry is
// answered even when the stream was deleted since (the append happened).
//
// While the data directory's disk is almost full (Service.CheckSpace),
// new events are refused with ErrStorage wrapping a
// *pebblestore.SpaceError; an idempotent retry is still answered.
//
// evs is modified: missing ids and content types are filled in.
func (st *Store) Append(stream string, expected ExpectedRevision, evs []ProposedEvent, now time.Time) (AppendResult, error) {
	nowMs := now.UnixMilli()
	if err := st.validateAppend(stream, evs, nowMs); err != nil {
		return AppendResult{}, err
	}
	ids := make([]string, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
	}

	st.mu.Lock()
	locked := true
	defer func() {
		if locked {
			st.mu.Unlock()
		}
	}()
	if st.mu.deleted || st.partition.Deleted() {
		return AppendResult{}, fmt.Errorf("%w: %q was deleted", ErrStoreNotFound, st.name)
	}
	streamID, head, found, err := st.lookupStream(stream)
	if err != nil {
		return AppendResult{}, err
	}
	prior, err := st.findIdempotent(stream, streamID, found, ids)
	if err != nil {
		return AppendResult{}, err
	}
	if prior != nil {
		st.mu.Unlock()
		locked = false
		return st.answerRetry(*prior, ids)
	}
	if err := st.checkAppendable(stream, head, expected); err != nil {
		return AppendResult{}, err
	}

	w := &streamWrite{storeID: st.id, stream: stream, streamID: streamID, newStream: !found, head: head, ids: ids}
	st.placeLocked(w, nowMs)
	a, err := w.topicAppend(st.partition, evs)
	if err != nil {
		return AppendResult{}, err
	}
	pending := st.svc.tm.Append([]*topics.Append{a}, now)
	if a.Err != nil {
		// Nothing was written.
		_ = pending.Wait()
		return AppendResult{}, appendError(st.name, a.Err)
	}
	st.appliedLocked(w)
	st.mu.Unlock()
	locked = false

	if err := pending.Wait(); err != nil || a.Err != nil {
		if err == nil {
			err = a.Err
		}
		return AppendResult{}, appendError(st.name, err)
	}
	return w.result(a.BaseOffset), nil
}

// answerRetry answers an idempotent retry with the original append's
// result. The original append may be applied but not yet synced: it waits
// for the fsync of everything applied so far before answering.
func (st *Store) answerRetry(prior AppendResult, ids []string) (AppendResult, error) {
	if prior.LastPosition >= st.partition.HighWatermark() {
		b := st.svc.store.NewBatch()
		b.LogData(nil)
		if err := b.Commit(); err != nil {
			return AppendResult{}, fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	prior.EventIDs = ids
	return prior, nil
}

// checkAppendable checks that new events may be appended to stream (head
// is its head row): the stream is not tombstoned, the disk has room, and
// the stream's revision satisfies expected.
func (st *Store) checkAppendable(stream string, head streamHead, expected ExpectedRevision) error {
	if head.State == streamTombstoned {
		return fmt.Errorf("%w: stream %q was deleted for good (hard delete); it takes no more events", ErrStreamTombstoned, stream)
	}
	// The disk is almost full: new events are refused (an idempotent retry
	// of an append that was written is answered before: it writes nothing).
	if err := st.svc.CheckSpace(); err != nil {
		return err
	}
	// A soft-deleted stream counts as absent: no_stream and any start it
	// again, its revisions continuing.
	current := head.LastRevision
	if head.State == streamDeleted {
		current = -1
	}
	if !expected.check(current) {
		return &WrongExpectedRevisionError{Stream: stream, Expected: expected, CurrentRevision: current, Deleted: head.State == streamDeleted}
	}
	return nil
}

// streamWrite is one append of events to a stream: where the events go
// and the rows that go with them.
type streamWrite struct {
	storeID       uint32
	stream        string
	streamID      uint64
	newStream     bool       // the stream gets its catalog row
	head          streamHead // the stream's head row before the append
	firstRevision int64
	ids           []string
	ts            int64 // the events' timestamp, ms
	second        int64 // ts in seconds
	writeSecond   bool  // the first append of that second: a time index row
}

// placeLocked places the append w describes at nowMs: a new stream takes
// the next stream ID, revisions continue the stream's head, timestamps
// never go back, and the first append of each second writes a time index
// row.
// REQUIRES: st.mu held.
func (st *Store) placeLocked(w *streamWrite, nowMs int64) {
	if w.newStream {
		w.streamID = st.mu.nextStreamID
	}
	w.firstRevision = w.head.LastRevision + 1
	w.ts = max(nowMs, st.mu.lastTS)
	w.second = w.ts / 1000
	w.writeSecond = w.second > st.mu.lastSecond
}

// topicAppend encodes evs into one batch for partition, with w.rows as its
// Extra.
func (w *streamWrite) topicAppend(partition *topics.Partition, evs []ProposedEvent) (*topics.Append, error) {
	batch, err := topics.EncodeBatch(topics.BatchHeader{
		BaseTimestamp: w.ts,
		MaxTimestamp:  w.ts,
		ProducerID:    -1,
		ProducerEpoch: -1,
		BaseSequence:  -1,
	}, encodeRecords(w.stream, w.firstRevision, evs))
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the events: %v", ErrAppendTooLarge, err)
	}
	return &topics.Append{Partition: partition, Batch: batch, Extra: w.rows}, nil
}

// rows adds the rows of the events at base to b: the stream's catalog row
// (new stream), a stream index and an idempotency row per event, the
// stream's head row and the time index row.
func (w *streamWrite) rows(b *pebblestore.Batch, base int64) {
	n := int64(len(w.ids))
	if w.newStream {
		b.Set(streamCatalogKey(w.storeID, w.stream), encodeU64(int64(w.streamID)))
	}
	for i := int64(0); i < n; i++ {
		b.Set(streamIndexKey(w.storeID, w.streamID, w.firstRevision+i), encodeU64(base+i))
		b.Set(idempotencyKey(w.storeID, w.ids[i]), idempotencyEntry{
			Position: base + i, StreamID: w.streamID, Revision: w.firstRevision + i,
			BatchFirst: base, BatchLen: uint32(n), EventID: w.ids[i],
		}.encode())
	}
	b.Set(streamHeadKey(w.storeID, w.streamID), streamHead{
		LastRevision: w.firstRevision + n - 1, LastPosition: base + n - 1, Name: w.stream,
		State: streamLive, TruncateBefore: w.head.TruncateBefore,
	}.encode())
	if w.writeSecond {
		b.Set(timeIndexKey(w.storeID, w.second), encodeU64(base))
	}
}

// appliedLocked advances the store's counters past an applied append.
// REQUIRES: st.mu held.
func (st *Store) appliedLocked(w *streamWrite) {
	if w.newStream {
		st.mu.nextStreamID++
	}
	st.mu.lastTS = w.ts
	if w.writeSecond {
		st.mu.lastSecond = w.second
	}
}

// result is the append's result once its batch has base offset base.
func (w *streamWrite) result(base int64) AppendResult {
	n := int64(len(w.ids))
	return AppendResult{
		FirstPosition: base,
		LastPosition:  base + n - 1,
		FirstRevision: w.firstRevision,
		LastRevision:  w.firstRevision + n - 1,
		EventIDs:      w.ids,
	}
}

func appendError(store string, err error) error {
	if errors.Is(err, topics.ErrUnknownTopic) {
		return fmt.Errorf("%w: the topic of store %q was deleted", ErrStoreNotFound, store)
	}
	if errors.Is(err, topics.ErrMessageTooLarge) {
		return fmt.Errorf("%w: %v", ErrAppendTooLarge, err)
	}
	if errors.Is(err, topics.ErrStorageFull) {
		return fmt.Errorf("%w: %w", ErrStorage, err) // keeps the *pebblestore.SpaceError
	}
	return fmt.Errorf("%w: appending to store %q: %w", ErrStorage, store, err)
}

// findIdempotent looks the append's ids up. It returns the original result
// when all ids are known and form exactly one earlier append to this
// stream, nil when none is known, and ErrIdempotencyConflict otherwise.
// REQUIRES: st.mu held.
func (st *Store) findIdempotent(stream string, streamID uint64, streamFound bool, ids []string) (*AppendResult, error) {
	db := st.svc.store
	var entries []idempotencyEntry
	var unknown []string
	for _, id := range ids {
		key := idempotencyKey(st.id, id)
		v, err := db.Get(key)
		if errors.Is(err, pebblestore.ErrNotFound) {
			unknown = append(unknown, id)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		e, err := decodeIdempotencyEntry(v, key)
		if err != nil {
			return nil, err
		}
		if e.EventID != id { // a SHA-256 prefix collision: a different id
			unknown = append(unknown, id)
			continue
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w: %d of the %d event ids were appended before (first: %q) but not all of them; retry with the original append's events or use new ids", ErrIdempotencyConflict, len(entries), len(ids), entries[0].EventID)
	}
	first := entries[0]
	for i, e := range entries {
		if !streamFound || e.StreamID != streamID {
			return nil, fmt.Errorf("%w: event id %q was appended to another stream, not %q", ErrIdempotencyConflict, e.EventID, stream)
		}
		if e.BatchFirst != first.BatchFirst || int(e.BatchLen) != len(ids) || e.Position != first.BatchFirst+int64(i) || e.Revision != first.Revision+int64(i) {
			return nil, fmt.Errorf("%w: event id %q was appended before as part of a different append (at position %d of an append of %d events at %d)", ErrIdempotencyConflict, e.EventID, e.Position, e.BatchLen, e.BatchFirst)
		}
	}
	last := entries[len(entries)-1]
	return &AppendResult{
		FirstPosition: first.Position,
		LastPosition:  last.Position,
		FirstRevision: first.Revision,
		LastRevision:  last.Revision,
		Idempotent:    true,
	}, nil
}
