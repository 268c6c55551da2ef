package httpapi

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/vibemq/broker/queues"
)

// The wire format of the queue API: the JSON request and response types
// and their conversion to and from queues' plain Go types. The member
// names are the API's (NATIVE-QUEUE.md §3, /openapi.json; every member is
// a property of its schema, TestOpenAPIQueueFields). queues knows none of
// it: no tags, no base64, no RFC 3339.

// backoffJSON is queues.Backoff on the wire.
type backoffJSON struct {
	InitialMs  int64   `json:"initial_ms"`
	Multiplier float64 `json:"multiplier"`
	MaxMs      int64   `json:"max_ms"`
	Jitter     float64 `json:"jitter"`
}

// attributesJSON is queues.Attributes on the wire.
type attributesJSON struct {
	Partitions          int32       `json:"partitions"`
	VisibilityTimeoutMs int64       `json:"visibility_timeout_ms"`
	MaxReceives         int32       `json:"max_receives"`
	MaxExpiries         int32       `json:"max_expiries"`
	DeadLetter          string      `json:"dead_letter"`
	OnExpire            string      `json:"on_expire"`
	DefaultDelayMs      int64       `json:"default_delay_ms"`
	RetentionMs         int64       `json:"retention_ms"`
	MaxMessageBytes     int64       `json:"max_message_bytes"`
	DedupWindowMs       int64       `json:"dedup_window_ms"`
	PriorityLevels      int32       `json:"priority_levels"`
	Backoff             backoffJSON `json:"backoff"`
	ExpiryBackoffMs     int64       `json:"expiry_backoff_ms"`
	RetainAckedMs       int64       `json:"retain_acked_ms"`
	MaxInflight         int64       `json:"max_inflight"`
	ReceiveWaitMaxMs    int64       `json:"receive_wait_max_ms"`
	FIFO                bool        `json:"fifo"`
	ContentDedup        bool        `json:"content_dedup"`
	DedupConflict       string      `json:"dedup_conflict"`
	DedupScope          string      `json:"dedup_scope"`
	MaxUnclaimedAgeMs   int64       `json:"max_unclaimed_age_ms"`
}

func toAttributesJSON(a *queues.Attributes) attributesJSON {
	return attributesJSON{
		Partitions: a.Partitions, VisibilityTimeoutMs: a.VisibilityTimeoutMs, MaxReceives: a.MaxReceives,
		MaxExpiries: a.MaxExpiries, DeadLetter: a.DeadLetter, OnExpire: a.OnExpire, DefaultDelayMs: a.DefaultDelayMs,
		RetentionMs: a.RetentionMs, MaxMessageBytes: a.MaxMessageBytes, DedupWindowMs: a.DedupWindowMs,
		PriorityLevels: a.PriorityLevels, Backoff: backoffJSON(a.Backoff), ExpiryBackoffMs: a.ExpiryBackoffMs,
		RetainAckedMs: a.RetainAckedMs, MaxInflight: a.MaxInflight, ReceiveWaitMaxMs: a.ReceiveWaitMaxMs,
		FIFO: a.FIFO, ContentDedup: a.ContentDedup, DedupConflict: a.DedupConflict, DedupScope: a.DedupScope,
		MaxUnclaimedAgeMs: a.MaxUnclaimedAgeMs,
	}
}

// backoffPatchJSON is queues.BackoffPatch on the wire.
type backoffPatchJSON struct {
	InitialMs  *int64   `json:"initial_ms,omitempty"`
	Multiplier *float64 `json:"multiplier,omitempty"`
	MaxMs      *int64   `json:"max_ms,omitempty"`
	Jitter     *float64 `json:"jitter,omitempty"`
}

