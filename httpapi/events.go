package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vibemq/broker/events"
)

// Event store routes (NATIVE-QUEUE.md §4 and §6):
//
//	GET    /v1/stores                                   list stores
//	PUT    /v1/stores/{store}                           create a store (201, or 200 when it exists)
//	GET    /v1/stores/{store}                           describe a store
//	DELETE /v1/stores/{store}                           delete a store and its topic (204)
//	POST   /v1/stores/{store}/streams/{stream}/events   append (201; 200 for an idempotent retry)
//	GET    /v1/stores/{store}/streams/{stream}/events   read a stream forward or backward
//	GET    /v1/stores/{store}/streams/{stream}          describe a stream (also a deleted one)
//	DELETE /v1/stores/{store}/streams/{stream}          delete a stream: soft, or tombstone with hard=true;
//	                                                    expected_revision any|exists|N
//	GET    /v1/stores/{store}/events                    read the whole store; long-poll with wait_ms;
//	                                                    Server-Sent Events with Accept: text/event-stream;
//	                                                    consumer=c starts at c's checkpoint
//	…/consumers[/{consumer}[/commit]]                   durable consumers (consumers.go)
//
// An append to a store that does not exist creates it.

// Limits and defaults of the event routes.
const (
	eventsWaitMaxMs    = 60000
	eventsHeartbeat    = 15 * time.Second
	eventsSSEPageLimit = 1000
)

// EventsConfig wires the event store routes.
type EventsConfig struct {
	Events *events.Service
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Heartbeat is the idle interval between SSE comments (15s when 0).
	Heartbeat time.Duration
}

type eventsAPI struct {
	s         *Server
	svc       *events.Service
	now       func() time.Time
	heartbeat time.Duration
	bodyLimit int64
}

// RegisterEvents adds the event store routes. Call before Start.
func (s *Server) RegisterEvents(cfg EventsConfig) {
	api := &eventsAPI{s: s, svc: cfg.Events, now: cfg.Now, heartbeat: cfg.Heartbeat}
	if api.now == nil {
		api.now = time.Now
	}
	if api.heartbeat <= 0 {
		api.heartbeat = eventsHeartbeat
	}
	limits := cfg.Events.Limits()
	// Base64 data grows by 4/3; allow for the JSON around it.
	api.bodyLimit = int64(limits.MaxAppendBytes)*4/3 + 1<<20
	s.noteBodyLimit(api.bodyLimit)

	s.Handle("GET /v1/stores", http.HandlerFunc(api.handleListStores))
	s.Handle("PUT /v1/stores/{store}", http.HandlerFunc(api.handleCreateStore))
	s.Handle("GET /v1/stores/{store}", http.HandlerFunc(api.handleGetStore))
	s.Handle("DELETE /v1/stores/{store}", http.HandlerFunc(api.handleDeleteStore))
	s.Handle("POST /v1/stores/{store}/streams/{stream}/events", http.HandlerFunc(api.handleAppend))
	s.Handle("GET /v1/stores/{store}/streams/{stream}/events", http.HandlerFunc(api.handleReadStream))
	s.Handle("GET /v1/stores/{store}/streams", http.HandlerFunc(api.handleListStreams))
	s.Handle("GET /v1/stores/{store}/streams/{stream}", http.HandlerFunc(api.handleGetStream))
	s.Handle("DELETE /v1/stores/{store}/streams/{stream}", http.HandlerFunc(api.handleDeleteStream))
	s.Handle("GET /v1/stores/{store}/events", http.HandlerFunc(api.handleReadAll))
	api.registerConsumers()
}

