package events

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vibemq/broker/topics"
)

// Limits of one append. Config may lower them; these are the defaults.
const (
	DefaultMaxEventBytes   = 1 << 20 // data + metadata of one event
	DefaultMaxAppendEvents = 1000
	DefaultMaxAppendBytes  = 8 << 20 // data + metadata of all events of one append
	MaxMetadataBytes       = 64 << 10
	MaxTypeBytes           = 256
	MaxEventIDBytes        = 128
	MaxStreamBytes         = 512
)

// Content types of event data.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeBinary = "application/octet-stream"
)

// Record headers of an event in the store's topic: the Kafka view of an
// event is key = stream, value = data, and these headers.
const (
	HeaderType        = "es-type"
	HeaderID          = "es-id"
	HeaderRevision    = "es-revision"
	HeaderContentType = "es-content-type"
	HeaderMetadata    = "es-metadata"
)

// ProposedEvent is one event of an append.
type ProposedEvent struct {
	// ID identifies the event for idempotent retries: 1-128 printable ASCII
	// characters, a UUID by convention. Empty means the store assigns a
	// UUIDv7.
	ID   string
	Type string
	Data []byte
	// ContentType is ContentTypeJSON (Data is a JSON value) or
	// ContentTypeBinary. Empty means ContentTypeJSON.
	ContentType string
	// Metadata is a JSON value or empty.
	Metadata []byte
}

// Event is a stored event.
type Event struct {
	// Position is the event's place in the store: gap-free from 0, equal to
	// its offset in the store's topic.
	Position int64
	Stream   string
	// Revision is the event's place in its stream, from 0; -1 for a record
	// that a Kafka client wrote into the store's topic directly.
	Revision    int64
	ID          string
	Type        string
	Data        []byte
	ContentType string
	Metadata    []byte
	// Timestamp is the append time in Unix milliseconds; it never decreases
	// along positions.
	Timestamp int64
}

// Size is the number of bytes the event counts against read limits.
func (e *Event) Size() int {
	return len(e.Data) + len(e.Metadata) + len(e.Stream) + len(e.Type) + len(e.ID) + 64
}

// ExpectedKind is the kind of an expected revision.
type ExpectedKind uint8

// Expected revision kinds.
const (
	ExpectAny      ExpectedKind = iota // append whatever the stream's state
	ExpectNoStream                     // the stream must have no events
	ExpectExists                       // the stream must have at least one event
	ExpectRevision                     // the stream's last revision must be Revision
)

// ExpectedRevision is the optimistic-concurrency condition of an append.
type ExpectedRevision struct {
	Kind     ExpectedKind
	Revision int64
}

// Any, NoStream, Exists and AtRevision build expected revisions.
var (
	Any      = ExpectedRevision{Kind: ExpectAny}
	NoStream = ExpectedRevision{Kind: ExpectNoStream}
	Exists   = ExpectedRevision{Kind: ExpectExists}
)

// AtRevision expects the stream's last revision to be rev.
func AtRevision(rev int64) ExpectedRevision {
	return ExpectedRevision{Kind: ExpectRevision, Revision: rev}
}

// ParseExpectedRevision parses "any", "no_stream", "exists" or a revision
// number >= 0.
func ParseExpectedRevision(s string) (ExpectedRevision, error) {
	switch s {
	case "any", "":
		return Any, nil
	case "no_stream":
		return NoStream, nil
	case "exists", "stream_exists":
		return Exists, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return Any, fmt.Errorf("%w: %q is not any, no_stream, exists or a revision number >= 0", ErrInvalidExpected, s)
	}
	return AtRevision(n), nil
}

// String is the form ParseExpectedRevision reads.
func (e ExpectedRevision) String() string {
	switch e.Kind {
	case ExpectNoStream:
		return "no_stream"
	case ExpectExists:
		return "exists"
	case ExpectRevision:
		return strconv.FormatInt(e.Revision, 10)
	}
	return "any"
}

func (e ExpectedRevision) describe() string {
	switch e.Kind {
	case ExpectNoStream:
		return "absent"
	case ExpectExists:
		return "present"
	case ExpectRevision:
		return fmt.Sprintf("at revision %d", e.Revision)
	}
	return "anything"
}

// check reports whether a stream whose last revision is current (-1: no
// events) satisfies e.
func (e ExpectedRevision) check(current int64) bool {
	switch e.Kind {
	case ExpectNoStream:
		return current < 0
	case ExpectExists:
		return current >= 0
	case ExpectRevision:
		return current == e.Revision
	}
	return true
}