// attributesPatchJSON is a create or update request: queues.AttributesPatch.
type attributesPatchJSON struct {
	Partitions          *int32            `json:"partitions,omitempty"`
	VisibilityTimeoutMs *int64            `json:"visibility_timeout_ms,omitempty"`
	MaxReceives         *int32            `json:"max_receives,omitempty"`
	MaxExpiries         *int32            `json:"max_expiries,omitempty"`
	DeadLetter          *string           `json:"dead_letter,omitempty"`
	OnExpire            *string           `json:"on_expire,omitempty"`
	DefaultDelayMs      *int64            `json:"default_delay_ms,omitempty"`
	RetentionMs         *int64            `json:"retention_ms,omitempty"`
	MaxMessageBytes     *int64            `json:"max_message_bytes,omitempty"`
	DedupWindowMs       *int64            `json:"dedup_window_ms,omitempty"`
	PriorityLevels      *int32            `json:"priority_levels,omitempty"`
	Backoff             *backoffPatchJSON `json:"backoff,omitempty"`
	ExpiryBackoffMs     *int64            `json:"expiry_backoff_ms,omitempty"`
	RetainAckedMs       *int64            `json:"retain_acked_ms,omitempty"`
	MaxInflight         *int64            `json:"max_inflight,omitempty"`
	ReceiveWaitMaxMs    *int64            `json:"receive_wait_max_ms,omitempty"`
	FIFO                *bool             `json:"fifo,omitempty"`
	ContentDedup        *bool             `json:"content_dedup,omitempty"`
	DedupConflict       *string           `json:"dedup_conflict,omitempty"`
	DedupScope          *string           `json:"dedup_scope,omitempty"`
	MaxUnclaimedAgeMs   *int64            `json:"max_unclaimed_age_ms,omitempty"`
}

func (p *attributesPatchJSON) patch() *queues.AttributesPatch {
	out := &queues.AttributesPatch{
		Partitions: p.Partitions, VisibilityTimeoutMs: p.VisibilityTimeoutMs, MaxReceives: p.MaxReceives,
		MaxExpiries: p.MaxExpiries, DeadLetter: p.DeadLetter, OnExpire: p.OnExpire, DefaultDelayMs: p.DefaultDelayMs,
		RetentionMs: p.RetentionMs, MaxMessageBytes: p.MaxMessageBytes, DedupWindowMs: p.DedupWindowMs,
		PriorityLevels: p.PriorityLevels, ExpiryBackoffMs: p.ExpiryBackoffMs, RetainAckedMs: p.RetainAckedMs,
		MaxInflight: p.MaxInflight, ReceiveWaitMaxMs: p.ReceiveWaitMaxMs, FIFO: p.FIFO, ContentDedup: p.ContentDedup,
		DedupConflict: p.DedupConflict, DedupScope: p.DedupScope, MaxUnclaimedAgeMs: p.MaxUnclaimedAgeMs,
	}
	if p.Backoff != nil {
		b := queues.BackoffPatch(*p.Backoff)
		out.Backoff = &b
	}
	return out
}

// queueInfoJSON is queues.QueueInfo on the wire.
type queueInfoJSON struct {
	Name            string         `json:"name"`
	Kind            string         `json:"kind"`
	Topic           string         `json:"topic"`
	TopicID         string         `json:"topic_id"`
	Attributes      attributesJSON `json:"attributes"`
	DeadLetterQueue string         `json:"dead_letter_queue,omitempty"`
	DeadLetterFor   string         `json:"dead_letter_for,omitempty"`
	CreatedAt       int64          `json:"created_ms"`
	Available       int64          `json:"available"`
	Inflight        int64          `json:"inflight"`
}

func toQueueInfoJSON(q *queues.QueueInfo) queueInfoJSON {
	return queueInfoJSON{Name: q.Name, Kind: q.Kind, Topic: q.Topic, TopicID: q.TopicID,
		Attributes: toAttributesJSON(&q.Attributes), DeadLetterQueue: q.DeadLetterQueue, DeadLetterFor: q.DeadLetterFor,
		CreatedAt: q.CreatedAt, Available: q.Available, Inflight: q.Inflight}
}

