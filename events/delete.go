package events

import (
	"fmt"
)

// Stream states in the API.
const (
	StreamStateLive       = "live"
	StreamStateDeleted    = "deleted"
	StreamStateTombstoned = "tombstoned"
)

// StreamInfo describes a stream.
type StreamInfo struct {
	Stream string
	// State is StreamStateLive, StreamStateDeleted or StreamStateTombstoned.
	State string
	// HeadRevision is the stream's last revision: the last durable one of a
	// live stream (-1 while its first events are not yet durable), the last
	// one written before the deletion of a deleted stream. The next append
	// gets HeadRevision+1.
	HeadRevision int64
	// FirstRevision is the first revision reads show: 0, or the revision
	// after the last deletion. Reads show [FirstRevision, HeadRevision].
	FirstRevision int64
	// HeadPosition and LastEventMs describe the event at HeadRevision of a
	// live stream; -1 and 0 otherwise.
	HeadPosition int64
	LastEventMs  int64
}

// DeletedAtRevision is the last revision the stream had when it was last
// deleted, -1 when it never was.
func (i StreamInfo) DeletedAtRevision() int64 { return i.FirstRevision - 1 }

// Stream describes stream. A stream that was never written is
// ErrStreamNotFound; a deleted or tombstoned one is described with its
// state.
func (st *Store) Stream(stream string) (StreamInfo, error) {
	if err := ValidateStream(stream); err != nil {
		return StreamInfo{}, err
	}
	_, head, found, err := st.lookupStream(stream)
	if err != nil {
		return StreamInfo{}, err
	}
	if !found {
		return StreamInfo{}, fmt.Errorf("%w: stream %q has no events in store %s", ErrStreamNotFound, stream, st.name)
	}
	info := StreamInfo{Stream: stream, State: head.State.String(), HeadRevision: head.LastRevision,
		FirstRevision: head.TruncateBefore, HeadPosition: -1}
	if head.State != streamLive {
		return info, nil
	}
	page, err := st.ReadStream(stream, FromEnd, true, 1, MaxReadBytes)
	if err != nil {
		return StreamInfo{}, err
	}
	info.HeadRevision = page.HeadRevision
	if len(page.Events) == 1 {
		info.HeadPosition = page.Events[0].Position
		info.LastEventMs = page.Events[0].Timestamp
	}
	return info, nil
}

// DeleteStream deletes stream if it satisfies expected (Any, Exists or
// AtRevision; NoStream is ErrInvalidExpected) and returns its description
// afterwards. A soft delete (hard false) hides the stream's events from
// stream reads; an append expecting NoStream or Any starts the stream
// again, its revisions continuing after the deleted ones. A hard delete
// tombstones the stream: reads find no stream and appends get
// ErrStreamTombstoned, for good. Either way the events stay in the store's
// log (store reads and Kafka consumers still see them, positions stay
// gap-free) and their ids stay taken.
//
// Deleting a deleted stream again changes nothing (a hard delete of a
// soft-deleted one tombstones it); deleting a tombstoned stream is
// ErrStreamTombstoned; a stream never written is ErrStreamNotFound. A
// deleted stream does not satisfy Exists or a revision: that is a
// *WrongExpectedRevisionError. The deletion is durable when DeleteStream
// returns.
func (st *Store) DeleteStream(stream string, expected ExpectedRevision, hard bool) (StreamInfo, error) {
	if err := ValidateStream(stream); err != nil {
		return StreamInfo{}, err
	}
	if expected.Kind == ExpectNoStream {
		return StreamInfo{}, fmt.Errorf("%w: a delete cannot expect no_stream; use any, exists or a revision", ErrInvalidExpected)
	}
	st.mu.Lock()
	locked := true
	defer func() {
		if locked {
			st.mu.Unlock()
		}
	}()
	if st.mu.deleted || st.partition.Deleted() {
		return StreamInfo{}, fmt.Errorf("%w: %q was deleted", ErrStoreNotFound, st.name)
	}
	streamID, head, found, err := st.lookupStream(stream)
	if err != nil {
		return StreamInfo{}, err
	}
	if !found {
		return StreamInfo{}, fmt.Errorf("%w: stream %q has no events in store %s", ErrStreamNotFound, stream, st.name)
	}
	if head.State == streamTombstoned {
		return StreamInfo{}, fmt.Errorf("%w: stream %q was deleted for good (hard delete) already", ErrStreamTombstoned, stream)
	}
	current := head.LastRevision
	if head.State == streamDeleted {
		current = -1
	}
	if !expected.check(current) {
		return StreamInfo{}, &WrongExpectedRevisionError{Stream: stream, Expected: expected, CurrentRevision: current, Deleted: head.State == streamDeleted}
	}
	next := head
	next.TruncateBefore = head.LastRevision + 1
	next.State = streamDeleted
	if hard {
		next.State = streamTombstoned
	}
	info := StreamInfo{Stream: stream, State: next.State.String(), HeadRevision: next.LastRevision,
		FirstRevision: next.TruncateBefore, HeadPosition: -1}
	if next == head {
		// Deleted already, but that deletion may be applied and not yet
		// synced: answer only once everything applied so far is durable.
		st.mu.Unlock()
		locked = false
		b := st.svc.store.NewBatch()
		b.LogData(nil)
		if err := b.Commit(); err != nil {
			return StreamInfo{}, fmt.Errorf("%w: deleting stream %q: %w", ErrStorage, stream, err)
		}
		return info, nil
	}
	b := st.svc.store.NewBatch()
	b.Set(streamHeadKey(st.id, streamID), next.encode())
	if err := b.Apply(); err != nil {
		b.Close()
		return StreamInfo{}, fmt.Errorf("%w: deleting stream %q: %w", ErrStorage, stream, err)
	}
	st.mu.Unlock()
	locked = false
	// Pebble syncs its WAL as a prefix: this also makes every append the
	// deletion covers durable.
	if err := b.Wait(); err != nil {
		return StreamInfo{}, fmt.Errorf("%w: deleting stream %q: %w", ErrStorage, stream, err)
	}
	st.svc.log.Debug().Str("store", st.name).Str("stream", stream).Str("state", info.State).
		Int64("deleted_at_revision", info.DeletedAtRevision()).Msg("stream deleted")
	return info, nil
}
