package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vibemq/broker/events"
)

// Durable consumers of event stores (NATIVE-QUEUE.md §4 "Tail"):
//
//	GET    /v1/stores/{store}/consumers                      list the store's consumers
//	PUT    /v1/stores/{store}/consumers/{consumer}           create {"start"} (201; 200 when it exists with
//	                                                         that start; 409 immutable_field with another)
//	GET    /v1/stores/{store}/consumers/{consumer}           describe: position, head_position, lag
//	DELETE /v1/stores/{store}/consumers/{consumer}           delete (204)
//	POST   /v1/stores/{store}/consumers/{consumer}/commit    {"position", "force"}: the next position to read
//
// A consumer's position is the next position it reads; only a commit moves
// it. GET /v1/stores/{store}/events?consumer=c (and its long-poll and SSE
// forms) starts at that position when from is not given.

func (api *eventsAPI) registerConsumers() {
	s := api.s
	s.Handle("GET /v1/stores/{store}/consumers", http.HandlerFunc(api.handleListConsumers))
	s.Handle("PUT /v1/stores/{store}/consumers/{consumer}", http.HandlerFunc(api.handleCreateConsumer))
	s.Handle("GET /v1/stores/{store}/consumers/{consumer}", http.HandlerFunc(api.handleGetConsumer))
	s.Handle("DELETE /v1/stores/{store}/consumers/{consumer}", http.HandlerFunc(api.handleDeleteConsumer))
	s.Handle("POST /v1/stores/{store}/consumers/{consumer}/commit", http.HandlerFunc(api.handleCommitConsumer))
}

// consumerJSON describes a consumer in responses.
type consumerJSON struct {
	Consumer string `json:"consumer"`
	Store    string `json:"store"`
	// Start is the start it was created with, normalized.
	Start string `json:"start"`
	// Position is the checkpoint: the next position the consumer reads.
	Position int64 `json:"position"`
	// HeadPosition is the store's next position (as in store reads).
	HeadPosition  int64 `json:"head_position"`
	FirstPosition int64 `json:"first_position"`
	// Lag is how many readable events lie at or after Position.
	Lag int64 `json:"lag"`
	// Truncated is true when Position is below FirstPosition: a read
	// starts at FirstPosition.
	Truncated bool   `json:"truncated"`
	CreatedAt string `json:"created_at"`
	CreatedMs int64  `json:"created_ms"`
	UpdatedAt string `json:"updated_at"`
	UpdatedMs int64  `json:"updated_ms"`
}

func toConsumerJSON(st *events.Store, c events.ConsumerInfo) consumerJSON {
	first, head := st.FirstPosition(), st.NextPosition()
	return consumerJSON{
		Consumer:      c.Name,
		Store:         st.Name(),
		Start:         c.Start,
		Position:      c.Position,
		HeadPosition:  head,
		FirstPosition: first,
		Lag:           max(head-max(c.Position, first), 0),
		Truncated:     c.Position < first,
		CreatedAt:     formatMillis(c.CreatedMs),
		CreatedMs:     c.CreatedMs,
		UpdatedAt:     formatMillis(c.UpdatedMs),
		UpdatedMs:     c.UpdatedMs,
	}
}

// consumerRequest is the body of PUT …/consumers/{consumer}.
type consumerRequest struct {
	// Start is first (default), last, new, pos:N (or N), time:RFC3339 or
	// delta:DURATION, as the from of a store read.
	Start string `json:"start"`
}

// commitRequest is the body of POST …/consumers/{consumer}/commit.
type commitRequest struct {
	// Position is the next position the consumer reads, 0 to the store's
	// next position.
	Position *int64 `json:"position"`
	// Force allows a position below the checkpoint (a rewind).
	Force bool `json:"force"`
}

