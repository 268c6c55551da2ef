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
	db := st.svc.store

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
		// The original append may be applied but not yet synced: wait for
		// the fsync of everything applied so far before answering.
		if prior.LastPosition >= st.partition.HighWatermark() {
			b := db.NewBatch()
			b.LogData(nil)
			if err := b.Commit(); err != nil {
				return AppendResult{}, fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		prior.EventIDs = ids
		return *prior, nil
	}

	if head.State == streamTombstoned {
		return AppendResult{}, fmt.Errorf("%w: stream %q was deleted for good (hard delete); it takes no more events", ErrStreamTombstoned, stream)
	}
	// The disk is almost full: new events are refused (an idempotent retry
	// of an append that was written is answered above: it writes nothing).
	if err := st.svc.CheckSpace(); err != nil {
		return AppendResult{}, err
	}
	// A soft-deleted stream counts as absent: no_stream and any start it
	// again, its revisions continuing.
	current := head.LastRevision
	if head.State == streamDeleted {
		current = -1
	}
	if !expected.check(current) {
		return AppendResult{}, &WrongExpectedRevisionError{Stream: stream, Expected: expected, CurrentRevision: current, Deleted: head.State == streamDeleted}
	}
	newStream := !found
	if newStream {
		streamID = st.mu.nextStreamID
	}
	firstRevision := head.LastRevision + 1
	ts := max(nowMs, st.mu.lastTS)
	batch, err := topics.EncodeBatch(topics.BatchHeader{
		BaseTimestamp: ts,
		MaxTimestamp:  ts,
		ProducerID:    -1,
		ProducerEpoch: -1,
		BaseSequence:  -1,
	}, encodeRecords(stream, firstRevision, evs))
	if err != nil {
		return AppendResult{}, fmt.Errorf("%w: encoding the events: %v", ErrAppendTooLarge, err)
	}
	second := ts / 1000
	writeSecond := second > st.mu.lastSecond
	n := int64(len(evs))
	a := &topics.Append{
		Partition: st.partition,
		Batch:     batch,
		Extra: func(b *pebblestore.Batch, base int64) {
			if newStream {
				b.Set(streamCatalogKey(st.id, stream), encodeU64(int64(streamID)))
			}
			for i := int64(0); i < n; i++ {
				b.Set(streamIndexKey(st.id, streamID, firstRevision+i), encodeU64(base+i))
				b.Set(idempotencyKey(st.id, ids[i]), idempotencyEntry{
					Position: base + i, StreamID: streamID, Revision: firstRevision + i,
					BatchFirst: base, BatchLen: uint32(n), EventID: ids[i],
				}.encode())
			}
			b.Set(streamHeadKey(st.id, streamID), streamHead{
				LastRevision: firstRevision + n - 1, LastPosition: base + n - 1, Name: stream,
				State: streamLive, TruncateBefore: head.TruncateBefore,
			}.encode())
			if writeSecond {
				b.Set(timeIndexKey(st.id, second), encodeU64(base))
			}
		},
	}
	pending := st.svc.tm.Append([]*topics.Append{a}, now)
	if a.Err != nil {
		// Nothing was written.
		_ = pending.Wait()
		return AppendResult{}, appendError(st.name, a.Err)
	}
	if newStream {
		st.mu.nextStreamID++
	}
	st.mu.lastTS = ts
	if writeSecond {
		st.mu.lastSecond = second
	}
	st.mu.Unlock()
	locked = false

	if err := pending.Wait(); err != nil || a.Err != nil {
		if err == nil {
			err = a.Err
		}
		return AppendResult{}, appendError(st.name, err)
	}
	return AppendResult{
		FirstPosition: a.BaseOffset,
		LastPosition:  a.BaseOffset + n - 1,
		FirstRevision: firstRevision,
		LastRevision:  firstRevision + n - 1,
		EventIDs:      ids,
	}, nil
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
