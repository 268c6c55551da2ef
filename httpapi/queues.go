package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vibemq/broker/queues"
)

// Request body limits of the queue API.
const (
	// QueueSendBodyMax bounds a send request: 16 MiB of messages plus JSON.
	QueueSendBodyMax = 17 << 20
	// QueueBodyMax bounds every other queue request.
	QueueBodyMax = 1 << 20
)

// queueAPI serves the native queue and DLQ resources under /v1.
type queueAPI struct {
	s     *Server
	e     *queues.Engine
	clock func() time.Time
}

// RegisterQueues adds the queue, message, DLQ and task routes. clock is
// the broker's clock (time.Now when nil).
//
//	GET    /v1/queues                          list (prefix, after, limit)
//	PUT    /v1/queues/{queue}                  create (201; 200 when identical)
//	GET    /v1/queues/{queue}                  describe
//	PATCH  /v1/queues/{queue}                  update attributes
//	DELETE /v1/queues/{queue}[?force=true]     delete (204)
//	POST   /v1/queues/{queue}/messages         send, send-batch
//	GET    /v1/queues/{queue}/messages         browse (state, after, limit, reason, source)
//	GET    /v1/queues/{queue}/messages/{id}    one message
//	DELETE /v1/queues/{queue}/messages/{id}    delete one message (204)
//	POST   /v1/queues/{queue}/receive          receive, long poll with wait_ms
//	POST   /v1/queues/{queue}/ack              ack receipts
//	POST   /v1/queues/{queue}/nack             nack (delay or backoff) or reject (dead_letter)
//	POST   /v1/queues/{queue}/extend           extend leases
//	DELETE /v1/queues/{queue}/receipts/{r}     ack one receipt (204)
//	POST   /v1/queues/{queue}/purge            delete messages (all, or by states and age)
//	GET    /v1/queues/{queue}/stats            counters and rates
//	GET    /v1/queues/{queue}/dlq              browse the queue's DLQ
//	POST   /v1/queues/{queue}/redrive          start a redrive of this DLQ (202)
//	GET    /v1/tasks, /v1/tasks/{id}; DELETE /v1/tasks/{id} (cancel)
func RegisterQueues(s *Server, e *queues.Engine, clock func() time.Time) {
	if clock == nil {
		clock = time.Now
	}
	api := &queueAPI{s: s, e: e, clock: clock}
	s.noteBodyLimit(QueueSendBodyMax)
	h := func(pattern string, f func(w http.ResponseWriter, r *http.Request)) {
		s.Handle(pattern, http.HandlerFunc(f))
	}
	h("GET /v1/queues", api.handleList)
	h("PUT /v1/queues/{queue}", api.handleCreate)
	h("GET /v1/queues/{queue}", api.handleGet)
	h("PATCH /v1/queues/{queue}", api.handleUpdate)
	h("DELETE /v1/queues/{queue}", api.handleDelete)
	h("POST /v1/queues/{queue}/messages", api.handleSend)
	h("GET /v1/queues/{queue}/messages", api.handleBrowse)
	h("GET /v1/queues/{queue}/messages/{id}", api.handleGetMessage)
	h("DELETE /v1/queues/{queue}/messages/{id}", api.handleDeleteMessage)
	h("POST /v1/queues/{queue}/receive", api.handleReceive)
	h("POST /v1/queues/{queue}/ack", api.handleAck)
	h("POST /v1/queues/{queue}/nack", api.handleNack)
	h("POST /v1/queues/{queue}/extend", api.handleExtend)
	h("DELETE /v1/queues/{queue}/receipts/{receipt}", api.handleDeleteReceipt)
	h("POST /v1/queues/{queue}/purge", api.handlePurge)
	h("GET /v1/queues/{queue}/stats", api.handleStats)
	h("GET /v1/queues/{queue}/dlq", api.handleDLQ)
	h("POST /v1/queues/{queue}/redrive", api.handleRedrive)
	h("GET /v1/tasks", api.handleTasks)
	h("GET /v1/tasks/{id}", api.handleTask)
	h("DELETE /v1/tasks/{id}", api.handleCancelTask)
}

func (api *queueAPI) now() time.Time { return api.clock() }

// writeQueueError writes err as {code, message, details} with the status
// of its code in the one error table (nativeCodeStatus).
func writeQueueError(w http.ResponseWriter, err error) {
	qe := queues.AsError(err)
	status := statusOf(qe.Code)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, qe)
}