// eventsError maps an events error to the API's code. Failures of the
// store (events.ErrStorage) are storageError's, before this.
func eventsError(err error) *nativeError {
	var wrong *events.WrongExpectedRevisionError
	var regression *events.CheckpointRegressionError
	switch {
	case errors.As(err, &wrong):
		e := newNativeError("wrong_expected_revision", "%s", strings.TrimPrefix(err.Error(), "events: "))
		e.with("expected", wrong.Expected.String()).with("current_state", wrong.CurrentState())
		if wrong.CurrentRevision >= 0 && !wrong.Deleted {
			e.with("current_revision", wrong.CurrentRevision)
		} else {
			e.with("current_revision", nil)
		}
		return e
	case errors.As(err, &regression):
		return newNativeError("checkpoint_regression", "%s", trimEvents(err)).
			with("position", regression.Position).with("current_position", regression.Current)
	case errors.Is(err, events.ErrStoreNotFound):
		return newNativeError("store_not_found", "%s", trimEvents(err))
	case errors.Is(err, events.ErrStreamNotFound):
		e := newNativeError("stream_not_found", "%s", trimEvents(err))
		switch {
		case errors.Is(err, events.ErrStreamDeleted):
			e.with("state", events.StreamStateDeleted)
		case errors.Is(err, events.ErrStreamTombstoned):
			e.with("state", events.StreamStateTombstoned)
		}
		return e
	case errors.Is(err, events.ErrStreamTombstoned):
		return newNativeError("stream_tombstoned", "%s", trimEvents(err)).with("state", events.StreamStateTombstoned)
	case errors.Is(err, events.ErrTopicExists):
		return newNativeError("topic_exists", "%s", trimEvents(err))
	case errors.Is(err, events.ErrConsumerNotFound):
		return newNativeError("consumer_not_found", "%s", trimEvents(err))
	case errors.Is(err, events.ErrConsumerExists):
		return newNativeError("immutable_field", "%s", trimEvents(err))
	case errors.Is(err, events.ErrTooManyConsumers):
		return newNativeError("out_of_range", "%s", trimEvents(err)).with("max", events.MaxConsumersPerStore)
	case errors.Is(err, events.ErrInvalidConsumerName):
		return newNativeError("invalid_name", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidStoreName):
		return newNativeError("invalid_name", "%s", trimEvents(err))
	case errors.Is(err, events.ErrReservedName):
		return newNativeError("reserved_name", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidStream):
		return newNativeError("invalid_stream", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidType):
		return newNativeError("invalid_type", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidEventID):
		return newNativeError("invalid_id", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidMetadata):
		return newNativeError("invalid_body", "%s", trimEvents(err))
	case errors.Is(err, events.ErrInvalidExpected):
		return newNativeError("invalid_expected_revision", "%s", trimEvents(err))
	case errors.Is(err, events.ErrDuplicateEventID):
		return newNativeError("duplicate_event_id", "%s", trimEvents(err))
	case errors.Is(err, events.ErrEventTooLarge):
		return newNativeError("message_too_large", "%s", trimEvents(err))
	case errors.Is(err, events.ErrAppendTooLarge):
		return newNativeError("request_too_large", "%s", trimEvents(err))
	case errors.Is(err, events.ErrOutOfRange):
		return newNativeError("out_of_range", "%s", trimEvents(err))
	case errors.Is(err, events.ErrIdempotencyConflict):
		return newNativeError("idempotency_conflict", "%s", trimEvents(err))
	}
	return newNativeError("internal", "%v", err)
}

// trimEvents drops the package prefixes of a domain error for people.
func trimEvents(err error) string {
	msg := err.Error()
	for strings.Contains(msg, "events: ") {
		i := strings.Index(msg, "events: ")
		msg = msg[:i] + msg[i+len("events: "):]
	}
	return msg
}

// eventJSON is an event in responses.
type eventJSON struct {
	Position int64  `json:"position"`
	Stream   string `json:"stream"`
	// Revision is null for a record a Kafka client wrote into the store's topic.
	Revision    *int64         `json:"revision"`
	ID          string         `json:"id,omitempty"`
	Type        string         `json:"type"`
	Data        jsontext.Value `json:"data,omitempty"`
	DataBase64  *string        `json:"data_base64,omitempty"`
	Metadata    jsontext.Value `json:"metadata,omitempty"`
	Timestamp   string         `json:"timestamp"`
	TimestampMs int64          `json:"timestamp_ms"`
}

func toEventJSON(e *events.Event) eventJSON {
	out := eventJSON{
		Position:    e.Position,
		Stream:      e.Stream,
		ID:          e.ID,
		Type:        e.Type,
		Timestamp:   formatMillis(e.Timestamp),
		TimestampMs: e.Timestamp,
	}
	if e.Revision >= 0 {
		rev := e.Revision
		out.Revision = &rev
	}
	if e.ContentType == events.ContentTypeJSON {
		out.Data = e.Data
	} else {
		b := base64.StdEncoding.EncodeToString(e.Data)
		out.DataBase64 = &b
	}
	if len(e.Metadata) > 0 && json.Valid(e.Metadata) {
		out.Metadata = e.Metadata
	}
	return out
}