// sendMessageJSON is one message of a send: the body (and key) as UTF-8
// text or as standard base64, times as RFC 3339.
type sendMessageJSON struct {
	Body       *string           `json:"body,omitempty"`
	BodyBase64 *string           `json:"body_base64,omitempty"`
	Key        *string           `json:"key,omitempty"`
	KeyBase64  *string           `json:"key_base64,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	DelayMs    *int64            `json:"delay_ms,omitempty"`
	DeliverAt  *string           `json:"deliver_at,omitempty"`
	Priority   *int32            `json:"priority,omitempty"`
	TTLMs      *int64            `json:"ttl_ms,omitempty"`
	ExpireAt   *string           `json:"expire_at,omitempty"`
	DedupID    *string           `json:"dedup_id,omitempty"`
	Group      *string           `json:"group,omitempty"`
	Partition  *int32            `json:"partition,omitempty"`
}

// sendRequestJSON is a send or send-batch.
type sendRequestJSON struct {
	Messages []sendMessageJSON `json:"messages"`
	Atomic   bool              `json:"atomic,omitempty"`
}

func (r *sendRequestJSON) request() queues.SendRequest {
	out := queues.SendRequest{Messages: make([]queues.SendMessage, len(r.Messages)), Atomic: r.Atomic}
	for i := range r.Messages {
		out.Messages[i] = r.Messages[i].message()
	}
	return out
}

// message decodes the wire forms of one message. What does not decode
// (both or neither of body and body_base64, bad base64, a time that is
// not RFC 3339) makes the message Invalid: queues answers it like any
// refused message, an item error or batch_rejected.
func (m *sendMessageJSON) message() queues.SendMessage {
	out := queues.SendMessage{Headers: m.Headers, Delay: msDurationOf(m.DelayMs), Priority: m.Priority, TTL: msDurationOf(m.TTLMs),
		DedupID: m.DedupID, Group: m.Group, Partition: m.Partition}
	invalid := func(code, field, format string, args ...any) queues.SendMessage {
		e := newNativeError(code, format, args...).with("field", field)
		out.Invalid = &queues.Error{Code: e.Code, Message: e.Message, Details: e.Details}
		return out
	}
	switch {
	case (m.Body == nil) == (m.BodyBase64 == nil):
		return invalid("invalid_body", "body", "give exactly one of body and body_base64")
	case m.Body != nil:
		out.Body = []byte(*m.Body)
	default:
		v, err := base64.StdEncoding.DecodeString(*m.BodyBase64)
		if err != nil {
			return invalid("invalid_base64", "body_base64", "body_base64 is not standard base64: %v", err)
		}
		out.Body = v
	}
	if m.Key != nil && m.KeyBase64 != nil {
		return invalid("conflicting_fields", "key", "give at most one of key and key_base64")
	}
	if m.Key != nil {
		out.Key = []byte(*m.Key)
	} else if m.KeyBase64 != nil {
		v, err := base64.StdEncoding.DecodeString(*m.KeyBase64)
		if err != nil {
			return invalid("invalid_base64", "key_base64", "key_base64 is not standard base64: %v", err)
		}
		out.Key = v
	}
	for _, t := range []struct {
		field string
		in    *string
		out   **time.Time
	}{{"deliver_at", m.DeliverAt, &out.DeliverAt}, {"expire_at", m.ExpireAt, &out.ExpireAt}} {
		if t.in == nil {
			continue
		}
		at, e := parseTime(t.field, *t.in)
		if e != nil {
			out.Invalid = &queues.Error{Code: e.Code, Message: e.Message, Details: e.Details}
			return out
		}
		*t.out = &at
	}
	return out
}

// sendResultJSON is the outcome of one message of a send.
type sendResultJSON struct {
	Index     int          `json:"index"`
	ID        string       `json:"id,omitempty"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Duplicate bool         `json:"duplicate,omitempty"`
	VisibleAt string       `json:"visible_at,omitempty"`
	ExpireAt  string       `json:"expire_at,omitempty"`
	Error     *nativeError `json:"error,omitempty"`
}

func toSendResultsJSON(rs []queues.SendResult) []sendResultJSON {
	out := make([]sendResultJSON, len(rs))
	for i, r := range rs {
		out[i] = sendResultJSON{Index: r.Index, ID: r.ID, Partition: r.Partition, Offset: r.Offset, Duplicate: r.Duplicate,
			VisibleAt: formatTime(r.VisibleAt), ExpireAt: formatTime(r.ExpireAt), Error: itemError(r.Error)}
	}
	return out
}

// itemError is the error of one item of a batch, nil for none.
func itemError(e *queues.Error) *nativeError {
	if e == nil {
		return nil
	}
	return errorOf(e)
}