// preallocMax bounds what decodeBody allocates for a declared
// Content-Length before the bytes arrive.
const preallocMax = 1 << 20

// decodeBody decodes a strict JSON body into dst. An empty body leaves dst
// as is. Non-JSON content types get 415, oversized bodies 413, unknown
// fields unknown_field, anything else that is not the expected JSON
// invalid_json.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) *queues.Error {
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &queues.Error{Code: queues.CodeUnsupportedMediaType, Message: fmt.Sprintf("content type %q is not JSON; send application/json", ct)}
		}
	} else {
		return &queues.Error{Code: queues.CodeUnsupportedMediaType, Message: "the request has a body but no Content-Type; send application/json"}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	buf := bytes.Buffer{}
	if r.ContentLength > 0 && r.ContentLength <= limit {
		// One allocation for a declared length, but not more than a
		// common request ahead of the bytes: a client that declares 16 MiB
		// and sends nothing must not cost 16 MiB.
		buf.Grow(int(min(r.ContentLength, preallocMax)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(body)
	data := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &queues.Error{Code: queues.CodeRequestTooLarge, Message: fmt.Sprintf("the request body is over %d bytes", limit),
				Details: map[string]any{"max": limit}}
		}
		return &queues.Error{Code: queues.CodeInvalidJSON, Message: "cannot read the request body: " + err.Error()}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := jsonv2.Unmarshal(data, dst, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonDecodeError(err)
	}
	return nil
}

// jsonDecodeError turns a strict decoder error into unknown_field or
// invalid_json, naming the field (dotted path) and the byte offset.
func jsonDecodeError(err error) *queues.Error {
	var semErr *jsonv2.SemanticError
	var synErr *jsontext.SyntacticError
	switch {
	case errors.As(err, &semErr):
		field := strings.ReplaceAll(strings.TrimPrefix(string(semErr.JSONPointer), "/"), "/", ".")
		if errors.Is(err, jsonv2.ErrUnknownName) {
			return &queues.Error{Code: queues.CodeUnknownField, Message: fmt.Sprintf("unknown field %q", field), Details: map[string]any{"field": field}}
		}
		if semErr.GoType != nil && semErr.JSONKind != 0 {
			want, got := jsonKind(semErr.GoType.String()), kindName(semErr.JSONKind)
			msg := fmt.Sprintf("field %q must be a JSON %s, not %s", field, want, got)
			switch {
			case want == got && want == "number":
				msg = fmt.Sprintf("field %q must be an integer in range", field)
			case field == "":
				return &queues.Error{Code: queues.CodeInvalidJSON, Message: fmt.Sprintf("the body must be a JSON %s, not %s", want, got)}
			}
			return &queues.Error{Code: queues.CodeInvalidJSON, Message: msg, Details: map[string]any{"field": field}}
		}
		return &queues.Error{Code: queues.CodeInvalidJSON, Message: fmt.Sprintf("field %q is not the expected JSON: %v", field, err), Details: map[string]any{"field": field}}
	case errors.As(err, &synErr):
		return &queues.Error{Code: queues.CodeInvalidJSON, Message: fmt.Sprintf("the body is not valid JSON (at byte %d): %v", synErr.ByteOffset, synErr.Err)}
	default:
		return &queues.Error{Code: queues.CodeInvalidJSON, Message: "the body is not the expected JSON: " + err.Error()}
	}
}

// kindName names a JSON value kind as jsonKind names Go types.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "number"
	case goType == "string":
		return "string"
	case goType == "bool":
		return "boolean"
	case strings.HasPrefix(goType, "[]"):
		return "array"
	}
	return "object"
}

func queryInt(r *http.Request, name string, def int) (int, *queues.Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &queues.Error{Code: queues.CodeOutOfRange, Message: fmt.Sprintf("query parameter %s=%q is not an integer", name, v), Details: map[string]any{"field": name}}
	}
	return n, nil
}

type listQueuesResponse struct {
	Queues []queues.QueueInfo `json:"queues"`
	Next   string             `json:"next,omitempty"`
}

func (api *queueAPI) handleList(w http.ResponseWriter, r *http.Request) {
	limit, qerr := queryInt(r, "limit", 100)
	if qerr != nil {
		writeQueueError(w, qerr)
		return
	}
	list, next, err := api.e.ListQueues(r.URL.Query().Get("prefix"), r.URL.Query().Get("after"), limit)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listQueuesResponse{Queues: list, Next: next})
}