func toEventsJSON(evs []events.Event) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i := range evs {
		out[i] = toEventJSON(&evs[i])
	}
	return out
}

func (api *eventsAPI) store(w http.ResponseWriter, r *http.Request) (*events.Store, bool) {
	st, err := api.svc.Store(r.PathValue("store"))
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return st, true
}

func (api *eventsAPI) handleListStores(w http.ResponseWriter, r *http.Request) {
	stores := api.svc.Stores()
	out := make([]storeInfoJSON, 0, len(stores))
	for _, st := range stores {
		if info := st.Info(); visible(r, info.Name) { // with an authorizer, the stores it may describe
			out = append(out, storeInfoJSON(info))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"stores": out})
}

func (api *eventsAPI) handleCreateStore(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		var body struct{}
		if e := decodeBody(w, r, bodyRule{limit: 4096, required: true}, &body); e != nil {
			writeError(w, e)
			return
		}
	}
	st, created, err := api.svc.CreateStore(r.PathValue("store"), api.now())
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, storeInfoJSON(st.Info()))
}

func (api *eventsAPI) handleGetStore(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, storeInfoJSON(st.Info()))
}

func (api *eventsAPI) handleDeleteStore(w http.ResponseWriter, r *http.Request) {
	if err := api.svc.DeleteStore(r.PathValue("store")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// appendRequest is the body of an append.
type appendRequest struct {
	// ExpectedRevision is "any" (default), "no_stream", "exists", or a
	// revision number (JSON number or string).
	ExpectedRevision jsontext.Value `json:"expected_revision"`
	Events           appendEvents   `json:"events"`
}

// appendEvents is the events array of an append, decoded one element at a
// time so that it is refused at the first event past max: decoded whole,
// a body of tiny events ("{}," is 3 bytes) cost about 150 bytes of
// allocations per body byte before its events could be counted.
type appendEvents struct {
	max  int
	list []appendEventJSON
}

// tooManyEventsError is an events array longer than the append limit
// (or, with none, an empty one).
type tooManyEventsError struct {
	max  int
	none bool
}

func (e *tooManyEventsError) Error() string {
	if e.none {
		return fmt.Sprintf("an append holds 1 to %d events, this one none", e.max)
	}
	return fmt.Sprintf("an append holds 1 to %d events, this one more", e.max)
}

func (e *tooManyEventsError) nativeError() *nativeError {
	return newNativeError("out_of_range", "%s", e.Error()).with("field", "events").with("min", 1).with("max", e.max)
}

// UnmarshalJSONFrom reads the events array element by element from the
// one strict decoder's stream (decodeBody), refusing it at the first event
// past max.
func (a *appendEvents) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		a.list = nil // null: no events
		return err
	case '[':
	default:
		// Let the decoder report the mismatch (invalid_json, field events).
		var list []appendEventJSON
		return jsonv2.UnmarshalDecode(dec, &list)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	a.list = a.list[:0]
	for dec.PeekKind() != ']' {
		if len(a.list) >= a.max {
			return &tooManyEventsError{max: a.max}
		}
		var e appendEventJSON
		if err := jsonv2.UnmarshalDecode(dec, &e); err != nil {
			return err
		}
		a.list = append(a.list, e)
	}
	_, err := dec.ReadToken()
	return err
}

type appendEventJSON struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Data       jsontext.Value `json:"data"`
	DataBase64 *string        `json:"data_base64"`
	Metadata   jsontext.Value `json:"metadata"`
}

// storeInfoJSON is events.Info on the wire.
type storeInfoJSON struct {
	Name          string `json:"name"`
	FirstPosition int64  `json:"first_position"`
	NextPosition  int64  `json:"next_position"`
	Streams       int64  `json:"streams"`
	CreatedMs     int64  `json:"created_ms"`
	TopicID       string `json:"topic_id"`
}