// receiveRequestJSON is a receive; body_encoding (auto or base64) is how
// the answer carries bodies and keys.
type receiveRequestJSON struct {
	MaxMessages         int      `json:"max_messages,omitempty"`
	MaxBytes            int64    `json:"max_bytes,omitempty"`
	VisibilityTimeoutMs *int64   `json:"visibility_timeout_ms,omitempty"`
	WaitMs              *int64   `json:"wait_ms,omitempty"`
	Group               string   `json:"group,omitempty"`
	Consumer            string   `json:"consumer,omitempty"`
	RequestID           *string  `json:"request_id,omitempty"`
	BodyEncoding        string   `json:"body_encoding,omitempty"`
	Ack                 []string `json:"ack,omitempty"`
}

func (r *receiveRequestJSON) request() queues.ReceiveRequest {
	return queues.ReceiveRequest{MaxMessages: r.MaxMessages, MaxBytes: r.MaxBytes, VisibilityTimeout: msDurationOf(r.VisibilityTimeoutMs),
		Wait: msDurationOf(r.WaitMs), Group: r.Group, Consumer: r.Consumer, RequestID: r.RequestID, Ack: r.Ack}
}

// checkBodyEncoding validates body_encoding; it says whether bodies go
// out as base64.
func checkBodyEncoding(v string) (bool, *nativeError) {
	switch v {
	case "", "auto":
		return false, nil
	case "base64":
		return true, nil
	}
	return false, newNativeError("invalid_enum", "body_encoding is %q; it must be auto or base64", v).with("field", "body_encoding")
}

// messageJSON is a received or browsed message. Body and key go out as
// UTF-8 text when they are, else (or with body_encoding base64) as base64.
type messageJSON struct {
	ID         string              `json:"id"`
	Partition  int32               `json:"partition"`
	Offset     int64               `json:"offset"`
	Receipt    string              `json:"receipt,omitempty"`
	State      string              `json:"state,omitempty"`
	Body       *string             `json:"body,omitempty"`
	BodyBase64 *string             `json:"body_base64,omitempty"`
	Key        *string             `json:"key,omitempty"`
	KeyBase64  *string             `json:"key_base64,omitempty"`
	Headers    map[string]string   `json:"headers,omitempty"`
	Priority   int                 `json:"priority"`
	Deliveries uint32              `json:"deliveries"`
	Expiries   uint32              `json:"expiries,omitempty"`
	Nacks      uint32              `json:"nacks,omitempty"`
	EnqueuedAt string              `json:"enqueued_at"`
	VisibleAt  string              `json:"visible_at,omitempty"`
	LeaseUntil string              `json:"lease_until,omitempty"`
	ExpireAt   string              `json:"expire_at,omitempty"`
	LastError  string              `json:"last_error,omitempty"`
	DeadLetter *deadLetterInfoJSON `json:"dead_letter,omitempty"`
}

// deadLetterInfoJSON is queues.DeadLetterInfo on the wire.
type deadLetterInfoJSON struct {
	Reason      string `json:"reason"`
	Detail      string `json:"detail,omitempty"`
	FailedAt    string `json:"failed_at,omitempty"`
	SourceQueue string `json:"source_queue,omitempty"`
	SourceID    string `json:"source_id,omitempty"`
	Deliveries  int64  `json:"deliveries"`
}

func toMessagesJSON(msgs []queues.Message, base64Bodies bool) []messageJSON {
	out := make([]messageJSON, len(msgs))
	for i := range msgs {
		out[i] = toMessageJSON(&msgs[i], base64Bodies)
	}
	return out
}

func toMessageJSON(m *queues.Message, base64Bodies bool) messageJSON {
	out := messageJSON{ID: m.ID, Partition: m.Partition, Offset: m.Offset, Receipt: m.Receipt, State: m.State,
		Headers: m.Headers, Priority: m.Priority, Deliveries: m.Deliveries, Expiries: m.Expiries, Nacks: m.Nacks,
		EnqueuedAt: formatTime(m.EnqueuedAt), VisibleAt: formatTime(m.VisibleAt), LeaseUntil: formatTime(m.LeaseUntil),
		ExpireAt: formatTime(m.ExpireAt), LastError: m.LastError}
	setBytes(&out.Body, &out.BodyBase64, m.Body, base64Bodies)
	if m.Key != nil {
		setBytes(&out.Key, &out.KeyBase64, m.Key, base64Bodies)
	}
	if d := m.DeadLetter; d != nil {
		dl := deadLetterInfoJSON(*d)
		out.DeadLetter = &dl
	}
	return out
}

