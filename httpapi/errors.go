package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
)

// nativeError is the one error type of the native JSON API, the one shape
// of every error answer: a stable lower_snake_case code, a sentence for
// people and optional details (the field, the bounds, the current
// revision). Domain errors (queues.Error, the events sentinels, store
// failures) become one in errorOf; writeError writes it with the status of
// its code in nativeCodeStatus.
type nativeError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *nativeError) Error() string { return e.Code + ": " + e.Message }

// nativeCodeStatus is the one table of the native API's error codes and
// their HTTP statuses (NATIVE-QUEUE.md §3.8), after nats-server's
// errors.json: request decoding, the queue API (whose codes queues
// declares, queues.Codes(): each has its status here,
// TestQueueCodesHaveStatus), the event store, storage admin and the HTTP
// listener's limits, and the server's own answers (405, /readyz's 503).
// /openapi.json lists it.
var nativeCodeStatus = map[string]int{
	// Request decoding (every native route).
	"invalid_json":           http.StatusBadRequest,
	"unknown_field":          http.StatusBadRequest,
	"out_of_range":           http.StatusBadRequest,
	"invalid_enum":           http.StatusBadRequest,
	"conflicting_fields":     http.StatusBadRequest,
	"invalid_body":           http.StatusBadRequest,
	"invalid_base64":         http.StatusBadRequest,
	"request_too_large":      http.StatusRequestEntityTooLarge,
	"message_too_large":      http.StatusRequestEntityTooLarge,
	"unsupported_media_type": http.StatusUnsupportedMediaType,
	"storage_unavailable":    http.StatusServiceUnavailable,
	"shutting_down":          http.StatusServiceUnavailable,
	"storage_full":           http.StatusInsufficientStorage,
	"internal":               http.StatusInternalServerError,

	// Queue API (the codes of queues.Codes() not listed above).
	"invalid_receipt":         http.StatusBadRequest,
	"invalid_dedup_id":        http.StatusBadRequest,
	"invalid_request_id":      http.StatusBadRequest,
	"invalid_partition":       http.StatusBadRequest,
	"priority_out_of_range":   http.StatusBadRequest,
	"delay_exceeds_retention": http.StatusBadRequest,
	"expire_in_past":          http.StatusBadRequest,
	"fifo_disabled":           http.StatusBadRequest,
	"dead_letter_not_found":   http.StatusBadRequest,
	"dead_letter_cycle":       http.StatusBadRequest,
	"batch_rejected":          http.StatusBadRequest,
	"too_many_headers":        http.StatusBadRequest,
	"reserved_header":         http.StatusBadRequest,
	"wrong_queue":             http.StatusBadRequest,
	"duplicate_in_request":    http.StatusBadRequest,
	"queue_not_found":         http.StatusNotFound,
	"queue_deleted":           http.StatusNotFound,
	"group_not_found":         http.StatusNotFound,
	"message_not_found":       http.StatusNotFound,
	"not_found":               http.StatusNotFound,
	"destination_not_found":   http.StatusNotFound,
	"task_not_found":          http.StatusNotFound,
	"queue_exists":            http.StatusConflict,
	"queue_not_empty":         http.StatusConflict,
	"queue_in_use":            http.StatusConflict,
	"lease_lost":              http.StatusConflict,
	"not_inflight":            http.StatusConflict,
	"visibility_too_long":     http.StatusConflict,
	"dedup_conflict":          http.StatusConflict,
	"max_inflight_reached":    http.StatusTooManyRequests,

	// Event store.
	"invalid_name":              http.StatusBadRequest,
	"reserved_name":             http.StatusBadRequest,
	"invalid_id":                http.StatusBadRequest,
	"invalid_stream":            http.StatusBadRequest,
	"invalid_type":              http.StatusBadRequest,
	"invalid_expected_revision": http.StatusBadRequest,
	"duplicate_event_id":        http.StatusBadRequest,
	"invalid_from":              http.StatusBadRequest,
	"store_not_found":           http.StatusNotFound,
	"stream_not_found":          http.StatusNotFound,
	"topic_exists":              http.StatusConflict,
	"wrong_expected_revision":   http.StatusConflict,
	"stream_tombstoned":         http.StatusConflict,
	"idempotency_conflict":      http.StatusConflict,
	"consumer_not_found":        http.StatusNotFound,
	"immutable_field":           http.StatusConflict,
	"checkpoint_regression":     http.StatusConflict,

	// Storage admin.
	"invalid_path":         http.StatusBadRequest,
	"target_not_empty":     http.StatusConflict,
	"task_already_running": http.StatusConflict,
	"storage_corrupt":      http.StatusInternalServerError,

	// Admin routes over topics, consumer groups and transactions
	// (admin*.go).
	"topic_not_found":    http.StatusNotFound,
	"invalid_partitions": http.StatusBadRequest,
	"invalid_config":     http.StatusBadRequest,
	"topic_owned":        http.StatusConflict,
	"group_not_empty":    http.StatusConflict,

	// Limits of the HTTP listener (limits.go), on every native route.
	"too_many_streams":      http.StatusServiceUnavailable,
	"body_memory_exhausted": http.StatusServiceUnavailable,

	// Cluster membership (cluster.go).
	"not_clustered":     http.StatusConflict,
	"not_leader":        http.StatusMisdirectedRequest,
	"no_leader":         http.StatusServiceUnavailable,
	"node_not_found":    http.StatusNotFound,
	"node_exists":       http.StatusConflict,
	"node_id_removed":   http.StatusConflict,
	"would_lose_quorum": http.StatusConflict,
	"last_voter":        http.StatusConflict,
	"change_pending":    http.StatusConflict,
	"invalid_address":   http.StatusBadRequest,

	// HTTP authentication (auth.go): missing or wrong credentials, and an
	// authorizer's refusal.
	"unauthorized": http.StatusUnauthorized,
	"forbidden":    http.StatusForbidden,

	// The server's own answers: a path served with another method (with
	// Allow), and /readyz while the broker does not take traffic.
	"method_not_allowed": http.StatusMethodNotAllowed,
	"not_ready":          http.StatusServiceUnavailable,
}