// appendResponse is events.AppendResult on the wire, with the expected
// revision of the stream's next append.
type appendResponse struct {
	FirstPosition        int64    `json:"first_position"`
	LastPosition         int64    `json:"last_position"`
	FirstRevision        int64    `json:"first_revision"`
	LastRevision         int64    `json:"last_revision"`
	Idempotent           bool     `json:"idempotent"`
	EventIDs             []string `json:"event_ids"`
	NextExpectedRevision int64    `json:"next_expected_revision"`
}

func parseExpectedJSON(raw jsontext.Value) (events.ExpectedRevision, *nativeError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return events.Any, nil
	}
	if s[0] == '"' {
		var str string
		if err := jsonv2.Unmarshal(raw, &str); err != nil {
			return events.Any, newNativeError("invalid_expected_revision", "expected_revision is not a valid JSON string")
		}
		s = str
	}
	exp, err := events.ParseExpectedRevision(s)
	if err != nil || s == "" {
		return events.Any, newNativeError("invalid_expected_revision",
			"expected_revision %s is not \"any\", \"no_stream\", \"exists\" or a revision number >= 0", string(raw)).with("field", "expected_revision")
	}
	return exp, nil
}

func (api *eventsAPI) handleAppend(w http.ResponseWriter, r *http.Request) {
	storeName, stream := r.PathValue("store"), r.PathValue("stream")
	if err := events.ValidateStoreName(storeName); err != nil {
		writeError(w, err)
		return
	}
	if err := events.ValidateStream(stream); err != nil {
		writeError(w, err)
		return
	}
	limits := api.svc.Limits()
	req := appendRequest{Events: appendEvents{max: limits.MaxAppendEvents}}
	if e := decodeBody(w, r, bodyRule{limit: api.bodyLimit, required: true}, &req); e != nil {
		writeError(w, e)
		return
	}
	expected, e := parseExpectedJSON(req.ExpectedRevision)
	if e != nil {
		writeError(w, e)
		return
	}
	if len(req.Events.list) == 0 {
		writeError(w, (&tooManyEventsError{max: limits.MaxAppendEvents, none: true}).nativeError())
		return
	}
	proposed := make([]events.ProposedEvent, len(req.Events.list))
	for i, in := range req.Events.list {
		field := fmt.Sprintf("events[%d]", i)
		p := events.ProposedEvent{ID: in.ID, Type: in.Type, ContentType: events.ContentTypeJSON}
		switch {
		case in.DataBase64 != nil && len(in.Data) > 0:
			writeError(w, newNativeError("conflicting_fields", "%s has both data and data_base64; send one", field).with("field", field))
			return
		case in.DataBase64 != nil:
			data, err := base64.StdEncoding.DecodeString(*in.DataBase64)
			if err != nil {
				writeError(w, newNativeError("invalid_base64", "%s.data_base64 is not standard base64: %v", field, err).with("field", field+".data_base64"))
				return
			}
			p.Data, p.ContentType = data, events.ContentTypeBinary
		case len(in.Data) > 0:
			p.Data = in.Data
		default:
			p.Data = []byte("null")
		}
		if m := strings.TrimSpace(string(in.Metadata)); m != "" && m != "null" {
			p.Metadata = in.Metadata
		}
		proposed[i] = p
	}
	st, err := api.svc.Store(storeName)
	if errors.Is(err, events.ErrStoreNotFound) {
		// Checked before the store is created on first append, so that a
		// refused append leaves nothing behind (Append checks again).
		if err := api.svc.CheckSpace(); err != nil {
			writeError(w, err)
			return
		}
		st, _, err = api.svc.CreateStore(storeName, api.now())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := st.Append(stream, expected, proposed, api.now())
	if err != nil {
		ne := errorOf(err)
		if msg := err.Error(); strings.HasPrefix(msg, "event ") {
			if i := strings.IndexByte(msg, ':'); i > 0 {
				if n, convErr := strconv.Atoi(msg[len("event "):i]); convErr == nil {
					ne.with("field", fmt.Sprintf("events[%d]", n))
				}
			}
		}
		writeError(w, ne)
		return
	}
	status := http.StatusCreated
	if res.Idempotent {
		status = http.StatusOK
	}
	writeJSON(w, status, appendResponse{FirstPosition: res.FirstPosition, LastPosition: res.LastPosition,
		FirstRevision: res.FirstRevision, LastRevision: res.LastRevision, Idempotent: res.Idempotent,
		EventIDs: res.EventIDs, NextExpectedRevision: res.NextExpectedRevision()})
}

type streamPageJSON struct {
	Stream       string      `json:"stream"`
	Events       []eventJSON `json:"events"`
	NextRevision int64       `json:"next_revision"`
	HeadRevision int64       `json:"head_revision"`
	EndOfStream  bool        `json:"end_of_stream"`
}

func (api *eventsAPI) handleReadStream(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	backward := false
	switch d := q.Get("direction"); d {
	case "", "forward":
	case "backward":
		backward = true
	default:
		writeError(w, newNativeError("invalid_enum", "direction must be forward or backward, not %q", d).with("field", "direction"))
		return
	}
	from := int64(0)
	if backward {
		from = events.FromEnd
	}
	switch v := q.Get("from_revision"); v {
	case "":
	case "start":
		from = 0
	case "end":
		if !backward {
			writeError(w, newNativeError("invalid_from", "from_revision=end reads backward; add direction=backward").with("field", "from_revision"))
			return
		}
		from = events.FromEnd
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, newNativeError("invalid_from", "from_revision must be a revision number >= 0, start or end, not %q", v).with("field", "from_revision"))
			return
		}
		from = n
	}
	limit, e := queryInt(r, "limit", events.DefaultReadLimit, 1, events.MaxReadLimit)
	if e != nil {
		writeError(w, e)
		return
	}
	maxBytes, e := queryInt(r, "max_bytes", events.DefaultReadBytes, 1024, events.MaxReadBytes)
	if e != nil {
		writeError(w, e)
		return
	}
	stream := r.PathValue("stream")
	page, err := st.ReadStream(stream, from, backward, int(limit), int(maxBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, streamPageJSON{
		Stream:       stream,
		Events:       toEventsJSON(page.Events),
		NextRevision: page.NextRevision,
		HeadRevision: page.HeadRevision,
		EndOfStream:  page.EndOfStream,
	})
}