// setBytes sets *text to b when b is valid UTF-8 (and base64 was not
// asked for), else *b64 to its standard base64.
func setBytes(text, b64 **string, b []byte, forceBase64 bool) {
	if !forceBase64 && utf8.Valid(b) {
		s := string(b)
		*text = &s
		return
	}
	s := base64.StdEncoding.EncodeToString(b)
	*b64 = &s
}

// itemResultJSON is the outcome of one receipt of an ack, nack or extend.
type itemResultJSON struct {
	Index     int          `json:"index"`
	Receipt   string       `json:"receipt,omitempty"`
	ID        string       `json:"id,omitempty"`
	Status    string       `json:"status,omitempty"`
	VisibleAt string       `json:"visible_at,omitempty"`
	LeaseTill string       `json:"lease_until,omitempty"`
	Error     *nativeError `json:"error,omitempty"`
}

func toItemResultsJSON(rs []queues.ItemResult) []itemResultJSON {
	if rs == nil {
		return nil
	}
	out := make([]itemResultJSON, len(rs))
	for i, r := range rs {
		out[i] = itemResultJSON{Index: r.Index, Receipt: r.Receipt, ID: r.ID, Status: r.Status,
			VisibleAt: formatTime(r.VisibleAt), LeaseTill: formatTime(r.LeaseTill), Error: itemError(r.Error)}
	}
	return out
}

