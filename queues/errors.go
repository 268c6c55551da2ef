package queues

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/vibemq/broker/pebblestore"
)

// Error is a queue API error: a stable lower_snake_case code, a sentence
// for people and optional details (the field, the bounds). Every code and
// its HTTP status is declared once, in codeStatus (after nats-server's
// errors.json); batch items reuse the same codes.
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// cause is the store failure behind storage_full and
	// storage_unavailable (errStorage), for errors.Is and errors.As.
	cause error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the store failure behind a storage error, else nil.
func (e *Error) Unwrap() error { return e.cause }

// Status is the HTTP status of the error's code (500 for an unknown code).
func (e *Error) Status() int { return StatusOf(e.Code) }

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
	CodeStorageUnavailable   = "storage_unavailable"
	CodeShuttingDown         = "shutting_down"
	CodeStorageFull          = "storage_full"
	CodeInternal             = "internal"
)

// codeStatus is the one table of codes and HTTP statuses.
var codeStatus = map[string]int{
	CodeInvalidJSON:          http.StatusBadRequest,
	CodeUnknownField:         http.StatusBadRequest,
	CodeInvalidName:          http.StatusBadRequest,
	CodeReservedName:         http.StatusBadRequest,
	CodeOutOfRange:           http.StatusBadRequest,
	CodeInvalidEnum:          http.StatusBadRequest,
	CodeConflictingFields:    http.StatusBadRequest,
	CodeInvalidBody:          http.StatusBadRequest,
	CodeInvalidBase64:        http.StatusBadRequest,
	CodeInvalidID:            http.StatusBadRequest,
	CodeInvalidReceipt:       http.StatusBadRequest,
	CodeInvalidDedupID:       http.StatusBadRequest,
	CodeInvalidRequestID:     http.StatusBadRequest,
	CodeInvalidPartition:     http.StatusBadRequest,
	CodePriorityOutOfRange:   http.StatusBadRequest,
	CodeDelayExceedsRetain:   http.StatusBadRequest,
	CodeExpireInPast:         http.StatusBadRequest,
	CodeFIFODisabled:         http.StatusBadRequest,
	CodeDeadLetterNotFound:   http.StatusBadRequest,
	CodeDeadLetterCycle:      http.StatusBadRequest,
	CodeBatchRejected:        http.StatusBadRequest,
	CodeTooManyHeaders:       http.StatusBadRequest,
	CodeReservedHeader:       http.StatusBadRequest,
	CodeWrongQueue:           http.StatusBadRequest,
	CodeDuplicateInRequest:   http.StatusBadRequest,
	CodeQueueNotFound:        http.StatusNotFound,
	CodeQueueDeleted:         http.StatusNotFound,
	CodeGroupNotFound:        http.StatusNotFound,
	CodeMessageNotFound:      http.StatusNotFound,
	CodeNotFound:             http.StatusNotFound,
	CodeDestinationNotFound:  http.StatusNotFound,
	CodeTaskNotFound:         http.StatusNotFound,
	CodeQueueExists:          http.StatusConflict,
	CodeTopicExists:          http.StatusConflict,
	CodeQueueNotEmpty:        http.StatusConflict,
	CodeQueueInUse:           http.StatusConflict,
	CodeImmutableField:       http.StatusConflict,
	CodeTaskAlreadyRunning:   http.StatusConflict,
	CodeLeaseLost:            http.StatusConflict,
	CodeNotInflight:          http.StatusConflict,
	CodeVisibilityTooLong:    http.StatusConflict,
	CodeDedupConflict:        http.StatusConflict,
	CodeRequestTooLarge:      http.StatusRequestEntityTooLarge,
	CodeMessageTooLarge:      http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	CodeMaxInflightReached:   http.StatusTooManyRequests,
	CodeStorageUnavailable:   http.StatusServiceUnavailable,
	CodeShuttingDown:         http.StatusServiceUnavailable,
	CodeStorageFull:          http.StatusInsufficientStorage,
	CodeInternal:             http.StatusInternalServerError,
}

// StatusOf returns the HTTP status of code, 500 for an unknown code.
func StatusOf(code string) int {
	if s, ok := codeStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes returns every code of the table (for documentation and tests).
func Codes() map[string]int {
	out := make(map[string]int, len(codeStatus))
	for k, v := range codeStatus {
		out[k] = v
	}
	return out
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

// errStorage wraps a store failure, classified by pebblestore.Classify:
// 507 storage_full when the disk is full or the broker refused new data
// because it is almost full (pebblestore.SpaceGuard; details: free_bytes,
// min_bytes, resume_bytes), else 503 storage_unavailable (corruption
// included: the request's outcome is unknown). The *Error unwraps to err.
func errStorage(err error) *Error {
	var e *Error
	if pebblestore.Classify(err) == pebblestore.ErrStorageFull {
		var space *pebblestore.SpaceError
		if errors.As(err, &space) {
			e = &Error{Code: CodeStorageFull, Message: space.Error(), Details: map[string]any{
				"free_bytes": space.Free, "min_bytes": space.Min, "resume_bytes": space.Resume}}
		} else {
			e = errf(CodeStorageFull, "the disk of the data directory is full: %v", err)
		}
	} else {
		e = errf(CodeStorageUnavailable, "the store failed; the outcome of this request is unknown, retry it: %v", err)
	}
	e.cause = err
	return e
}

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