// ValidateStream checks a stream name: 1-512 bytes of UTF-8 without
// control characters, not starting with '$' (reserved for system streams),
// and not . or .. (a path segment that routers and clients resolve away).
func ValidateStream(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the stream name is empty", ErrInvalidStream)
	}
	if len(name) > MaxStreamBytes {
		return fmt.Errorf("%w: the stream name is %d bytes, the limit is %d", ErrInvalidStream, len(name), MaxStreamBytes)
	}
	if name[0] == '$' {
		return fmt.Errorf("%w: stream names starting with '$' are reserved", ErrInvalidStream)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed (a path segment . or .. cannot name a resource)", ErrInvalidStream, name)
	}
	if err := checkText(name); err != "" {
		return fmt.Errorf("%w: the stream name %s", ErrInvalidStream, err)
	}
	return nil
}

// ValidateStoreName applies the topic name rules (a store is a topic of the
// same name) and reserves names starting with "__".
func ValidateStoreName(name string) error {
	if err := topics.ValidateTopicName(name); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidStoreName, strings.TrimPrefix(err.Error(), topics.ErrInvalidTopic.Error()+": "))
	}
	if strings.HasPrefix(name, "__") {
		return fmt.Errorf("%w: store names starting with \"__\" are reserved for the broker", ErrReservedName)
	}
	return nil
}

func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "contains a control character"
		}
	}
	return ""
}

func validateEventID(id string) error {
	if len(id) > MaxEventIDBytes {
		return fmt.Errorf("%w: event id is %d bytes, the limit is %d", ErrInvalidEventID, len(id), MaxEventIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: event id %q has a character outside printable ASCII (0x21-0x7e)", ErrInvalidEventID, id)
		}
	}
	return nil
}

func validateType(t string) error {
	if t == "" {
		return fmt.Errorf("%w: the event type is required", ErrInvalidType)
	}
	if len(t) > MaxTypeBytes {
		return fmt.Errorf("%w: the event type is %d bytes, the limit is %d", ErrInvalidType, len(t), MaxTypeBytes)
	}
	if err := checkText(t); err != "" {
		return fmt.Errorf("%w: the event type %s", ErrInvalidType, err)
	}
	return nil
}

// newUUIDv7 returns a random RFC 9562 version 7 UUID for time now (Unix ms).
func newUUIDv7(now int64) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now))
	copy(u[0:6], ts[2:8])
	u[6] = (u[6] & 0x0f) | 0x70
	u[8] = (u[8] & 0x3f) | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:16])
	return string(s[:])
}

// encodeRecords turns an append into records of one batch.
func encodeRecords(stream string, firstRevision int64, evs []ProposedEvent) []topics.Record {
	records := make([]topics.Record, len(evs))
	key := []byte(stream)
	for i := range evs {
		e := &evs[i]
		data := e.Data
		if data == nil {
			data = []byte{} // a null value would read as a Kafka tombstone
		}
		headers := []topics.RecordHeader{
			{Key: HeaderType, Value: []byte(e.Type)},
			{Key: HeaderID, Value: []byte(e.ID)},
			{Key: HeaderRevision, Value: strconv.AppendInt(nil, firstRevision+int64(i), 10)},
			{Key: HeaderContentType, Value: []byte(e.ContentType)},
		}
		if len(e.Metadata) > 0 {
			headers = append(headers, topics.RecordHeader{Key: HeaderMetadata, Value: e.Metadata})
		}
		records[i] = topics.Record{OffsetDelta: int32(i), Key: key, Value: data, Headers: headers}
	}
	return records
}

// decodeEvent turns one stored record into an event. Values are copied.
func decodeEvent(h *topics.BatchHeader, r *topics.Record) Event {
	e := Event{
		Position:    h.BaseOffset + int64(r.OffsetDelta),
		Stream:      string(r.Key),
		Revision:    -1,
		Data:        append([]byte{}, r.Value...),
		ContentType: ContentTypeBinary,
		Timestamp:   h.BaseTimestamp + r.TimestampDelta,
	}
	if h.LogAppendTime() {
		e.Timestamp = h.MaxTimestamp
	}
	for _, hd := range r.Headers {
		switch hd.Key {
		case HeaderType:
			e.Type = string(hd.Value)
		case HeaderID:
			e.ID = string(hd.Value)
		case HeaderRevision:
			if n, err := strconv.ParseInt(string(hd.Value), 10, 64); err == nil {
				e.Revision = n
			}
		case HeaderContentType:
			e.ContentType = string(hd.Value)
		case HeaderMetadata:
			e.Metadata = append([]byte{}, hd.Value...)
		}
	}
	if e.ContentType == ContentTypeJSON && !json.Valid(e.Data) {
		e.ContentType = ContentTypeBinary
	}
	return e
}
