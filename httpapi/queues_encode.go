package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/vibemq/broker/queues"
)

// The queue's hot answers (receive, send, ack) written without
// reflection: each appender writes the same JSON object as encoding/json
// writes for the wire type named in its comment (messageJSON,
// sendResultJSON, itemResultJSON: members in declaration order, the same
// omitempty rules, map keys sorted), straight from queues' Go types into
// one pooled buffer, so a receive of 10 x 1 KiB costs no copy of a body
// but the one into the buffer. TestQueueEncodeMatchesWireTypes decodes
// both forms of varied values and asserts they are equal.
//
// Strings go through jsontext.AppendQuote: invalid UTF-8 becomes U+FFFD
// as with encoding/json; '<', '>' and '&' are not escaped (encoding/json
// writes them as \u003c...: the same JSON string). The answer carries its
// Content-Length, so it is never sent chunked.

// encodeBufferMax is the largest buffer kept in the pool; a larger
// answer's buffer is left to the GC.
const encodeBufferMax = 1 << 20

var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// writeEncoded answers status with the JSON object enc appends, and a
// newline, as writeJSON does.
func writeEncoded(w http.ResponseWriter, status int, enc func(dst []byte) []byte) {
	bp := encodeBuffers.Get().(*[]byte)
	buf := append(enc((*bp)[:0]), '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(buf)))
	w.WriteHeader(status)
	_, _ = w.Write(buf)
	if cap(buf) <= encodeBufferMax {
		*bp = buf[:0]
		encodeBuffers.Put(bp)
	}
}

// writeMessages answers a receive or a browse: messagesResponse.
func writeMessages(w http.ResponseWriter, msgs []queues.Message, base64Bodies bool, acks []queues.ItemResult, next string) {
	writeEncoded(w, http.StatusOK, func(dst []byte) []byte {
		dst = append(dst, `{"messages":[`...)
		for i := range msgs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendMessage(dst, &msgs[i], base64Bodies)
		}
		dst = append(dst, ']')
		if next != "" {
			dst = appendStringMember(dst, "next", next)
		}
		if len(acks) > 0 {
			dst = append(dst, `,"acks":`...)
			dst = appendItemResults(dst, acks)
		}
		return append(dst, '}')
	})
}

// writeItemResults answers an ack, nack or extend: resultsResponse of
// itemResultJSON.
func writeItemResults(w http.ResponseWriter, rs []queues.ItemResult) {
	writeEncoded(w, http.StatusOK, func(dst []byte) []byte {
		dst = append(dst, `{"results":`...)
		return append(appendItemResults(dst, rs), '}')
	})
}

// writeSendResults answers a send: resultsResponse of sendResultJSON.
func writeSendResults(w http.ResponseWriter, rs []queues.SendResult) {
	writeEncoded(w, http.StatusOK, func(dst []byte) []byte {
		dst = append(dst, `{"results":`...)
		if rs == nil {
			return append(dst, "null}"...)
		}
		dst = append(dst, '[')
		for i := range rs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendSendResult(dst, &rs[i])
		}
		return append(dst, "]}"...)
	})
}