// streamInfoJSON describes a stream in responses.
type streamInfoJSON struct {
	Stream string `json:"stream"`
	// State is live, deleted or tombstoned.
	State string `json:"state"`
	// HeadRevision is the stream's last revision; the next append gets
	// head_revision+1.
	HeadRevision int64 `json:"head_revision"`
	// FirstRevision is the first revision reads show (after a deletion).
	FirstRevision int64 `json:"first_revision"`
	// DeletedAtRevision is the last revision before the last deletion.
	DeletedAtRevision *int64 `json:"deleted_at_revision,omitempty"`
	HeadPosition      *int64 `json:"head_position,omitempty"`
	LastEventAt       string `json:"last_event_at,omitempty"`
}

func toStreamInfoJSON(info events.StreamInfo) streamInfoJSON {
	out := streamInfoJSON{Stream: info.Stream, State: info.State, HeadRevision: info.HeadRevision, FirstRevision: info.FirstRevision}
	if d := info.DeletedAtRevision(); d >= 0 {
		out.DeletedAtRevision = &d
	}
	if info.HeadPosition >= 0 {
		pos := info.HeadPosition
		out.HeadPosition = &pos
		out.LastEventAt = formatMillis(info.LastEventMs)
	}
	return out
}

func (api *eventsAPI) handleGetStream(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	info, err := st.Stream(r.PathValue("stream"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toStreamInfoJSON(info))
}

// handleDeleteStream deletes a stream: soft by default (no_stream or any
// appends start it again, revisions continuing), for good with hard=true.
// expected_revision (any, exists or N) makes it conditional. The answer is
// the stream's description afterwards.
func (api *eventsAPI) handleDeleteStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	hard := false
	switch v := q.Get("hard"); v {
	case "", "false":
	case "true":
		hard = true
	default:
		writeError(w, newNativeError("invalid_enum", "hard must be true or false, not %q", v).with("field", "hard"))
		return
	}
	expected := events.Any
	if v := q.Get("expected_revision"); v != "" {
		exp, err := events.ParseExpectedRevision(v)
		if err != nil || exp.Kind == events.ExpectNoStream {
			writeError(w, newNativeError("invalid_expected_revision",
				"expected_revision %q of a delete is not any, exists or a revision number >= 0", v).with("field", "expected_revision"))
			return
		}
		expected = exp
	}
	if err := events.ValidateStream(r.PathValue("stream")); err != nil {
		writeError(w, err)
		return
	}
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	info, err := st.DeleteStream(r.PathValue("stream"), expected, hard)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toStreamInfoJSON(info))
}

