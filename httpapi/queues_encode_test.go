package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vibemq/broker/queues"
)

// decodeAny decodes one JSON value (and a trailing newline) into any.
func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return v
}

// sameJSON asserts that the hand-written answer (got, from a
// ResponseRecorder) and encoding/json's form of the wire type (want)
// decode to the same value, and that got says its length.
func sameJSON(t *testing.T, rec *httptest.ResponseRecorder, want any) {
	t.Helper()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.Body.Bytes()
	if cl := rec.Header().Get("Content-Length"); cl != itoa(len(got)) {
		t.Fatalf("Content-Length %q for %d bytes", cl, len(got))
	}
	if rec.Header().Get("Content-Type") != "application/json" || !strings.HasSuffix(string(got), "}\n") {
		t.Fatalf("headers %v, body %q", rec.Header(), got)
	}
	if g, w := decodeAny(t, got), decodeAny(t, raw); !reflect.DeepEqual(g, w) {
		t.Fatalf("hand-written answer differs from encoding/json's:\n got  %s\n want %s", got, raw)
	}
}

func itoa(n int) string { return jsonNumber(n) }

func jsonNumber(n int) string { raw, _ := json.Marshal(n); return string(raw) }

// randomText is a string of characters the JSON encoders treat
// differently: quotes, controls, HTML, line separators, invalid UTF-8.
func randomText(r *rand.Rand, n int) string {
	parts := []string{"a", "Z", "0", `"`, `\`, "\n", "\t", "\x00", "\x1f", "<", ">", "&", "é", "\u2028", "\u2029", "😀", "\xff", "\xc3", " "}
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func randomTime(r *rand.Rand) time.Time {
	if r.IntN(3) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(r.Int64N(4_000_000_000_000)).In(time.FixedZone("x", 3600*r.IntN(5)))
}

func randomMessage(r *rand.Rand) queues.Message {
	m := queues.Message{ID: randomText(r, 4), Partition: r.Int32N(1000), Offset: r.Int64() - r.Int64(),
		Receipt: randomText(r, 3), State: randomText(r, 2), Body: []byte(randomText(r, 30)), Priority: r.IntN(10) - 1,
		Deliveries: r.Uint32N(3), Expiries: r.Uint32N(3), Nacks: r.Uint32N(3), EnqueuedAt: randomTime(r),
		VisibleAt: randomTime(r), LeaseUntil: randomTime(r), ExpireAt: randomTime(r), LastError: randomText(r, 3)}
	if r.IntN(4) == 0 {
		m.Body = nil
	}
	if r.IntN(2) == 0 {
		m.Key = []byte(randomText(r, 5))
	}
	if n := r.IntN(4); n > 0 {
		m.Headers = map[string]string{}
		for range n {
			m.Headers[randomText(r, 4)] = randomText(r, 4)
		}
	}
	if r.IntN(3) == 0 {
		m.DeadLetter = &queues.DeadLetterInfo{Reason: randomText(r, 2), Detail: randomText(r, 2), FailedAt: randomText(r, 2),
			SourceQueue: randomText(r, 2), SourceID: randomText(r, 2), Deliveries: r.Int64N(9)}
	}
	return m
}

func randomItemError(r *rand.Rand) *queues.Error {
	if r.IntN(3) > 0 {
		return nil
	}
	e := &queues.Error{Code: queues.CodeLeaseLost, Message: randomText(r, 5)}
	if r.IntN(2) == 0 {
		e.Details = map[string]any{"field": randomText(r, 3), "index": r.IntN(5)}
	}
	return e
}

// TestQueueEncodeMatchesWireTypes: the hand-written answers of receive,
// browse, send, ack, nack and extend decode to the same JSON values as
// encoding/json's encoding of their wire types, for messages and results
// with every optional member set or not, bodies and keys that are text or
// not, and strings that need escaping or hold invalid UTF-8.
func TestQueueEncodeMatchesWireTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 3))
	for i := range 500 {
		msgs := make([]queues.Message, r.IntN(4))
		for j := range msgs {
			msgs[j] = randomMessage(r)
		}
		var acks []queues.ItemResult
		if r.IntN(2) == 0 {
			acks = make([]queues.ItemResult, r.IntN(3))
			for j := range acks {
				acks[j] = queues.ItemResult{Index: j, Receipt: randomText(r, 3), ID: randomText(r, 2), Status: randomText(r, 2),
					VisibleAt: randomTime(r), LeaseTill: randomTime(r), Error: randomItemError(r)}
			}
		}
		sends := make([]queues.SendResult, r.IntN(4))
		for j := range sends {
			sends[j] = queues.SendResult{Index: j, ID: randomText(r, 3), Partition: r.Int32N(4) - 1, Offset: r.Int64N(100) - 1,
				Duplicate: r.IntN(2) == 0, VisibleAt: randomTime(r), ExpireAt: randomTime(r), Error: randomItemError(r)}
		}
		b64 := i%5 == 0
		next := ""
		if i%3 == 0 {
			next = randomText(r, 3)
		}

		rec := httptest.NewRecorder()
		writeMessages(rec, msgs, b64, acks, next)
		sameJSON(t, rec, messagesResponse{Messages: toMessagesJSON(msgs, b64), Next: next, Acks: toItemResultsJSON(acks)})

		rec = httptest.NewRecorder()
		writeItemResults(rec, acks)
		sameJSON(t, rec, resultsResponse[itemResultJSON]{Results: toItemResultsJSON(acks)})

		if i%7 == 0 {
			sends = nil
		}
		rec = httptest.NewRecorder()
		writeSendResults(rec, sends)
		var wire []sendResultJSON
		if sends != nil {
			wire = toSendResultsJSON(sends)
		}
		sameJSON(t, rec, resultsResponse[sendResultJSON]{Results: wire})
	}
}

// BenchmarkEncodeReceiveResponse: the answer of a receive of 10 x 1 KiB
// with the 10 ack results of the previous batch, hand-written (fast) and
// through encoding/json of the wire types (reflect, the encoding before).
func BenchmarkEncodeReceiveResponse(b *testing.B) {
	body := []byte(strings.Repeat("q", 1024))
	now := time.UnixMilli(1_700_000_000_000)
	msgs := make([]queues.Message, 10)
	acks := make([]queues.ItemResult, 10)
	for i := range msgs {
		msgs[i] = queues.Message{ID: "0-123456", Offset: int64(i), Receipt: strings.Repeat("r", 60),
			State: "inflight", Body: body, Deliveries: 1, EnqueuedAt: now, LeaseUntil: now.Add(time.Minute)}
		acks[i] = queues.ItemResult{Index: i, Receipt: strings.Repeat("r", 60), ID: "0-123456", Status: "acked"}
	}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeMessages(httptest.NewRecorder(), msgs, false, acks, "")
		}
	})
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(httptest.NewRecorder(), 200, messagesResponse{Messages: toMessagesJSON(msgs, false), Acks: toItemResultsJSON(acks)})
		}
	})
}

// TestSendBodyBufferReuse: a send's body is read into a pooled buffer
// (bodyRule.reuse) that the next request overwrites; what the first
// request decoded (bodies, keys, headers, dedup ids) keeps its values.
func TestSendBodyBufferReuse(t *testing.T) {
	decode := func(fill string) sendRequestJSON {
		t.Helper()
		raw := `{"messages":[{"body":"` + strings.Repeat(fill, 600) + `","key":"k` + fill + `","headers":{"h":"v` + fill + `"},"dedup_id":"d` + fill + `"}]}`
		r := httptest.NewRequest("POST", "/v1/queues/q/messages", strings.NewReader(raw))
		r.Header.Set("Content-Type", "application/json")
		var req sendRequestJSON
		if err := decodeBody(httptest.NewRecorder(), r, bodyRule{limit: QueueSendBodyMax, reuse: true}, &req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	first := decode("a")
	for _, fill := range []string{"b", "c", "d"} {
		decode(fill)
	}
	m := first.Messages[0].message()
	if string(m.Body) != strings.Repeat("a", 600) || string(m.Key) != "ka" || m.Headers["h"] != "va" || *m.DedupID != "da" {
		t.Fatalf("the first request's values changed after later requests reused the buffer: %q %q %v %q", m.Body[:8], m.Key, m.Headers, *m.DedupID)
	}
}
