package queues

import (
	"errors"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Error is a queue error: a stable lower_snake_case code, a sentence for
// people and optional details (the field, the bounds). Every code is
// declared once, below. It is a typed domain error with no wire shape: the
// transport turns it into its own error (httpapi's one error type and one
// table of codes and statuses, after nats-server's errors.json); batch
// items reuse the same codes. A failure of the store has no code: it
// wraps the failure (errStorage), which the transport answers by its
// class.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	// cause is the store failure of an error without code (errStorage),
	// for errors.Is, errors.As and pebblestore.Classify.
	cause error
}

func (e *Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the store failure behind a storage error, else nil.
func (e *Error) Unwrap() error { return e.cause }

// The error codes of the queue API (NATIVE-QUEUE.md §3.8).
const (
	CodeInvalidJSON          = "invalid_json"
	CodeUnknownField         = "unknown_field"
	CodeInvalidName          = "invalid_name"
	CodeReservedName         = "reserved_name"
	CodeOutOfRange           = "out_of_range"
	CodeInvalidEnum          = "invalid_enum"
	CodeConflictingFields    = "conflicting_fields"
	CodeInvalidBody          = "invalid_body"
	CodeInvalidBase64        = "invalid_base64"
	CodeInvalidID            = "invalid_id"
	CodeInvalidReceipt       = "invalid_receipt"
	CodeInvalidDedupID       = "invalid_dedup_id"
	CodeInvalidRequestID     = "invalid_request_id"
	CodeInvalidPartition     = "invalid_partition"
	CodePriorityOutOfRange   = "priority_out_of_range"
	CodeDelayExceedsRetain   = "delay_exceeds_retention"
	CodeExpireInPast         = "expire_in_past"
	CodeFIFODisabled         = "fifo_disabled"
	CodeDeadLetterNotFound   = "dead_letter_not_found"
	CodeDeadLetterCycle      = "dead_letter_cycle"
	CodeBatchRejected        = "batch_rejected"
	CodeTooManyHeaders       = "too_many_headers"
	CodeReservedHeader       = "reserved_header"
	CodeWrongQueue           = "wrong_queue"
	CodeDuplicateInRequest   = "duplicate_in_request"
	CodeQueueNotFound        = "queue_not_found"
	CodeQueueDeleted         = "queue_deleted"
	CodeGroupNotFound        = "group_not_found"
	CodeMessageNotFound      = "message_not_found"
	CodeNotFound             = "not_found"
	CodeDestinationNotFound  = "destination_not_found"
	CodeTaskNotFound         = "task_not_found"
	CodeQueueExists          = "queue_exists"
	CodeTopicExists          = "topic_exists"
	CodeQueueNotEmpty        = "queue_not_empty"
	CodeQueueInUse           = "queue_in_use"
	CodeImmutableField       = "immutable_field"
	CodeTaskAlreadyRunning   = "task_already_running"
	CodeLeaseLost            = "lease_lost"
	CodeNotInflight          = "not_inflight"
	CodeVisibilityTooLong    = "visibility_too_long"
	CodeDedupConflict        = "dedup_conflict"
	CodeRequestTooLarge      = "request_too_large"
	CodeMessageTooLarge      = "message_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeMaxInflightReached   = "max_inflight_reached"
	CodeShuttingDown         = "shutting_down"
	CodeInternal             = "internal"
)

// Codes returns every error code of the queue API. Their HTTP statuses
// are the transport's business: httpapi's one table of codes
// (nativeCodeStatus) holds a status for each (TestQueueCodesHaveStatus).
func Codes() []string { return append([]string(nil), allCodes...) }

var allCodes = []string{
	CodeInvalidJSON,
	CodeUnknownField,
	CodeInvalidName,
	CodeReservedName,
	CodeOutOfRange,
	CodeInvalidEnum,
	CodeConflictingFields,
	CodeInvalidBody,
	CodeInvalidBase64,
	CodeInvalidID,
	CodeInvalidReceipt,
	CodeInvalidDedupID,
	CodeInvalidRequestID,
	CodeInvalidPartition,
	CodePriorityOutOfRange,
	CodeDelayExceedsRetain,
	CodeExpireInPast,
	CodeFIFODisabled,
	CodeDeadLetterNotFound,
	CodeDeadLetterCycle,
	CodeBatchRejected,
	CodeTooManyHeaders,
	CodeReservedHeader,
	CodeWrongQueue,
	CodeDuplicateInRequest,
	CodeQueueNotFound,
	CodeQueueDeleted,
	CodeGroupNotFound,
	CodeMessageNotFound,
	CodeNotFound,
	CodeDestinationNotFound,
	CodeTaskNotFound,
	CodeQueueExists,
	CodeTopicExists,
	CodeQueueNotEmpty,
	CodeQueueInUse,
	CodeImmutableField,
	CodeTaskAlreadyRunning,
	CodeLeaseLost,
	CodeNotInflight,
	CodeVisibilityTooLong,
	CodeDedupConflict,
	CodeRequestTooLarge,
	CodeMessageTooLarge,
	CodeUnsupportedMediaType,
	CodeMaxInflightReached,
	CodeShuttingDown,
	CodeInternal,
}

func errf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// rangeErr is out_of_range with the field and its bounds in the details.
func rangeErr(field string, minimum, maximum int64) *Error {
	return &Error{
		Code:    CodeOutOfRange,
		Message: fmt.Sprintf("%s must be between %d and %d", field, minimum, maximum),
		Details: map[string]any{"field": field, "min": minimum, "max": maximum},
	}
}

func withField(e *Error, field string) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details["field"] = field
	return e
}

// errStorage wraps a failure of the store (%w: Unwrap returns it). It
// has no code: the queue does not classify store failures, the transport
// answers by the failure's class (pebblestore.Classify: httpapi's
// storage_full, storage_corrupt or storage_unavailable), as for every
// other domain. Its message is the failure's text.
func errStorage(err error) *Error {
	return &Error{Message: err.Error(), cause: fmt.Errorf("%w: %w", ErrStorage, err)}
}

// ErrStorage is in the chain of every failure of the store a queue call
// returns (errors.Is(err, pebblestore.ErrStorage) holds too).
var ErrStorage = pebblestore.StorageSentinel("queues: storage error")

// AsError returns err as an *Error, wrapping unknown errors as internal.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return errf(CodeInternal, "%v", err)
}
