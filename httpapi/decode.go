package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// This file is the native API's one way to read requests and write times:
// one strict JSON decoder for every route's body (decodeBody), one query
// parameter parser (queryInt), one time format (formatTime).

// preallocMax bounds what decodeBody allocates for a declared
// Content-Length before the bytes arrive.
const preallocMax = 1 << 20

// bodyRule is what a route accepts as a body.
type bodyRule struct {
	// limit is the body's size limit in bytes (413 request_too_large).
	limit int64
	// required makes an empty body invalid_json; otherwise an empty body
	// leaves the destination as it is (every field has its default).
	required bool
	// reuse reads the body into a pooled buffer that is reused once
	// decoded. Only for destinations that keep no slice of the input (no
	// jsontext.Value member): JSON v2 copies strings, maps and slices.
	reuse bool
}

// bodyBufferMax is the largest read buffer kept for reuse.
const bodyBufferMax = 1 << 20

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decodeBody is the one JSON decoder of the native API, strict as JSON
// v2 is by default: one JSON value of the destination's shape, member
// names matched exactly (case-sensitive), a duplicate member refused,
// unknown members refused (unknown_field), strings valid UTF-8, nothing
// after the value. A body must say it is JSON (Content-Type
// application/json or +json): a body without Content-Type is refused on
// every route, because a page of any other site can make a browser POST
// one without asking (a CORS "simple request": text/plain or no type,
// no preflight), while a JSON type needs a preflight this listener never
// answers; so no web page can act on the broker (CSRF). Errors: 415
// unsupported_media_type, 413
// request_too_large (details max and limit: the route's limit), 400
// unknown_field or invalid_json (details field: the member's dotted path).
func decodeBody(w http.ResponseWriter, r *http.Request, rule bodyRule, dst any) *nativeError {
	ct := r.Header.Get("Content-Type")
	switch {
	case ct == "" && r.ContentLength == 0 && rule.required:
		return newNativeError("invalid_json", "the body is empty; send a JSON object")
	case ct == "" && r.ContentLength == 0:
		return nil
	case ct == "":
		return newNativeError("unsupported_media_type", "the request has a body but no Content-Type; send Content-Type: application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return newNativeError("unsupported_media_type", "content type %q is not JSON; send application/json", ct)
	}
	if r.ContentLength > rule.limit {
		return tooLarge(rule.limit)
	}
	buf := &bytes.Buffer{}
	if rule.reuse {
		buf = bodyBuffers.Get().(*bytes.Buffer)
		buf.Reset()
		defer func() {
			if buf.Cap() <= bodyBufferMax {
				bodyBuffers.Put(buf)
			}
		}()
	}
	if r.ContentLength > 0 {
		// One allocation for a declared length, but not more than a
		// common request ahead of the bytes: a client that declares 16 MiB
		// and sends nothing must not cost 16 MiB.
		buf.Grow(int(min(r.ContentLength, preallocMax)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, rule.limit)); err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return tooLarge(rule.limit)
		}
		return newNativeError("invalid_json", "cannot read the request body: %v", err)
	}
	data := buf.Bytes()
	if len(bytes.TrimSpace(data)) == 0 {
		if rule.required {
			return newNativeError("invalid_json", "the body is empty; send a JSON object")
		}
		return nil
	}
	if err := jsonv2.Unmarshal(data, dst, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonDecodeError(err)
	}
	return nil
}

// msDuration is a client's count of milliseconds (the API's *_ms fields)
// as the domains' time.Duration, saturated at the bounds of
// time.Duration: a count too large to convert (over 292 years) becomes
// the largest duration, which every bound refuses (out_of_range, or
// delay_exceeds_retention), instead of wrapping into range (18446744103709
// ms multiplied by 10^6 overflows to 29.999 s).
func msDuration(ms int64) time.Duration {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > maxMs:
		return math.MaxInt64
	case ms < -maxMs:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// msDurationOf is msDuration of an optional field: nil for nil.
func msDurationOf(ms *int64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := msDuration(*ms)
	return &d
}

func tooLarge(limit int64) *nativeError {
	return newNativeError("request_too_large", "the request body is over %d bytes", limit).with("max", limit).with("limit", limit)
}

// jsonDecodeError turns a strict decoder error into unknown_field or
// invalid_json, naming the field (dotted path) and the byte offset.
func jsonDecodeError(err error) *nativeError {
	var tooMany *tooManyEventsError
	var semErr *jsonv2.SemanticError
	var synErr *jsontext.SyntacticError
	switch {
	case errors.As(err, &tooMany):
		return tooMany.nativeError()
	case errors.As(err, &semErr):
		field := strings.ReplaceAll(strings.TrimPrefix(string(semErr.JSONPointer), "/"), "/", ".")
		if errors.Is(err, jsonv2.ErrUnknownName) {
			return newNativeError("unknown_field", "unknown field %q", field).with("field", field)
		}
		if semErr.GoType != nil && semErr.JSONKind != 0 {
			want, got := jsonKind(semErr.GoType.String()), kindName(semErr.JSONKind)
			msg := fmt.Sprintf("field %q must be a JSON %s, not %s", field, want, got)
			switch {
			case want == got && want == "number":
				msg = fmt.Sprintf("field %q must be an integer in range", field)
			case field == "":
				return newNativeError("invalid_json", "the body must be a JSON %s, not %s", want, got)
			}
			return newNativeError("invalid_json", "%s", msg).with("field", field)
		}
		return newNativeError("invalid_json", "field %q is not the expected JSON: %v", field, err).with("field", field)
	case errors.As(err, &synErr):
		return newNativeError("invalid_json", "the body is not valid JSON (at byte %d): %v", synErr.ByteOffset, synErr.Err)
	default:
		return newNativeError("invalid_json", "the body is not the expected JSON: %v", err)
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

// queryInt is the one parser of integer query parameters: def when the
// parameter is absent, else an integer within [minimum, maximum], or
// out_of_range naming the parameter (details field, min, max).
func queryInt(r *http.Request, name string, def, minimum, maximum int64) (int64, *nativeError) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < minimum || n > maximum {
		return 0, newNativeError("out_of_range", "%s must be an integer from %d to %d, not %q", name, minimum, maximum, v).
			with("field", name).with("min", minimum).with("max", maximum)
	}
	return n, nil
}

// timeLayout is the one time format of the native API: RFC 3339 in UTC
// with milliseconds ("2026-12-01T16:28:02.000Z").
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// formatTime formats t in the API's time format; "" for the zero time
// (omitted with omitempty).
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// formatMillis formats Unix milliseconds in the API's time format.
func formatMillis(ms int64) string { return formatTime(time.UnixMilli(ms)) }

// parseTime reads a time a client sent (RFC 3339, any offset, any
// precision); a bad one is invalid_json naming the field.
func parseTime(field, s string) (time.Time, *nativeError) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, newNativeError("invalid_json", "%s %q is not an RFC 3339 time", field, s).with("field", field)
	}
	return t, nil
}
