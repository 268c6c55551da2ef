package events

import (
	"errors"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Read limits.
const (
	DefaultReadLimit = 100
	MaxReadLimit     = 1000
	DefaultReadBytes = 4 << 20
	MaxReadBytes     = 64 << 20
	// scanRecordsMax bounds the records one ReadAll looks at, matching or
	// not, so a filtered read of a large store returns in bounded time
	// with its NextPosition advanced.
	scanRecordsMax = 50000
	// readChunkBytes is how many log bytes one topics read fetches.
	readChunkBytes = 1 << 20
)

// reader reads single events by position, keeping the last decoded batch:
// the events of one append share a batch, so a stream read touches each
// batch once.
type reader struct {
	st      *Store
	header  topics.BatchHeader
	records []topics.Record
	valid   bool
}

func newReader(st *Store) *reader { return &reader{st: st} }

// eventAt returns the event at pos; ok is false when the position is below
// the log start, at or past the durable end, or was removed by compaction.
func (r *reader) eventAt(pos int64) (Event, bool, error) {
	if !r.valid || pos < r.header.BaseOffset || pos > r.header.LastOffset() {
		if err := r.load(pos); err != nil {
			return Event{}, false, err
		}
		if !r.valid {
			return Event{}, false, nil
		}
	}
	for i := range r.records {
		rec := &r.records[i]
		if r.header.BaseOffset+int64(rec.OffsetDelta) == pos {
			return decodeEvent(&r.header, rec), true, nil
		}
	}
	return Event{}, false, nil
}

func (r *reader) load(pos int64) error {
	r.valid = false
	p := r.st.partition
	if pos < p.LogStartOffset() || pos >= p.HighWatermark() {
		return nil
	}
	raw, _, err := p.Read(pos, 1, true, nil)
	if err != nil {
		if errors.Is(err, topics.ErrOffsetOutOfRange) {
			return nil
		}
		if errors.Is(err, topics.ErrUnknownTopic) {
			return fmt.Errorf("%w: %q was deleted", ErrStoreNotFound, r.st.name)
		}
		return fmt.Errorf("%w: reading position %d of store %s: %w", ErrStorage, pos, r.st.name, err)
	}
	if len(raw) == 0 {
		return nil
	}
	h, err := topics.ParseBatchHeader(raw)
	if err != nil {
		return fmt.Errorf("%w: store %s near position %d: %v", pebblestore.ErrCorruption, r.st.name, pos, err)
	}
	h, records, err := topics.DecodeRecords(raw[:h.Size()])
	if err != nil {
		return fmt.Errorf("%w: store %s, batch at position %d: %v", pebblestore.ErrCorruption, r.st.name, h.BaseOffset, err)
	}
	r.header, r.records, r.valid = h, records, true
	return nil
}

// StreamPage is one page of a stream read.
type StreamPage struct {
	Events []Event
	// NextRevision is where the next page starts: after the last event
	// forward, before it backward (-1 when a backward read reached the
	// start).
	NextRevision int64
	// HeadRevision is the stream's last durable revision.
	HeadRevision int64
	// EndOfStream is true when the read reached the end in its direction.
	EndOfStream bool
}

// FromEnd as a from revision starts a backward read at the stream's end.
const FromEnd int64 = -1

// ReadStream reads up to limit events (and about maxBytes) of stream from
// revision from: forward (from, from+1, ...) or backward (from, from-1,
// ...; FromEnd for the last revision). Only durable events are returned.
// A stream without durable events is ErrStreamNotFound, and so is a deleted
// one (with ErrStreamDeleted or ErrStreamTombstoned); revisions a soft
// delete hid are skipped.
func (st *Store) ReadStream(stream string, from int64, backward bool, limit, maxBytes int) (StreamPage, error) {
	if err := ValidateStream(stream); err != nil {
		return StreamPage{}, err
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if maxBytes <= 0 {
		maxBytes = DefaultReadBytes
	}
	if from < FromEnd || (!backward && from == FromEnd) {
		return StreamPage{}, fmt.Errorf("%w: from revision %d", ErrOutOfRange, from)
	}
	streamID, head, err := st.liveStream(stream)
	if err != nil {
		return StreamPage{}, err
	}
	// Read the durable end first: rows at or past it are not acknowledged.
	hwm := st.partition.HighWatermark()
	logStart := st.partition.LogStartOffset()
	// Revisions below TruncateBefore were deleted: the iterator starts
	// after them.
	prefix := streamIndexPrefix(st.id, streamID)
	it, err := st.svc.store.NewIter(streamIndexKey(st.id, streamID, head.TruncateBefore), pebblestore.PrefixEnd(prefix))
	if err != nil {
		return StreamPage{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()

	page := StreamPage{}
	if page.HeadRevision, err = durableHeadRevision(it, hwm); err != nil {
		return StreamPage{}, err
	}
	if page.HeadRevision < 0 {
		return StreamPage{}, fmt.Errorf("%w: stream %q has no events in store %s", ErrStreamNotFound, stream, st.name)
	}

	rd := newReader(st)
	bytes := 0
	var ok bool
	switch {
	case !backward:
		ok = it.SeekGE(streamIndexKey(st.id, streamID, from))
		page.NextRevision = from
	case from == FromEnd || from > page.HeadRevision:
		ok = it.SeekLT(streamIndexKey(st.id, streamID, page.HeadRevision+1))
	default:
		ok = it.SeekLT(streamIndexKey(st.id, streamID, from+1))
	}
	for ; ok; ok = step(it, backward) {
		r, err := streamRowAt(it)
		if err != nil {
			return StreamPage{}, err
		}
		if r.rev > page.HeadRevision {
			break // forward past the durable end
		}
		if len(page.Events) >= limit || (bytes >= maxBytes && len(page.Events) > 0) {
			break
		}
		if r.pos < logStart {
			// Deleted by a DeleteRecords below the store's log start.
			if backward {
				break
			}
			continue
		}
		e, found, err := rd.eventAt(r.pos)
		if err != nil {
			return StreamPage{}, err
		}
		if !found {
			continue
		}
		page.Events = append(page.Events, e)
		bytes += e.Size()
	}
	page.setNext(backward, ok)
	return page, nil
}

// liveStream looks stream up: its ID and head row, or ErrStreamNotFound
// when it has no events or was deleted.
func (st *Store) liveStream(stream string) (uint64, streamHead, error) {
	streamID, head, found, err := st.lookupStream(stream)
	if err != nil {
		return 0, head, err
	}
	switch {
	case !found:
		return 0, head, fmt.Errorf("%w: stream %q has no events in store %s", ErrStreamNotFound, stream, st.name)
	case head.State == streamDeleted:
		return 0, head, fmt.Errorf("%w: %w: stream %q of store %s was deleted at revision %d", ErrStreamNotFound, ErrStreamDeleted, stream, st.name, head.TruncateBefore-1)
	case head.State == streamTombstoned:
		return 0, head, fmt.Errorf("%w: %w: stream %q of store %s was deleted for good (hard delete)", ErrStreamNotFound, ErrStreamTombstoned, stream, st.name)
	}
	return streamID, head, nil
}

// streamRow is one stream index row: a revision and its position.
type streamRow struct{ rev, pos int64 }

// streamRowAt decodes the stream index row it is positioned on.
func streamRowAt(it *pebblestore.Iter) (streamRow, error) {
	v, err := it.Value()
	if err != nil {
		return streamRow{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	pos, err := decodeU64(v, "stream index", it.Key())
	return streamRow{rev: pebblestore.OffsetFromKey(it.Key()), pos: pos}, err
}

// durableHeadRevision returns the last revision of the stream index it
// iterates whose position is durable (below hwm), or -1.
func durableHeadRevision(it *pebblestore.Iter, hwm int64) (int64, error) {
	for ok := it.Last(); ok; ok = it.Prev() {
		r, err := streamRowAt(it)
		if err != nil {
			return -1, err
		}
		if r.pos < hwm {
			return r.rev, nil
		}
	}
	return -1, nil
}

// setNext sets where the next page starts and whether this one ends the
// stream; more reports whether the iterator stopped on a row.
func (page *StreamPage) setNext(backward, more bool) {
	n := len(page.Events)
	if n == 0 {
		page.EndOfStream = true
		if backward {
			page.NextRevision = -1
		}
		return
	}
	last := page.Events[n-1].Revision
	if backward {
		page.NextRevision = last - 1
		page.EndOfStream = last == 0 || !more
	} else {
		page.NextRevision = last + 1
		page.EndOfStream = last >= page.HeadRevision
	}
}

func step(it *pebblestore.Iter, backward bool) bool {
	if backward {
		return it.Prev()
	}
	return it.Next()
}

// AllPage is one page of a read of the whole store.
type AllPage struct {
	Events []Event
	// NextPosition is where the next read continues; it advances past
	// events the filter skipped.
	NextPosition int64
	// HeadPosition is the store's next position at the time of the read.
	HeadPosition int64
	// FirstPosition is the first readable position.
	FirstPosition int64
	// Truncated is true when from was below FirstPosition and the read
	// started there instead.
	Truncated bool
}

// ReadAll reads up to limit events (and about maxBytes) of the whole store
// from position from, in position order, keeping those for which filter
// (nil: all) returns true. Only durable events are returned. from past the
// next position is ErrOutOfRange; from below the first position starts at
// the first position with Truncated set.
func (st *Store) ReadAll(from int64, limit, maxBytes int, filter func(stream string) bool) (AllPage, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if maxBytes <= 0 {
		maxBytes = DefaultReadBytes
	}
	maxBytes = min(maxBytes, MaxReadBytes)
	p := st.partition
	hwm := p.HighWatermark()
	page := AllPage{FirstPosition: p.LogStartOffset(), HeadPosition: hwm}
	if from < 0 || from > hwm {
		return page, fmt.Errorf("%w: position %d is outside [0, %d]", ErrOutOfRange, from, hwm)
	}
	if from < page.FirstPosition {
		from = page.FirstPosition
		page.Truncated = true
	}
	page.NextPosition = from
	bytes, scanned := 0, 0
	var buf []byte
	// full ends the read once the page is full by any of its bounds (the
	// loop condition cannot see maxBytes: without full, a page cut by
	// maxBytes below hwm re-read the same batch forever).
	full := false
	for !full && page.NextPosition < hwm && len(page.Events) < limit && scanned < scanRecordsMax {
		var err error
		buf, _, err = p.Read(page.NextPosition, readChunkBytes, true, buf[:0])
		if errors.Is(err, topics.ErrUnknownTopic) {
			return page, fmt.Errorf("%w: %q was deleted", ErrStoreNotFound, st.name)
		}
		if errors.Is(err, topics.ErrOffsetOutOfRange) {
			break // moved by a concurrent DeleteRecords
		}
		if err != nil {
			return page, fmt.Errorf("%w: reading store %s at %d: %w", ErrStorage, st.name, page.NextPosition, err)
		}
		if len(buf) == 0 {
			break
		}
		for rest := buf; len(rest) > 0 && !full; {
			h, err := topics.ParseBatchHeader(rest)
			if err != nil {
				return page, fmt.Errorf("%w: store %s near position %d: %v", pebblestore.ErrCorruption, st.name, page.NextPosition, err)
			}
			raw := rest[:h.Size()]
			rest = rest[h.Size():]
			h, records, err := topics.DecodeRecords(raw)
			if err != nil {
				return page, fmt.Errorf("%w: store %s, batch at position %d: %v", pebblestore.ErrCorruption, st.name, h.BaseOffset, err)
			}
			for i := range records {
				pos := h.BaseOffset + int64(records[i].OffsetDelta)
				if pos < page.NextPosition {
					continue
				}
				if pos >= hwm || len(page.Events) >= limit || (bytes >= maxBytes && len(page.Events) > 0) || scanned >= scanRecordsMax {
					full = true
					break
				}
				scanned++
				page.NextPosition = pos + 1
				if filter != nil && !filter(string(records[i].Key)) {
					continue
				}
				e := decodeEvent(&h, &records[i])
				page.Events = append(page.Events, e)
				bytes += e.Size()
			}
			if !full && h.LastOffset()+1 > page.NextPosition {
				// Offsets of the batch past its last record (compaction).
				page.NextPosition = min(h.LastOffset()+1, hwm)
			}
		}
	}
	return page, nil
}

// PositionAt returns the position of the first event stamped at or after
// ts (Unix ms), or the next position when there is none.
func (st *Store) PositionAt(ts int64) (int64, error) {
	hwm := st.partition.HighWatermark()
	if ts < 0 {
		ts = 0
	}
	prefix := storeTablePrefix(pebblestore.PrefixEventTimeIndex, st.id)
	it, err := st.svc.store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	start := hwm
	if it.SeekGE(timeIndexKey(st.id, ts/1000)) {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return 0, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if start, err = decodeU64(v, "time index", it.Key()); err != nil {
			_ = it.Close()
			return 0, err
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if start >= hwm {
		return hwm, nil
	}
	// Timestamps never decrease along positions: scan from the first event
	// of ts's second to the first one at or after ts.
	pos := max(start, st.partition.LogStartOffset())
	for pos < hwm {
		page, err := st.ReadAll(pos, MaxReadLimit, MaxReadBytes, nil)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Events {
			if e.Timestamp >= ts {
				return e.Position, nil
			}
		}
		if page.NextPosition <= pos {
			break
		}
		pos = page.NextPosition
	}
	return hwm, nil
}
