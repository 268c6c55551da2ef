package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/queues"
)

// Request body limits of the queue API.
const (
	// QueueSendBodyMax bounds a send request: 16 MiB of messages plus JSON.
	QueueSendBodyMax = 17 << 20
	// QueueBodyMax bounds every other queue request.
	QueueBodyMax = 1 << 20
)

// queueBody is the body rule of every queue route but send.
var queueBody = bodyRule{limit: QueueBodyMax}

// QueuesConfig wires the queue routes.
type QueuesConfig struct {
	Engine *queues.Engine
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// queueAPI serves the native queue and DLQ resources under /v1.
type queueAPI struct {
	s     *Server
	e     *queues.Engine
	clock func() time.Time
}

// RegisterQueues adds the queue, message, DLQ and task routes. Call
// before Start.
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
func (s *Server) RegisterQueues(cfg QueuesConfig) {
	api := &queueAPI{s: s, e: cfg.Engine, clock: cfg.Now}
	if api.clock == nil {
		api.clock = time.Now
	}
	s.noteBodyLimit(QueueSendBodyMax)
	h := func(pattern string, f http.HandlerFunc) { s.Handle(pattern, f) }
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

type listQueuesResponse struct {
	Queues []queueInfoJSON `json:"queues"`
	Next   string          `json:"next,omitempty"`
}

// listLimitMax bounds the limit query parameter of a listing (0: the
// default, 100).
const listLimitMax = 1000

func (api *queueAPI) handleList(w http.ResponseWriter, r *http.Request) {
	limit, qerr := queryInt(r, "limit", 100, 0, listLimitMax)
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	// With an authorizer, the queues the principal may not describe are
	// left out, and further pages read until the page is full.
	n := int(limit)
	if n == 0 {
		n = 100
	}
	prefix, after := r.URL.Query().Get("prefix"), r.URL.Query().Get("after")
	out := []queueInfoJSON{}
	next := ""
	for next == "" {
		list, more, err := api.e.ListQueues(prefix, after, n)
		if err != nil {
			writeError(w, err)
			return
		}
		for i := range list {
			if visible(r, list[i].Name) {
				out = append(out, toQueueInfoJSON(&list[i]))
			}
			if len(out) == n && (i < len(list)-1 || more != "") {
				next = list[i].Name
				break
			}
		}
		if more == "" {
			break
		}
		after = more
	}
	writeJSON(w, http.StatusOK, listQueuesResponse{Queues: out, Next: next})
}

func (api *queueAPI) handleCreate(w http.ResponseWriter, r *http.Request) {
	var patch attributesPatchJSON
	if err := decodeBody(w, r, queueBody, &patch); err != nil {
		writeError(w, err)
		return
	}
	info, created, err := api.e.CreateQueue(r.PathValue("queue"), patch.patch(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, toQueueInfoJSON(&info))
}

func (api *queueAPI) handleGet(w http.ResponseWriter, r *http.Request) {
	info, err := api.e.GetQueue(r.PathValue("queue"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueInfoJSON(&info))
}

func (api *queueAPI) handleUpdate(w http.ResponseWriter, r *http.Request) {
	var patch attributesPatchJSON
	if err := decodeBody(w, r, queueBody, &patch); err != nil {
		writeError(w, err)
		return
	}
	info, err := api.e.UpdateQueue(r.PathValue("queue"), patch.patch(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toQueueInfoJSON(&info))
}

func (api *queueAPI) handleDelete(w http.ResponseWriter, r *http.Request) {
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, newNativeError("invalid_enum", "force=%q is not true or false", v).with("field", "force"))
			return
		}
		force = b
	}
	if err := api.e.DeleteQueue(r.PathValue("queue"), force, api.now()); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type resultsResponse[T any] struct {
	Results []T `json:"results"`
}

func (api *queueAPI) handleSend(w http.ResponseWriter, r *http.Request) {
	var req sendRequestJSON
	if err := decodeBody(w, r, bodyRule{limit: QueueSendBodyMax, reuse: true}, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := api.e.Send(r.PathValue("queue"), req.request(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeSendResults(w, res)
}

type messagesResponse struct {
	Messages []messageJSON `json:"messages"`
	Next     string        `json:"next,omitempty"`
	// Acks are the results of a receive's ack list, in its order.
	Acks []itemResultJSON `json:"acks,omitempty"`
}

func (api *queueAPI) browse(w http.ResponseWriter, r *http.Request, queue string) {
	limit, qerr := queryInt(r, "limit", 100, 0, listLimitMax)
	if qerr != nil {
		writeError(w, qerr)
		return
	}
	q := r.URL.Query()
	msgs, next, err := api.e.Browse(queue, queues.BrowseRequest{
		State: q.Get("state"), After: q.Get("after"), Limit: int(limit),
		Reason: q.Get("reason"), Source: q.Get("source"),
	}, api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeMessages(w, msgs, q.Get("body_encoding") == "base64", nil, next)
}

func (api *queueAPI) handleBrowse(w http.ResponseWriter, r *http.Request) {
	api.browse(w, r, r.PathValue("queue"))
}

func (api *queueAPI) handleDLQ(w http.ResponseWriter, r *http.Request) {
	info, err := api.e.GetQueue(r.PathValue("queue"))
	if err != nil {
		writeError(w, err)
		return
	}
	dlq := info.DeadLetterQueue
	if info.Kind == "dlq" {
		dlq = info.Name
	}
	if dlq == "" {
		writeError(w, newNativeError("queue_not_found", "queue %q has no dead-letter queue (dead_letter is none)", info.Name))
		return
	}
	api.browse(w, r, dlq)
}

func (api *queueAPI) handleGetMessage(w http.ResponseWriter, r *http.Request) {
	msg, err := api.e.GetMessage(r.PathValue("queue"), r.PathValue("id"), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toMessageJSON(&msg, false))
}

func (api *queueAPI) handleDeleteMessage(w http.ResponseWriter, r *http.Request) {
	if err := api.e.DeleteMessage(r.PathValue("queue"), r.PathValue("id"), api.now()); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleReceive leases messages, long-polling up to wait_ms when none is
// ready. A client that goes away before messages are found takes no lease.
// Server shutdown ends the wait: the request answers what it found.
func (api *queueAPI) handleReceive(w http.ResponseWriter, r *http.Request) {
	var body receiveRequestJSON
	if err := decodeBody(w, r, queueBody, &body); err != nil {
		writeError(w, err)
		return
	}
	req := body.request()
	name := r.PathValue("queue")
	wait, err := api.e.CheckReceive(name, &req)
	if err != nil {
		writeError(w, err)
		return
	}
	base64Bodies, e := checkBodyEncoding(body.BodyEncoding)
	if e != nil {
		writeError(w, e)
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
	stopping := false // the server shuts down: answer what was found
	var acks []queues.ItemResult
	receipts := req.Ack
	for first := true; ; first = false {
		var woken <-chan struct{}
		var cancel func()
		if wait > 0 {
			woken, cancel, err = api.e.Wait(name)
			if err != nil {
				writeError(w, deletedIfLater(err, first))
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
		if err != nil || len(msgs) > 0 || left <= 0 || stopping {
			if cancel != nil {
				cancel()
			}
			if err != nil {
				writeError(w, deletedIfLater(err, first))
				return
			}
			writeMessages(w, msgs, base64Bodies, acks, "")
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
		case <-api.s.stopping:
			stopping = true // one more try, then the loop answers
		case <-r.Context().Done():
			cancel()
			return
		}
		cancel()
	}
}

func deletedIfLater(err error, first bool) error {
	if !first && queues.AsError(err).Code == queues.CodeQueueNotFound {
		return newNativeError("queue_deleted", "the queue was deleted while this request waited")
	}
	return err
}

type receiptsRequest struct {
	Receipts []string `json:"receipts"`
}

func (api *queueAPI) handleAck(w http.ResponseWriter, r *http.Request) {
	var req receiptsRequest
	if err := decodeBody(w, r, queueBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := api.e.Ack(r.PathValue("queue"), req.Receipts, api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeItemResults(w, res)
}

func (api *queueAPI) handleDeleteReceipt(w http.ResponseWriter, r *http.Request) {
	res, err := api.e.Ack(r.PathValue("queue"), []string{r.PathValue("receipt")}, api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	if res[0].Error != nil {
		writeError(w, res[0].Error)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (api *queueAPI) handleNack(w http.ResponseWriter, r *http.Request) {
	var req nackRequestJSON
	if err := decodeBody(w, r, queueBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := api.e.Nack(r.PathValue("queue"), req.request(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeItemResults(w, res)
}

func (api *queueAPI) handleExtend(w http.ResponseWriter, r *http.Request) {
	var req extendRequestJSON
	if err := decodeBody(w, r, queueBody, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := api.e.Extend(r.PathValue("queue"), req.request(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeItemResults(w, res)
}

type purgeResponse struct {
	Deleted int64 `json:"deleted"`
}

// handlePurge deletes the messages {states, older_than_ms} selects; an
// empty body deletes every message.
func (api *queueAPI) handlePurge(w http.ResponseWriter, r *http.Request) {
	var req purgeRequestJSON
	if err := decodeBody(w, r, queueBody, &req); err != nil {
		writeError(w, err)
		return
	}
	n, err := api.e.PurgeMatching(r.PathValue("queue"), req.request(), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, purgeResponse{Deleted: n})
}

func (api *queueAPI) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := api.e.Stats(r.PathValue("queue"), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toStatsJSON(&st))
}

func (api *queueAPI) handleRedrive(w http.ResponseWriter, r *http.Request) {
	var body redriveRequestJSON
	if err := decodeBody(w, r, queueBody, &body); err != nil {
		writeError(w, err)
		return
	}
	req, e := body.request()
	if e != nil {
		writeError(w, e)
		return
	}
	// The messages are written to the destination: WRITE on it too (the
	// body's, else the queue this DLQ serves), as a send needs.
	dest := req.Destination
	if dest == "" {
		if info, err := api.e.GetQueue(r.PathValue("queue")); err == nil {
			dest = info.DeadLetterFor
		}
	}
	if dest != "" {
		if err := authorizeAlso(r, auth.ResourceQueue, dest, auth.OpWrite); err != nil {
			writeError(w, err)
			return
		}
	}
	t, err := api.e.Redrive(r.PathValue("queue"), req, api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, toTaskJSON(&t))
}

type tasksResponse struct {
	Tasks []taskJSON `json:"tasks"`
}

// handleTasks lists the tasks; with an authorizer only those on a queue
// the principal may describe (a redrive task's DLQ).
func (api *queueAPI) handleTasks(w http.ResponseWriter, r *http.Request) {
	tasks := api.e.Tasks()
	out := make([]taskJSON, 0, len(tasks))
	for i := range tasks {
		if visible(r, tasks[i].DLQ) {
			out = append(out, toTaskJSON(&tasks[i]))
		}
	}
	writeJSON(w, http.StatusOK, tasksResponse{Tasks: out})
}

func taskID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, newNativeError("task_not_found", "task %q does not exist (task ids are numbers)", r.PathValue("id"))
	}
	return id, nil
}

// handleTask shows one task; with an authorizer it needs DESCRIBE on the
// task's queue (its DLQ), as the tasks list.
func (api *queueAPI) handleTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err == nil {
		var t queues.TaskInfo
		if t, err = api.e.Task(id); err == nil {
			if err = checkFound(r, t.DLQ); err == nil {
				writeJSON(w, http.StatusOK, toTaskJSON(&t))
				return
			}
		}
	}
	writeError(w, err)
}

// handleCancelTask cancels a task; with an authorizer it needs ALTER on
// the task's queue (its DLQ), as starting the redrive did.
func (api *queueAPI) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	id, err := taskID(r)
	if err == nil {
		var t queues.TaskInfo
		if t, err = api.e.Task(id); err == nil {
			err = checkFound(r, t.DLQ)
		}
		if err == nil {
			t, err = api.e.CancelTask(id, api.now())
		}
		if err == nil {
			writeJSON(w, http.StatusOK, toTaskJSON(&t))
			return
		}
	}
	writeError(w, err)
}
