package events

import (
	"errors"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Domain errors. httpapi maps each to an API code (httpapi/errors.go); they
// carry no wire knowledge themselves. Errors returned by this package wrap
// exactly one of them with %w and add a sentence.
var (
	ErrStoreNotFound         = errors.New("events: store not found")
	ErrStreamNotFound        = errors.New("events: stream not found")
	ErrTopicExists           = errors.New("events: a topic with the store's name already exists")
	ErrInvalidStoreName      = errors.New("events: invalid store name")
	ErrReservedName          = errors.New("events: reserved name")
	ErrInvalidStream         = errors.New("events: invalid stream name")
	ErrInvalidType           = errors.New("events: invalid event type")
	ErrInvalidEventID        = errors.New("events: invalid event id")
	ErrInvalidMetadata       = errors.New("events: invalid metadata")
	ErrInvalidExpected       = errors.New("events: invalid expected revision")
	ErrDuplicateEventID      = errors.New("events: duplicate event id in one append")
	ErrEventTooLarge         = errors.New("events: event too large")
	ErrAppendTooLarge        = errors.New("events: append too large")
	ErrOutOfRange            = errors.New("events: value out of range")
	ErrWrongExpectedRevision = errors.New("events: wrong expected revision")
	// ErrStreamDeleted comes with ErrStreamNotFound when a read names a
	// soft-deleted stream.
	ErrStreamDeleted = errors.New("events: stream deleted")
	// ErrStreamTombstoned: an append to (or a delete of) a hard-deleted
	// stream; with ErrStreamNotFound when a read names one.
	ErrStreamTombstoned    = errors.New("events: stream tombstoned")
	ErrIdempotencyConflict = errors.New("events: idempotency conflict")
	ErrInvalidConsumerName = errors.New("events: invalid consumer name")
	ErrConsumerNotFound    = errors.New("events: consumer not found")
	// ErrConsumerExists: a create names an existing consumer with another
	// start.
	ErrConsumerExists = errors.New("events: consumer exists with another start")
	// ErrCheckpointRegression: a commit below the checkpoint without force
	// (a *CheckpointRegressionError).
	ErrCheckpointRegression = errors.New("events: checkpoint regression")
	ErrTooManyConsumers     = errors.New("events: too many consumers")
	// ErrStorage: the store failed; the failure is wrapped (%w) after
	// it, so that pebblestore.Classify finds its class.
	ErrStorage = pebblestore.StorageSentinel("events: storage error")
)

// WrongExpectedRevisionError is the conflict of an optimistic append: the
// stream is not where the writer expected it.
type WrongExpectedRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	// CurrentRevision is the stream's last revision, -1 when it has no events
	// or was deleted.
	CurrentRevision int64
	// Deleted is true when the stream was soft-deleted (CurrentRevision -1).
	Deleted bool
}

func (e *WrongExpectedRevisionError) Error() string {
	current := "the stream does not exist"
	switch {
	case e.Deleted:
		current = "it was deleted"
	case e.CurrentRevision >= 0:
		current = fmt.Sprintf("its current revision is %d", e.CurrentRevision)
	}
	return fmt.Sprintf("events: wrong expected revision: stream %q was expected to be %s, but %s", e.Stream, e.Expected.describe(), current)
}

// Is makes errors.Is(err, ErrWrongExpectedRevision) true.
func (e *WrongExpectedRevisionError) Is(target error) bool { return target == ErrWrongExpectedRevision }

// CurrentState is "no_stream", "exists" or "deleted".
func (e *WrongExpectedRevisionError) CurrentState() string {
	switch {
	case e.Deleted:
		return StreamStateDeleted
	case e.CurrentRevision < 0:
		return "no_stream"
	}
	return "exists"
}
