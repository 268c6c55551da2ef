package httpapi

import (
	"bytes"
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// FuzzEventsAppendBody: any append body, on a fresh or a used stream,
// gets an answer without a panic: 200/201 with the result, or an error
// of the table with its status; a 2xx answer names as many event ids as
// the body has events.
func FuzzEventsAppendBody(f *testing.F) {
	for _, s := range []string{
		`{"events":[{"type":"T","data":{"a":1}}]}`,
		`{"expected_revision":"no_stream","events":[{"id":"x","type":"T","data_base64":"AAE="}]}`,
		`{"expected_revision":0,"events":[{"type":"T","metadata":{"m":1}},{"type":"U"}]}`,
		`{"expected_revision":"exists","events":[]}`,
		`{"expected_revision":1.5,"events":[{"type":"T"}]}`,
		`{"events":[{"id":"a","type":"T"},{"id":"a","type":"T"}]}`,
		`{"events":[{"type":"T","data":1,"data_base64":"AA=="}]}`,
	} {
		f.Add([]byte(s))
	}
	db, err := pebblestore.Open(f.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	tm, err := topics.Open(db, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		f.Fatal(err)
	}
	es, err := events.Open(db, tm, events.Config{Logger: zerolog.Nop(), MaxAppendEvents: 20, MaxAppendBytes: 1 << 16, MaxEventBytes: 1 << 15})
	if err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Logger: zerolog.Nop()})
	srv.RegisterEvents(EventsConfig{Events: es})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/stores/s/streams/a/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusCreated:
			in := appendRequest{Events: appendEvents{max: 1 << 30}}
			var out appendResponse
			if err := jsonv2.Unmarshal(body, &in, jsonv2.RejectUnknownMembers(true)); err != nil {
				t.Fatalf("accepted a body the strict decoder refuses: %v", err)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.EventIDs) != len(in.Events.list) {
				t.Fatalf("answer %s to %d events: %v", rec.Body.Bytes(), len(in.Events.list), err)
			}
			return
		}
		var e nativeError
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("status %d with a body that is not an error: %s", rec.Code, rec.Body.Bytes())
		}
		if status, ok := nativeCodeStatus[e.Code]; !ok || status != rec.Code || e.Code == "internal" {
			t.Fatalf("status %d with code %q: %s", rec.Code, e.Code, e.Message)
		}
	})
}