// parseFrom resolves the from parameter of a store read: first, last, new,
// a position (N or pos:N), time:RFC3339 or delta:DURATION (that long ago).
func (api *eventsAPI) parseFrom(st *events.Store, v string) (int64, *nativeError) {
	bad := func(format string, args ...any) (int64, *nativeError) {
		return 0, newNativeError("invalid_from", format, args...).with("field", "from")
	}
	switch {
	case v == "first":
		return st.FirstPosition(), nil
	case v == "new":
		return st.NextPosition(), nil
	case v == "last":
		return max(st.NextPosition()-1, st.FirstPosition()), nil
	case strings.HasPrefix(v, "time:"):
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(v, "time:"))
		if err != nil {
			return bad("from=%s: the time is not RFC 3339, e.g. time:2025-01-31T12:00:00Z", v)
		}
		pos, perr := st.PositionAt(t.UnixMilli())
		if perr != nil {
			return 0, errorOf(perr)
		}
		return pos, nil
	case strings.HasPrefix(v, "delta:"):
		d, err := time.ParseDuration(strings.TrimPrefix(v, "delta:"))
		if err != nil || d < 0 {
			return bad("from=%s: the delta is not a positive Go duration, e.g. delta:15m", v)
		}
		pos, perr := st.PositionAt(api.now().Add(-d).UnixMilli())
		if perr != nil {
			return 0, errorOf(perr)
		}
		return pos, nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(v, "pos:"), 10, 64)
	if err != nil || n < 0 {
		return bad("from must be first, last, new, a position, pos:N, time:RFC3339 or delta:DURATION, not %q", v)
	}
	return n, nil
}

type allPageJSON struct {
	Events        []eventJSON `json:"events"`
	NextPosition  int64       `json:"next_position"`
	HeadPosition  int64       `json:"head_position"`
	FirstPosition int64       `json:"first_position"`
	Truncated     bool        `json:"truncated"`
}

// readAllParams are the parsed parameters of a store read.
type readAllParams struct {
	from     int64
	limit    int
	maxBytes int
	wait     time.Duration
	filter   func(string) bool
}

func (api *eventsAPI) parseReadAll(r *http.Request, st *events.Store, defaultFrom string) (readAllParams, *nativeError) {
	var p readAllParams
	q := r.URL.Query()
	from := q.Get("from")
	var e *nativeError
	if q.Has("consumer") {
		// Checked even when from is given, so that a misspelled consumer
		// is not silently ignored.
		pos, e := consumerFrom(st, q.Get("consumer"))
		if e != nil {
			return p, e
		}
		p.from = pos
	}
	if from != "" || !q.Has("consumer") {
		if from == "" {
			from = defaultFrom
		}
		if p.from, e = api.parseFrom(st, from); e != nil {
			return p, e
		}
	}
	limit, e := queryInt(r, "limit", events.DefaultReadLimit, 1, events.MaxReadLimit)
	if e != nil {
		return p, e
	}
	maxBytes, e := queryInt(r, "max_bytes", events.DefaultReadBytes, 1024, events.MaxReadBytes)
	if e != nil {
		return p, e
	}
	waitMs, e := queryInt(r, "wait_ms", 0, 0, eventsWaitMaxMs)
	if e != nil {
		return p, e
	}
	p.limit, p.maxBytes, p.wait = int(limit), int(maxBytes), time.Duration(waitMs)*time.Millisecond
	stream, prefix := q.Get("stream"), q.Get("stream_prefix")
	switch {
	case stream != "" && prefix != "":
		return p, newNativeError("conflicting_fields", "give stream or stream_prefix, not both").with("field", "stream_prefix")
	case stream != "":
		p.filter = func(s string) bool { return s == stream }
	case prefix != "":
		p.filter = func(s string) bool { return strings.HasPrefix(s, prefix) }
	}
	return p, nil
}

func wantsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return true
		}
	}
	return false
}