func (api *queueAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	var patch queues.AttributesPatch
	if err := decodeBody(w, r, QueueBodyMax, &patch); err != nil {
		writeQueueError(w, err)
		return
	}
	info, created, err := api.e.CreateQueue(r.PathValue("queue"), &patch, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, info)
}

func (api *queueAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	info, err := api.e.GetQueue(r.PathValue("queue"))
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (api *queueAPI) handleUpdate(w http.ResponseWriter, r *http.Request) {
	var patch queues.AttributesPatch
	if err := decodeBody(w, r, QueueBodyMax, &patch); err != nil {
		writeQueueError(w, err)
		return
	}
	info, err := api.e.UpdateQueue(r.PathValue("queue"), &patch, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (api *queueAPI) handleDelete(w http.ResponseWriter, r *http.Request) {
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeQueueError(w, &queues.Error{Code: queues.CodeInvalidEnum, Message: fmt.Sprintf("force=%q is not true or false", v), Details: map[string]any{"field": "force"}})
			return
		}
		force = b
	}
	if err := api.e.DeleteQueue(r.PathValue("queue"), force, api.now()); err != nil {
		writeQueueError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type resultsResponse[T any] struct {
	Results []T `json:"results"`
}

func (api *queueAPI) handleSend(w http.ResponseWriter, r *http.Request) {
	var req queues.SendRequest
	if err := decodeBody(w, r, QueueSendBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	res, err := api.e.Send(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resultsResponse[queues.SendResult]{Results: res})
}

type messagesResponse struct {
	Messages []queues.Message `json:"messages"`
	Next     string           `json:"next,omitempty"`
	// Acks are the results of a receive's ack list, in its order.
	Acks []queues.ItemResult `json:"acks,omitempty"`
}

func (api *queueAPI) browse(w http.ResponseWriter, r *http.Request, queue string) {
	limit, qerr := queryInt(r, "limit", 100)
	if qerr != nil {
		writeQueueError(w, qerr)
		return
	}
	q := r.URL.Query()
	msgs, next, err := api.e.Browse(queue, queues.BrowseRequest{
		State: q.Get("state"), After: q.Get("after"), Limit: limit,
		Reason: q.Get("reason"), Source: q.Get("source"), Base64: q.Get("body_encoding") == "base64",
	}, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, messagesResponse{Messages: msgs, Next: next})
}

func (api *queueAPI) handleBrowse(w http.ResponseWriter, r *http.Request) {
	api.browse(w, r, r.PathValue("queue"))
}

func (api *queueAPI) handleDLQ(w http.ResponseWriter, r *http.Request) {
	info, err := api.e.GetQueue(r.PathValue("queue"))
	if err != nil {
		writeQueueError(w, err)
		return
	}
	dlq := info.DeadLetterQueue
	if info.Kind == "dlq" {
		dlq = info.Name
	}
	if dlq == "" {
		writeQueueError(w, &queues.Error{Code: queues.CodeQueueNotFound, Message: fmt.Sprintf("queue %q has no dead-letter queue (dead_letter is none)", info.Name)})
		return
	}
	api.browse(w, r, dlq)
}

func (api *queueAPI) handleGetMessage(w http.ResponseWriter, r *http.Request) {
	msg, err := api.e.GetMessage(r.PathValue("queue"), r.PathValue("id"), api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, msg)
}

func (api *queueAPI) handleDeleteMessage(w http.ResponseWriter, r *http.Request) {
	if err := api.e.DeleteMessage(r.PathValue("queue"), r.PathValue("id"), api.now()); err != nil {
		writeQueueError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleReceive leases messages, long-polling up to wait_ms when none is
// ready. A client that goes away before messages are found takes no lease.
func (api *queueAPI) handleReceive(w http.ResponseWriter, r *http.Request) {
	var req queues.ReceiveRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	name := r.PathValue("queue")
	wait, err := api.e.CheckReceive(name, &req)
	if err != nil {
		writeQueueError(w, err)
		return
	}
	start := time.Now()
	if wait > 0 {
		release, ok := api.s.acquireStream(w)
		if !ok {
			return
		}
		defer release()
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(time.Duration(wait)*time.Millisecond + api.s.cfg.WriteTimeout))
	}
	var timer *time.Timer
	var acks []queues.ItemResult
	receipts := req.Ack
	for first := true; ; first = false {
		var woken <-chan struct{}
		var cancel func()
		if wait > 0 {
			woken, cancel, err = api.e.Wait(name)
			if err != nil {
				writeQueueError(w, deletedIfLater(err, first))
				return
			}
		}
		msgs, results, err := api.e.AckAndReceive(name, receipts, req, api.now())
		if err == nil && receipts != nil {
			acks, receipts = results, nil // settled once, before any wait
		}
		if err != nil && acks != nil && queues.AsError(err).Code == queues.CodeMaxInflightReached {
			// A call with receipts is never refused at max_inflight: its
			// acks are committed; it waits on for room, then answers them.
			err = nil
		}
		left := time.Duration(wait)*time.Millisecond - time.Since(start)
		if err != nil || len(msgs) > 0 || left <= 0 {
			if cancel != nil {
				cancel()
			}
			if err != nil {
				writeQueueError(w, deletedIfLater(err, first))
				return
			}
			if msgs == nil {
				msgs = []queues.Message{}
			}
			writeJSON(w, http.StatusOK, messagesResponse{Messages: msgs, Acks: acks})
			return
		}
		if timer == nil {
			timer = time.NewTimer(left)
			defer timer.Stop()
		}
		select {
		case <-woken:
		case <-timer.C:
			timer.Reset(0) // one more try, then the loop answers
		case <-r.Context().Done():
			cancel()
			return
		}
		cancel()
	}
}

func deletedIfLater(err error, first bool) error {
	qe := queues.AsError(err)
	if !first && qe.Code == queues.CodeQueueNotFound {
		return &queues.Error{Code: queues.CodeQueueDeleted, Message: "the queue was deleted while this request waited"}
	}
	return err
}

type receiptsRequest struct {
	Receipts []string `json:"receipts"`
}

func (api *queueAPI) handleAck(w http.ResponseWriter, r *http.Request) {
	var req receiptsRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	res, err := api.e.Ack(r.PathValue("queue"), req.Receipts, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resultsResponse[queues.ItemResult]{Results: res})
}

func (api *queueAPI) handleDeleteReceipt(w http.ResponseWriter, r *http.Request) {
	res, err := api.e.Ack(r.PathValue("queue"), []string{r.PathValue("receipt")}, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	if res[0].Error != nil {
		writeQueueError(w, res[0].Error)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (api *queueAPI) handleNack(w http.ResponseWriter, r *http.Request) {
	var req queues.NackRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	res, err := api.e.Nack(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resultsResponse[queues.ItemResult]{Results: res})
}

func (api *queueAPI) handleExtend(w http.ResponseWriter, r *http.Request) {
	var req queues.ExtendRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	res, err := api.e.Extend(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resultsResponse[queues.ItemResult]{Results: res})
}

type purgeResponse struct {
	Deleted int64 `json:"deleted"`
}

// handlePurge deletes the messages {states, older_than_ms} selects; an
// empty body deletes every message.
func (api *queueAPI) handlePurge(w http.ResponseWriter, r *http.Request) {
	var req queues.PurgeRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	n, err := api.e.PurgeMatching(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, purgeResponse{Deleted: n})
}

func (api *queueAPI) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := api.e.Stats(r.PathValue("queue"), api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (api *queueAPI) handleRedrive(w http.ResponseWriter, r *http.Request) {
	var req queues.RedriveRequest
	if err := decodeBody(w, r, QueueBodyMax, &req); err != nil {
		writeQueueError(w, err)
		return
	}
	t, err := api.e.Redrive(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeQueueError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, t)
}

type tasksResponse struct {
	Tasks []queues.TaskInfo `json:"tasks"`
}

func (api *queueAPI) handleTasks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, tasksResponse{Tasks: api.e.Tasks()})
}

func taskID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, &queues.Error{Code: queues.CodeTaskNotFound, Message: fmt.Sprintf("task %q does not exist (task ids are numbers)", r.PathValue("id"))}
	}
	return id, nil
}

func (api *queueAPI) handleTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err == nil {
		var t queues.TaskInfo
		if t, err = api.e.Task(id); err == nil {
			writeJSON(w, http.StatusOK, t)
			return
		}
	}
	writeQueueError(w, err)
}

func (api *queueAPI) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err == nil {
		var t queues.TaskInfo
		if t, err = api.e.CancelTask(id, api.now()); err == nil {
			writeJSON(w, http.StatusOK, t)
			return
		}
	}
	writeQueueError(w, err)
}