// appendMessage appends m as messageJSON (toMessageJSON).
func appendMessage(dst []byte, m *queues.Message, base64Bodies bool) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(m.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, m.Offset, 10)
	if m.Receipt != "" {
		dst = appendStringMember(dst, "receipt", m.Receipt)
	}
	if m.State != "" {
		dst = appendStringMember(dst, "state", m.State)
	}
	dst = appendBytesMember(dst, "body", m.Body, base64Bodies)
	if m.Key != nil {
		dst = appendBytesMember(dst, "key", m.Key, base64Bodies)
	}
	if len(m.Headers) > 0 {
		dst = append(dst, `,"headers":{`...)
		keys := make([]string, 0, len(m.Headers))
		for k := range m.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, m.Headers[k])
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendInt(dst, int64(m.Priority), 10)
	dst = append(dst, `,"deliveries":`...)
	dst = strconv.AppendUint(dst, uint64(m.Deliveries), 10)
	if m.Expiries != 0 {
		dst = append(dst, `,"expiries":`...)
		dst = strconv.AppendUint(dst, uint64(m.Expiries), 10)
	}
	if m.Nacks != 0 {
		dst = append(dst, `,"nacks":`...)
		dst = strconv.AppendUint(dst, uint64(m.Nacks), 10)
	}
	dst = append(dst, `,"enqueued_at":"`...)
	dst = appendTime(dst, m.EnqueuedAt)
	dst = append(dst, '"')
	dst = appendTimeMember(dst, "visible_at", m.VisibleAt)
	dst = appendTimeMember(dst, "lease_until", m.LeaseUntil)
	dst = appendTimeMember(dst, "expire_at", m.ExpireAt)
	if m.LastError != "" {
		dst = appendStringMember(dst, "last_error", m.LastError)
	}
	if d := m.DeadLetter; d != nil {
		dst = append(dst, `,"dead_letter":{"reason":`...)
		dst = appendString(dst, d.Reason)
		for _, f := range [...]struct{ name, v string }{
			{"detail", d.Detail}, {"failed_at", d.FailedAt}, {"source_queue", d.SourceQueue}, {"source_id", d.SourceID},
		} {
			if f.v != "" {
				dst = appendStringMember(dst, f.name, f.v)
			}
		}
		dst = append(dst, `,"deliveries":`...)
		dst = strconv.AppendInt(dst, d.Deliveries, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendItemResults appends rs as []itemResultJSON (null for nil).
func appendItemResults(dst []byte, rs []queues.ItemResult) []byte {
	if rs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = strconv.AppendInt(dst, int64(r.Index), 10)
		for _, f := range [...]struct{ name, v string }{{"receipt", r.Receipt}, {"id", r.ID}, {"status", r.Status}} {
			if f.v != "" {
				dst = appendStringMember(dst, f.name, f.v)
			}
		}
		dst = appendTimeMember(dst, "visible_at", r.VisibleAt)
		dst = appendTimeMember(dst, "lease_until", r.LeaseTill)
		dst = appendItemError(dst, r.Error)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendSendResult appends r as sendResultJSON.
func appendSendResult(dst []byte, r *queues.SendResult) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(r.Index), 10)
	if r.ID != "" {
		dst = appendStringMember(dst, "id", r.ID)
	}
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	if r.Duplicate {
		dst = append(dst, `,"duplicate":true`...)
	}
	dst = appendTimeMember(dst, "visible_at", r.VisibleAt)
	dst = appendTimeMember(dst, "expire_at", r.ExpireAt)
	dst = appendItemError(dst, r.Error)
	return append(dst, '}')
}

// appendItemError appends the member "error" of an item, if e is set,
// through encoding/json: errors are off the hot path, and their details
// are of any type.
func appendItemError(dst []byte, e *queues.Error) []byte {
	if e == nil {
		return dst
	}
	raw, err := json.Marshal(itemError(e))
	if err != nil {
		raw = []byte(`{"code":"internal","message":"cannot encode the error"}`)
	}
	dst = append(dst, `,"error":`...)
	return append(dst, raw...)
}

// appendBytesMember appends b as the member name (UTF-8 text) or
// name_base64, as setBytes chooses.
func appendBytesMember(dst []byte, name string, b []byte, forceBase64 bool) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	if !forceBase64 {
		// One pass: quote, and fall back to base64 when AppendQuote met
		// invalid UTF-8 (what utf8.Valid would have said first).
		quoted, err := jsontext.AppendQuote(append(dst, '"', ':'), b)
		if err == nil {
			return quoted
		}
		dst = quoted[:len(dst)]
	}
	dst = append(dst, `_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendStringMember appends ,"name":"v".
func appendStringMember(dst []byte, name, v string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendString(dst, v)
}

// appendTimeMember appends ,"name":"<t>" unless t is zero (formatTime's "").
func appendTimeMember(dst []byte, name string, t time.Time) []byte {
	if t.IsZero() {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, `":"`...)
	dst = appendTime(dst, t)
	return append(dst, '"')
}

// appendTime appends formatTime(t) (no quotes; nothing for the zero time).
func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return dst
	}
	return t.UTC().AppendFormat(dst, timeLayout)
}

// appendString appends s quoted; invalid UTF-8 becomes U+FFFD, as
// encoding/json does (AppendQuote's error says only that).
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst, _ = jsontext.AppendQuote(dst, s)
	return dst
}