func (api *eventsAPI) handleReadAll(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	if wantsEventStream(r) {
		api.serveSSE(w, r, st)
		return
	}
	p, e := api.parseReadAll(r, st, "first")
	if e != nil {
		writeError(w, e)
		return
	}
	if p.wait > 0 {
		release, ok := api.s.acquireStream(w)
		if !ok {
			return
		}
		defer release()
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.wait + api.s.cfg.WriteTimeout))
	}
	page, err := api.longPoll(r.Context(), st, p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, allPageJSON{
		Events:        toEventsJSON(page.Events),
		NextPosition:  page.NextPosition,
		HeadPosition:  page.HeadPosition,
		FirstPosition: page.FirstPosition,
		Truncated:     page.Truncated,
	})
}

// longPoll reads from p.from and, when nothing matched and the read caught
// up with the store, waits up to p.wait for new events.
func (api *eventsAPI) longPoll(ctx context.Context, st *events.Store, p readAllParams) (events.AllPage, error) {
	var deadline <-chan time.Time
	var wake chan struct{}
	pos := p.from
	truncated := false
	for {
		page, err := st.ReadAll(pos, p.limit, p.maxBytes, p.filter)
		if err != nil {
			return page, err
		}
		page.Truncated = page.Truncated || truncated
		truncated = page.Truncated
		if len(page.Events) > 0 || p.wait <= 0 {
			return page, nil
		}
		pos = page.NextPosition
		if wake == nil {
			wake = make(chan struct{}, 1)
			st.AddWaiter(wake)
			defer st.RemoveWaiter(wake)
			timer := time.NewTimer(p.wait)
			defer timer.Stop()
			deadline = timer.C
			continue // re-check after registering: no wake-up is lost
		}
		// A deleted store's log reads as empty, not as an error; checked
		// after registering, so a deletion is never waited out.
		if st.Deleted() {
			return page, fmt.Errorf("%w: %q was deleted", events.ErrStoreNotFound, st.Name())
		}
		if pos < st.NextPosition() {
			// A filtered read stopped before the end; keep scanning
			// unless the time is up.
			select {
			case <-deadline:
				return page, nil
			default:
				continue
			}
		}
		select {
		case <-wake:
		case <-deadline:
			return page, nil
		case <-ctx.Done():
			return page, nil
		case <-api.s.stopping:
			return page, nil
		}
	}
}

// serveSSE tails the store as Server-Sent Events: one "id: <position>",
// "event: <type>", "data: <event JSON>" message per event, a comment every
// heartbeat while idle. It resumes after Last-Event-ID when the client
// sends one, else starts at from (default new). It reads from the log, so
// a slow client falls behind without the broker buffering for it.
func (api *eventsAPI) serveSSE(w http.ResponseWriter, r *http.Request, st *events.Store) {
	p, e := api.sseParams(r, st)
	if e != nil {
		writeError(w, e)
		return
	}
	release, ok := api.s.acquireStream(w)
	if !ok {
		return
	}
	defer release()
	out := &sseWriter{s: api.s, w: w, r: r, rc: http.NewResponseController(w)}
	out.conn, _ = r.Context().Value(connKey{}).(net.Conn)
	if !api.s.addTail(out) {
		writeError(w, newNativeError("shutting_down", "the broker is shutting down; retry on another broker or after its restart"))
		return
	}
	defer api.s.removeTail(out)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !out.write([]byte("retry: 1000\n\n")) || !out.flush() {
		return
	}

	wake := make(chan struct{}, 1)
	st.AddWaiter(wake)
	defer st.RemoveWaiter(wake)
	heartbeat := time.NewTicker(api.heartbeat)
	defer heartbeat.Stop()
	pos := p.from
	for {
		page, err := st.ReadAll(pos, eventsSSEPageLimit, p.maxBytes, p.filter)
		if err != nil {
			out.sendError(err)
			return
		}
		if !out.page(page.Events) {
			return
		}
		pos = page.NextPosition
		if pos < st.NextPosition() {
			select {
			case <-r.Context().Done():
				return
			case <-api.s.stopping:
				return
			default:
				continue
			}
		}
		// Caught up. A deleted store's log reads as empty, not as an
		// error: without this check the tail would idle on heartbeats
		// forever. Checked after AddWaiter, so no deletion is missed.
		if st.Deleted() {
			out.sendError(fmt.Errorf("%w: %q was deleted", events.ErrStoreNotFound, st.Name()))
			return
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			if !out.write([]byte(": heartbeat\n\n")) || !out.flush() {
				return
			}
		case <-r.Context().Done():
			return
		case <-api.s.stopping:
			return
		}
	}
}