// normalizeStart returns the canonical form of a consumer start (pos:N,
// time in UTC), or an invalid_from error naming the start field.
func normalizeStart(v string) (string, *nativeError) {
	bad := func() (string, *nativeError) {
		return "", newNativeError("invalid_from", "start must be first, last, new, pos:N, time:RFC3339 or delta:DURATION, not %q", v).with("field", "start")
	}
	switch {
	case v == "first" || v == "last" || v == "new":
		return v, nil
	case strings.HasPrefix(v, "time:"):
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(v, "time:"))
		if err != nil {
			return bad()
		}
		return "time:" + t.UTC().Format(time.RFC3339Nano), nil
	case strings.HasPrefix(v, "delta:"):
		d, err := time.ParseDuration(strings.TrimPrefix(v, "delta:"))
		if err != nil || d < 0 {
			return bad()
		}
		return "delta:" + d.String(), nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "pos:"), 10, 64)
	if err != nil || n < 0 {
		return bad()
	}
	return "pos:" + strconv.FormatInt(n, 10), nil
}

// consumerName validates the {consumer} path value.
func consumerName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("consumer")
	if err := events.ValidateConsumerName(name); err != nil {
		writeError(w, err)
		return "", false
	}
	return name, true
}

func (api *eventsAPI) handleListConsumers(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	list, err := st.Consumers()
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]consumerJSON, len(list))
	for i, c := range list {
		out[i] = toConsumerJSON(st, c)
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumers": out})
}

func (api *eventsAPI) handleCreateConsumer(w http.ResponseWriter, r *http.Request) {
	req := consumerRequest{}
	if r.ContentLength != 0 {
		if e := decodeBody(w, r, bodyRule{limit: 4096, required: true}, &req); e != nil {
			writeError(w, e)
			return
		}
	}
	if req.Start == "" {
		req.Start = "first"
	}
	start, e := normalizeStart(req.Start)
	if e != nil {
		writeError(w, e)
		return
	}
	name, ok := consumerName(w, r)
	if !ok {
		return
	}
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	pos, e := api.parseFrom(st, start)
	if e != nil {
		writeError(w, e.with("field", "start"))
		return
	}
	c, created, err := st.CreateConsumer(name, start, pos, api.now())
	if err != nil {
		ne := errorOf(err)
		if ne.Code == "immutable_field" {
			ne.with("field", "start").with("current", c.Start).with("requested", start)
		}
		writeError(w, ne)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, toConsumerJSON(st, c))
}

func (api *eventsAPI) handleGetConsumer(w http.ResponseWriter, r *http.Request) {
	name, ok := consumerName(w, r)
	if !ok {
		return
	}
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	c, err := st.Consumer(name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toConsumerJSON(st, c))
}

func (api *eventsAPI) handleDeleteConsumer(w http.ResponseWriter, r *http.Request) {
	name, ok := consumerName(w, r)
	if !ok {
		return
	}
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	if err := st.DeleteConsumer(name); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (api *eventsAPI) handleCommitConsumer(w http.ResponseWriter, r *http.Request) {
	var req commitRequest
	if e := decodeBody(w, r, bodyRule{limit: 4096, required: true}, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Position == nil {
		writeError(w, newNativeError("invalid_body", "position is required: the next position the consumer reads").with("field", "position"))
		return
	}
	name, ok := consumerName(w, r)
	if !ok {
		return
	}
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	c, err := st.CommitConsumer(name, *req.Position, req.Force, api.now())
	if err != nil {
		ne := errorOf(err)
		if ne.Code == "out_of_range" {
			ne.with("field", "position").with("min", 0).with("max", st.NextPosition())
		}
		writeError(w, ne)
		return
	}
	writeJSON(w, http.StatusOK, toConsumerJSON(st, c))
}

// consumerFrom resolves the consumer query parameter of a store read: the
// consumer's checkpoint (the read starts there unless from is given).
func consumerFrom(st *events.Store, name string) (int64, *nativeError) {
	if err := events.ValidateConsumerName(name); err != nil {
		return 0, errorOf(err).with("field", "consumer")
	}
	c, err := st.Consumer(name)
	if err != nil {
		return 0, errorOf(err)
	}
	return c.Position, nil
}