// nackRequestJSON is queues.NackRequest on the wire.
type nackRequestJSON struct {
	Receipts   []string `json:"receipts"`
	DelayMs    *int64   `json:"delay_ms,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	DeadLetter bool     `json:"dead_letter,omitempty"`
}

func (r *nackRequestJSON) request() queues.NackRequest {
	return queues.NackRequest{Receipts: r.Receipts, Delay: msDurationOf(r.DelayMs), Reason: r.Reason, DeadLetter: r.DeadLetter}
}

// extendRequestJSON is queues.ExtendRequest on the wire.
type extendRequestJSON struct {
	Receipts            []string `json:"receipts"`
	VisibilityTimeoutMs int64    `json:"visibility_timeout_ms"`
}

func (r *extendRequestJSON) request() queues.ExtendRequest {
	return queues.ExtendRequest{Receipts: r.Receipts, VisibilityTimeout: msDuration(r.VisibilityTimeoutMs)}
}

// purgeRequestJSON is queues.PurgeRequest on the wire.
type purgeRequestJSON struct {
	States      []string `json:"states,omitempty"`
	OlderThanMs int64    `json:"older_than_ms,omitempty"`
}

func (r *purgeRequestJSON) request() queues.PurgeRequest {
	return queues.PurgeRequest{States: r.States, OlderThan: msDuration(r.OlderThanMs)}
}

// statsJSON is queues.Stats on the wire.
type statsJSON struct {
	Queue        string               `json:"queue"`
	Kind         string               `json:"kind"`
	Available    int64                `json:"available"`
	Ready        int64                `json:"ready"`
	Delayed      int64                `json:"delayed"`
	DelayedExact bool                 `json:"delayed_exact"`
	Inflight     int64                `json:"inflight"`
	Retained     int64                `json:"retained_acked"`
	OldestAgeMs  int64                `json:"oldest_age_ms"`
	DLQ          string               `json:"dead_letter_queue,omitempty"`
	DLQDepth     int64                `json:"dead_letter_depth"`
	Waiters      int                  `json:"waiters"`
	Partitions   []partitionStatsJSON `json:"partitions"`
	Totals       totalsJSON           `json:"totals"`
	Rates        ratesJSON            `json:"rates_per_sec"`
}

type partitionStatsJSON struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
}

type totalsJSON struct {
	Sent         int64            `json:"sent"`
	Received     int64            `json:"received"`
	Acked        int64            `json:"acked"`
	Nacked       int64            `json:"nacked"`
	Reaped       int64            `json:"reaped"`
	Expired      int64            `json:"expired"`
	DeadLettered map[string]int64 `json:"dead_lettered"`
	Discarded    int64            `json:"discarded"`
	Redriven     int64            `json:"redriven"`
}

type ratesJSON struct {
	Sent         float64 `json:"sent"`
	Received     float64 `json:"received"`
	Acked        float64 `json:"acked"`
	DeadLettered float64 `json:"dead_lettered"`
}

func toStatsJSON(s *queues.Stats) statsJSON {
	out := statsJSON{Queue: s.Queue, Kind: s.Kind, Available: s.Available, Ready: s.Ready, Delayed: s.Delayed,
		DelayedExact: s.DelayedExact, Inflight: s.Inflight, Retained: s.Retained, OldestAgeMs: s.OldestAgeMs,
		DLQ: s.DLQ, DLQDepth: s.DLQDepth, Waiters: s.Waiters, Totals: totalsJSON(s.Totals), Rates: ratesJSON(s.Rates)}
	if s.Partitions != nil {
		out.Partitions = make([]partitionStatsJSON, len(s.Partitions))
		for i, p := range s.Partitions {
			out.Partitions[i] = partitionStatsJSON(p)
		}
	}
	return out
}

// redriveRequestJSON is queues.RedriveRequest on the wire.
type redriveRequestJSON struct {
	Destination    string             `json:"destination,omitempty"`
	IDs            []string           `json:"ids,omitempty"`
	Filter         *redriveFilterJSON `json:"filter,omitempty"`
	RatePerSec     *int               `json:"rate_per_sec,omitempty"`
	KeepDeliveries bool               `json:"keep_deliveries,omitempty"`
	Limit          int64              `json:"limit,omitempty"`
}

// redriveFilterJSON selects dead-lettered messages; failed_before is RFC 3339.
type redriveFilterJSON struct {
	Reason       string `json:"reason,omitempty"`
	Source       string `json:"source,omitempty"`
	FailedBefore string `json:"failed_before,omitempty"`
}

func (r *redriveRequestJSON) request() (queues.RedriveRequest, *nativeError) {
	out := queues.RedriveRequest{Destination: r.Destination, IDs: r.IDs, RatePerSec: r.RatePerSec,
		KeepDeliveries: r.KeepDeliveries, Limit: r.Limit}
	if f := r.Filter; f != nil {
		out.Filter = &queues.RedriveFilter{Reason: f.Reason, Source: f.Source}
		if f.FailedBefore != "" {
			t, e := parseTime("filter.failed_before", f.FailedBefore)
			if e != nil {
				return out, e
			}
			out.Filter.FailedBefore = t
		}
	}
	return out, nil
}

// taskJSON is queues.TaskInfo on the wire.
type taskJSON struct {
	ID              uint64            `json:"id"`
	Kind            string            `json:"kind"`
	DLQ             string            `json:"dlq"`
	DLQID           uint32            `json:"dlq_id"`
	Destination     string            `json:"destination,omitempty"`
	IDs             []string          `json:"ids,omitempty"`
	Filter          redriveFilterJSON `json:"filter"`
	FailedBeforeMs  int64             `json:"failed_before_ms,omitempty"`
	RatePerSec      int               `json:"rate_per_sec"`
	KeepDeliveries  bool              `json:"keep_deliveries,omitempty"`
	Limit           int64             `json:"limit,omitempty"`
	State           string            `json:"state"`
	Moved           int64             `json:"moved"`
	Failed          int64             `json:"failed"`
	SkippedInflight int64             `json:"skipped_inflight"`
	Cursor          []int64           `json:"cursor"`
	End             []int64           `json:"end"`
	CreatedMs       int64             `json:"created_ms"`
	UpdatedMs       int64             `json:"updated_ms"`
	Error           string            `json:"error,omitempty"`
}

func toTaskJSON(t *queues.TaskInfo) taskJSON {
	out := taskJSON{ID: t.ID, Kind: t.Kind, DLQ: t.DLQ, DLQID: t.DLQID, Destination: t.Destination, IDs: t.IDs,
		Filter:     redriveFilterJSON{Reason: t.Filter.Reason, Source: t.Filter.Source, FailedBefore: formatTime(t.Filter.FailedBefore)},
		RatePerSec: t.RatePerSec, KeepDeliveries: t.KeepDeliveries, Limit: t.Limit, State: t.State, Moved: t.Moved,
		Failed: t.Failed, SkippedInflight: t.SkippedInflight, Cursor: t.Cursor, End: t.End,
		CreatedMs: t.CreatedMs, UpdatedMs: t.UpdatedMs, Error: t.Error}
	if !t.Filter.FailedBefore.IsZero() {
		out.FailedBeforeMs = t.Filter.FailedBefore.UnixMilli()
	}
	return out
}