// sseParams reads a tail's parameters: those of a store read (from
// defaulting to new), then Last-Event-ID, which resumes after the event it
// names; a start past the store's next position is out_of_range.
func (api *eventsAPI) sseParams(r *http.Request, st *events.Store) (readAllParams, *nativeError) {
	p, e := api.parseReadAll(r, st, "new")
	if e != nil {
		return p, e
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n < -1 || n == math.MaxInt64 {
			return p, newNativeError("invalid_from", "Last-Event-ID must be an event position, not %q", id).with("field", "Last-Event-ID")
		}
		p.from = n + 1
	}
	if p.from > st.NextPosition() {
		return p, newNativeError("out_of_range", "position %d is past the store's next position %d", p.from, st.NextPosition()).
			with("head_position", st.NextPosition())
	}
	return p, nil
}

// sseWriter writes a Server-Sent Events stream. Every write gets the
// server's WriteTimeout: a client that stops reading is disconnected
// instead of holding the tail's goroutine forever. A failed write or
// flush is logged (streamWriteFailed) and reported as false. Once stopped
// (server shutdown) every write fails, and a write in progress is cut by
// closing the connection: a tail ends at once even when its client reads
// nothing.
type sseWriter struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	rc   *http.ResponseController
	conn net.Conn // the request's connection (nil in tests without one)
	buf  []byte

	mu struct {
		sync.Mutex
		writing, stopped bool
		since            time.Time // when the write in progress began
	}
}

// begin starts a write: false when the tail is stopped.
func (o *sseWriter) begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.stopped {
		return false
	}
	o.mu.writing, o.mu.since = true, time.Now()
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.s.cfg.WriteTimeout))
	return true
}

func (o *sseWriter) end() {
	o.mu.Lock()
	o.mu.writing = false
	o.mu.Unlock()
}

// stop makes the tail's writes fail; a write in progress is cut by
// closing the connection (its client reads nothing, or the write would
// have ended).
func (o *sseWriter) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.stopped = true
	if o.mu.writing && o.conn != nil {
		_ = o.conn.Close()
	}
}

func (o *sseWriter) write(b []byte) bool {
	if !o.begin() {
		return false
	}
	defer o.end()
	if _, err := o.w.Write(b); err != nil {
		o.s.streamWriteFailed(o.r, err)
		return false
	}
	return true
}

func (o *sseWriter) flush() bool {
	if !o.begin() {
		return false
	}
	defer o.end()
	if err := o.rc.Flush(); err != nil {
		o.s.streamWriteFailed(o.r, err)
		return false
	}
	return true
}

// page writes one SSE event per store event (id: its position, event: its
// type, data: its JSON) and flushes them.
func (o *sseWriter) page(evs []events.Event) bool {
	for i := range evs {
		ev := &evs[i]
		body, err := json.Marshal(toEventJSON(ev))
		if err != nil {
			return false
		}
		buf := strconv.AppendInt(append(o.buf[:0], "id: "...), ev.Position, 10)
		buf = append(buf, '\n')
		if ev.Type != "" && !strings.ContainsAny(ev.Type, "\r\n") {
			// A type with a line break (possible only in records written
			// before the store's topic was owned) would end the field and
			// forge others; such events go out with the default type,
			// their real type still in the data.
			buf = append(append(append(buf, "event: "...), ev.Type...), '\n')
		}
		buf = append(append(append(buf, "data: "...), body...), "\n\n"...)
		o.buf = buf
		if !o.write(buf) {
			return false
		}
	}
	return len(evs) == 0 || o.flush()
}

// sendError ends the stream with an error event carrying the error's JSON.
func (o *sseWriter) sendError(err error) {
	body, _ := json.Marshal(errorOf(err))
	if o.write(fmt.Appendf(nil, "event: error\ndata: %s\n\n", body)) {
		o.flush()
	}
}