// newNativeError builds an error with a code of nativeCodeStatus.
func newNativeError(code, format string, args ...any) *nativeError {
	if _, ok := nativeCodeStatus[code]; !ok {
		panic("httpapi: error code " + code + " is not in nativeCodeStatus")
	}
	return &nativeError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *nativeError) with(key string, value any) *nativeError {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// statusOf is the HTTP status of code, 500 for a code not in the table.
func statusOf(code string) int {
	if status, ok := nativeCodeStatus[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// writeError is the one writer of error answers: err (any error, see
// errorOf) with the status of its code, and Retry-After on the statuses a
// client should retry (429, 503).
func writeError(w http.ResponseWriter, err error) {
	e := errorOf(err)
	status := statusOf(e.Code)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, e)
}

// errorOf turns any error a handler meets into the one error type: a
// *nativeError as it is, a failure of the store by its class
// (storageError, whichever domain wrapped it), a queue error by its code,
// an events error by its sentinel (eventsError), anything else as
// internal.
func errorOf(err error) *nativeError {
	var ne *nativeError
	var qe *queues.Error
	switch {
	case err == nil:
		return newNativeError("internal", "no error")
	case errors.As(err, &ne):
		return ne
	}
	if se := storageError(err); se != nil {
		return se
	}
	if errors.As(err, &qe) {
		if _, ok := nativeCodeStatus[qe.Code]; !ok {
			return newNativeError("internal", "%s: %s", qe.Code, qe.Message)
		}
		return &nativeError{Code: qe.Code, Message: qe.Message, Details: qe.Details}
	}
	return eventsError(err)
}

// storageError is the one mapping of a failure of the store to the API,
// by its class (pebblestore.Classify, the one classification), the same
// for every route and domain; nil when err is no store failure:
//
//   - full: 507 storage_full; when the guard refused new data because the
//     disk is almost full (pebblestore.SpaceGuard), its sentence and
//     details free_bytes, min_bytes, resume_bytes;
//   - corruption: 500 storage_corrupt, retrying does not help;
//   - I/O, closed store: 503 storage_unavailable, the outcome is unknown,
//     the request may be retried.
func storageError(err error) *nativeError {
	se := pebblestore.Classify(err)
	if se == nil {
		return nil
	}
	switch se.Class {
	case pebblestore.StorageFull:
		if space := se.Space(); space != nil {
			return newNativeError("storage_full", "%s", space.Error()).
				with("free_bytes", space.Free).with("min_bytes", space.Min).with("resume_bytes", space.Resume)
		}
		return newNativeError("storage_full", "the disk of the data directory is full: %v", err)
	case pebblestore.StorageCorruption:
		return newNativeError("storage_corrupt", "%v; run 'broker storage verify'", err)
	}
	return newNativeError("storage_unavailable", "the store failed; the outcome of this request is unknown, retry it: %v", err)
}
