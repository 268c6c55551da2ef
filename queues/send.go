package queues

import (
	"encoding/base64"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// SendMessage is one message of a send request, as the client wrote it.
type SendMessage struct {
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

// SendRequest is a send or send-batch: 1..1000 messages. With Atomic, one
// bad message rejects the whole request (batch_rejected) and nothing is
// written; otherwise each message succeeds or fails alone.
type SendRequest struct {
	Messages []SendMessage `json:"messages"`
	Atomic   bool          `json:"atomic,omitempty"`
}

// SendResult is the outcome of one message.
type SendResult struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Duplicate bool   `json:"duplicate,omitempty"`
	VisibleAt string `json:"visible_at,omitempty"`
	ExpireAt  string `json:"expire_at,omitempty"`
	Error     *Error `json:"error,omitempty"`
}

// ReservedHeaderPrefix starts the headers the broker writes (dead-letter
// metadata, redrive marks); clients may not send them.
const ReservedHeaderPrefix = "x-q-"

type preparedMessage struct {
	rec       storedRecord
	priority  uint8
	due       int64
	expireAt  int64 // explicit TTL, 0 none
	dedup     bool
	dedupHash [16]byte // dedup row key: of the dedup_id, or of the body (content_dedup)
	bodyHash  [16]byte // SHA-256(body)[:16], kept in the dedup row for dedup_conflict
	partition int32    // -1: chosen by the engine
	size      int
}

// FormatTime formats Unix ms as RFC 3339 UTC with milliseconds.
func FormatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func parseTime(field, s string) (int64, *Error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, withField(errf(CodeInvalidJSON, "%s %q is not an RFC 3339 time", field, s), field)
	}
	return t.UnixMilli(), nil
}

// prepare checks one message against the queue's attributes (§3.5 table).
func prepare(msg *SendMessage, a *Attributes, partitions int32, now int64) (preparedMessage, *Error) {
	p := preparedMessage{partition: -1}
	switch {
	case (msg.Body == nil) == (msg.BodyBase64 == nil):
		return p, withField(errf(CodeInvalidBody, "give exactly one of body and body_base64"), "body")
	case msg.Body != nil:
		p.rec.Value = []byte(*msg.Body)
	default:
		v, err := base64.StdEncoding.DecodeString(*msg.BodyBase64)
		if err != nil {
			return p, withField(errf(CodeInvalidBase64, "body_base64 is not standard base64: %v", err), "body_base64")
		}
		p.rec.Value = v
	}
	if msg.Key != nil && msg.KeyBase64 != nil {
		return p, withField(errf(CodeConflictingFields, "give at most one of key and key_base64"), "key")
	}
	if msg.Key != nil {
		p.rec.Key = []byte(*msg.Key)
	} else if msg.KeyBase64 != nil {
		v, err := base64.StdEncoding.DecodeString(*msg.KeyBase64)
		if err != nil {
			return p, withField(errf(CodeInvalidBase64, "key_base64 is not standard base64: %v", err), "key_base64")
		}
		p.rec.Key = v
	}
	if len(p.rec.Key) > KeyMax {
		return p, rangeErr("key", 0, KeyMax)
	}
	if len(msg.Headers) > HeadersMax {
		return p, withField(errf(CodeTooManyHeaders, "%d headers; the limit is %d", len(msg.Headers), HeadersMax), "headers")
	}
	size := len(p.rec.Key) + len(p.rec.Value)
	names := make([]string, 0, len(msg.Headers))
	for k := range msg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := msg.Headers[k]
		if len(k) < 1 || len(k) > HeaderKeyMax {
			return p, withField(errf(CodeOutOfRange, "header name %q must be 1 to %d bytes", k, HeaderKeyMax), "headers")
		}
		if len(v) > HeaderValueMax {
			return p, withField(errf(CodeOutOfRange, "header %q has %d bytes; the limit is %d", k, len(v), HeaderValueMax), "headers")
		}
		if strings.HasPrefix(strings.ToLower(k), ReservedHeaderPrefix) {
			return p, withField(errf(CodeReservedHeader, "header %q: names starting with %s are reserved for the broker", k, ReservedHeaderPrefix), "headers")
		}
		p.rec.Headers = append(p.rec.Headers, topics.RecordHeader{Key: k, Value: []byte(v)})
		size += len(k) + len(v)
	}
	retention := a.RetentionMs
	if retention == 0 {
		retention = RetentionMaxMs
	}
	p.due = now + a.DefaultDelayMs
	switch {
	case msg.DelayMs != nil && msg.DeliverAt != nil:
		return p, withField(errf(CodeConflictingFields, "give at most one of delay_ms and deliver_at"), "delay_ms")
	case msg.DelayMs != nil:
		if *msg.DelayMs < 0 {
			return p, rangeErr("delay_ms", 0, retention)
		}
		if *msg.DelayMs > retention {
			return p, withField(errf(CodeDelayExceedsRetain, "delay_ms %d exceeds the queue's retention %d ms", *msg.DelayMs, retention), "delay_ms")
		}
		p.due = now + *msg.DelayMs
	case msg.DeliverAt != nil:
		at, err := parseTime("deliver_at", *msg.DeliverAt)
		if err != nil {
			return p, err
		}
		if at-now > retention {
			return p, withField(errf(CodeDelayExceedsRetain, "deliver_at is more than the queue's retention (%d ms) away", retention), "deliver_at")
		}
		p.due = max(now, at)
	}
	if msg.Priority != nil {
		if *msg.Priority < 0 || *msg.Priority >= a.PriorityLevels {
			e := withField(errf(CodePriorityOutOfRange, "priority %d is outside 0..%d (the queue has %d levels)", *msg.Priority, a.PriorityLevels-1, a.PriorityLevels), "priority")
			e.Details["min"], e.Details["max"] = 0, a.PriorityLevels-1
			return p, e
		}
		p.priority = uint8(*msg.Priority)
	}
	switch {
	case msg.TTLMs != nil && msg.ExpireAt != nil:
		return p, withField(errf(CodeConflictingFields, "give at most one of ttl_ms and expire_at"), "ttl_ms")
	case msg.TTLMs != nil:
		if *msg.TTLMs < 1000 || *msg.TTLMs > retention {
			return p, rangeErr("ttl_ms", 1000, retention)
		}
		p.expireAt = now + *msg.TTLMs
	case msg.ExpireAt != nil:
		at, err := parseTime("expire_at", *msg.ExpireAt)
		if err != nil {
			return p, err
		}
		if at <= now {
			return p, withField(errf(CodeExpireInPast, "expire_at %s is not in the future", *msg.ExpireAt), "expire_at")
		}
		if at-now > retention {
			return p, rangeErr("ttl_ms", 1000, retention)
		}
		p.expireAt = at
	}
	if msg.DedupID != nil {
		id := *msg.DedupID
		ok := len(id) >= 1 && len(id) <= DedupIDMax
		for i := 0; ok && i < len(id); i++ {
			ok = id[i] >= 0x21 && id[i] <= 0x7e
		}
		if !ok {
			return p, withField(errf(CodeInvalidDedupID, "dedup_id must be 1 to %d printable ASCII characters without spaces", DedupIDMax), "dedup_id")
		}
		if a.dedupEnabled() {
			p.dedupHash = dedupIDHash(id)
			p.bodyHash, _ = bodyHashes(p.rec.Value)
			p.dedup = true
		}
	} else if a.ContentDedup && a.dedupEnabled() {
		p.bodyHash, p.dedupHash = bodyHashes(p.rec.Value)
		p.dedup = true
	}
	if msg.Group != nil {
		return p, withField(errf(CodeFIFODisabled, "group is for FIFO queues; this queue is not FIFO"), "group")
	}
	if msg.Partition != nil {
		if *msg.Partition < 0 || *msg.Partition >= partitions {
			e := withField(errf(CodeInvalidPartition, "partition %d is outside 0..%d", *msg.Partition, partitions-1), "partition")
			return p, e
		}
		p.partition = *msg.Partition
	}
	if int64(size) > a.MaxMessageBytes {
		e := withField(errf(CodeMessageTooLarge, "the message is %d bytes (key, value and headers); the queue's limit is %d", size, a.MaxMessageBytes), "body")
		e.Details["max"] = a.MaxMessageBytes
		return p, e
	}
	p.size = size
	return p, nil
}

// Send appends messages to the queue's log and makes them available, all
// in one group-committed write. It returns after the write is durable.
func (e *Engine) Send(name string, req SendRequest, now time.Time) ([]SendResult, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, qerr
	}
	if len(req.Messages) < 1 || len(req.Messages) > BatchMessagesMax {
		return nil, rangeErr("messages", 1, BatchMessagesMax)
	}
	q.mu.Lock()
	attrs := q.rec.Attributes
	q.mu.Unlock()
	partitions := q.topic.NumPartitions()
	results := make([]SendResult, len(req.Messages))
	prepared := make([]preparedMessage, len(req.Messages))
	ok := make([]bool, len(req.Messages))
	total := 0
	for i := range req.Messages {
		results[i] = SendResult{Index: i, Partition: -1, Offset: -1}
		p, err := prepare(&req.Messages[i], &attrs, partitions, nowMs)
		if err != nil {
			if req.Atomic {
				return nil, &Error{Code: CodeBatchRejected, Message: "message " + itoa(i) + ": " + err.Message,
					Details: map[string]any{"index": i, "code": err.Code}}
			}
			results[i].Error = err
			continue
		}
		total += p.size
		prepared[i], ok[i] = p, true
	}
	if total > SendBytesMax {
		return nil, errf(CodeRequestTooLarge, "the messages add up to %d bytes; one request may carry %d", total, SendBytesMax)
	}
	// The disk is almost full: refuse the whole request before any row
	// (dedup included) is written, unless every message was invalid
	// anyway. topics.Manager.Append refuses too, should the guard turn low
	// between here and the append.
	if slices.Contains(ok, true) {
		if err := e.store.Space().Check(); err != nil {
			return nil, errStorage(err)
		}
	}

	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, errf(CodeQueueNotFound, "queue %q does not exist", name)
	}
	// Deduplication: a live entry, or an earlier message of this request.
	if err := e.dedupSendLocked(q, &attrs, req.Atomic, prepared, ok, results, nowMs); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	// Partitions: explicit, else key hash, else round robin.
	byPart := map[int32][]int{}
	var order []int32
	for i := range prepared {
		if !ok[i] {
			continue
		}
		p := prepared[i].partition
		if p < 0 {
			if len(prepared[i].rec.Key) > 0 {
				p = int32(murmur2(prepared[i].rec.Key)&0x7fffffff) % partitions
			} else {
				p = int32(q.rr % uint32(partitions))
				q.rr++
			}
		}
		if _, seen := byPart[p]; !seen {
			order = append(order, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	type pendingInsert struct {
		priority uint8
		entry    readyEntry
	}
	var inserts []pendingInsert
	var appends []*topics.Append
	var appendIdx [][]int
	for _, part := range order {
		idx := byPart[part]
		recs := make([]storedRecord, len(idx))
		for j, i := range idx {
			recs[j] = prepared[i].rec
		}
		raw, err := encodeBatch(recs, nowMs)
		if err != nil {
			for _, i := range idx {
				results[i].Error = errf(CodeInternal, "encoding the batch: %v", err)
			}
			continue
		}
		pt, _ := q.topic.Partition(part)
		a := &topics.Append{Partition: pt, Batch: raw}
		a.Extra = func(b *pebblestore.Batch, base int64) {
			for j, i := range idx {
				p := &prepared[i]
				m := msgKey{part: part, off: base + int64(j)}
				st := deliveryState{State: stateAvailable, Priority: p.priority, Due: p.due, Enqueued: nowMs, ExpireAt: p.expireAt, Size: uint32(p.size)}
				b.Set(stateKey(q.id, m), st.encode())
				b.Set(readyKey(q.id, p.priority, p.due, m), u32Bytes(0))
				if exp := expiryOf(&st, &attrs); exp > 0 {
					b.Set(expiryKey(q.id, exp, m), nil)
					q.expiryFrom = min(q.expiryFrom, exp)
				}
				if p.dedup {
					expires := nowMs + attrs.DedupWindowMs
					b.Set(dedupKey(q.id, p.dedupHash), encodeDedup(dedupEntry{m: m, expires: expires, bodyHash: p.bodyHash, hasBody: true}))
					b.Set(dedupExpiryKey(q.id, expires, p.dedupHash), nil)
				}
			}
		}
		appends = append(appends, a)
		appendIdx = append(appendIdx, idx)
	}
	var pa *topics.PendingAppend
	if len(appends) > 0 {
		pa = e.tm.Append(appends, now)
	}
	for k, a := range appends {
		for j, i := range appendIdx[k] {
			if a.Err != nil {
				results[i].Error = errStorage(a.Err)
				continue
			}
			m := msgKey{part: a.Partition.Index, off: a.BaseOffset + int64(j)}
			p := &prepared[i]
			results[i].ID, results[i].Partition, results[i].Offset = fmtID(m), m.part, m.off
			results[i].VisibleAt = FormatTime(p.due)
			if p.expireAt > 0 {
				results[i].ExpireAt = FormatTime(p.expireAt)
			}
			q.available++
			q.totals.Sent++
			inserts = append(inserts, pendingInsert{priority: p.priority, entry: readyEntry{due: p.due, m: m}})
		}
	}
	q.mu.Unlock()

	if pa != nil {
		if err := pa.Wait(); err != nil {
			for k, a := range appends {
				for _, i := range appendIdx[k] {
					if results[i].Error == nil && a.Err != nil {
						results[i].Error = errStorage(a.Err)
					}
				}
			}
		}
	}
	// Durable now: visible to receivers.
	q.mu.Lock()
	if !q.deleted {
		for _, in := range inserts {
			q.bands[in.priority].insert(in.entry)
		}
		if len(inserts) > 0 {
			q.wakeLocked()
		}
	}
	q.mu.Unlock()
	for i := range results {
		if results[i].Duplicate && strings.HasPrefix(results[i].ID, "pending:") {
			j := atoi(strings.TrimPrefix(results[i].ID, "pending:"))
			r := results[j]
			results[i].ID, results[i].Partition, results[i].Offset = r.ID, r.Partition, r.Offset
			if r.Error != nil {
				results[i].Error, results[i].Duplicate = r.Error, false
			}
		}
	}
	return results, nil
}

// dedupSendLocked marks the duplicates among the prepared messages: a
// message whose dedup row is live (dedupLookupLocked) answers the
// original's id; a repeat of an earlier message of this request answers
// that message's id once it is written ("pending:<index>", resolved at the
// end of Send). A duplicate dedup_id with another body is the item error
// dedup_conflict when dedup_conflict is reject (batch_rejected, nothing
// written, in an atomic request). Duplicates and conflicts are taken out
// of ok.
// REQUIRES: q.mu held.
func (e *Engine) dedupSendLocked(q *queue, a *Attributes, atomic bool, prepared []preparedMessage, ok []bool, results []SendResult, now int64) *Error {
	reject := a.DedupConflict == DedupConflictReject
	seen := map[[16]byte]int{}
	for i := range prepared {
		if !ok[i] || !prepared[i].dedup {
			continue
		}
		p := &prepared[i]
		var conflict *Error
		if j, dup := seen[p.dedupHash]; dup {
			if reject && prepared[j].bodyHash != p.bodyHash {
				conflict = &Error{Code: CodeDedupConflict,
					Message: "message " + itoa(j) + " of this request has the same dedup id and another body; the queue's dedup_conflict is reject",
					Details: map[string]any{"field": "dedup_id", "index": j}}
			} else {
				results[i].Duplicate = true
				ok[i] = false
				results[i].ID = "pending:" + itoa(j) // resolved at the end of Send
				continue
			}
		} else {
			d, found, err := e.dedupLookupLocked(q, a, p.dedupHash, now)
			switch {
			case err != nil:
				results[i].Error = errStorage(err)
				ok[i] = false
				if atomic {
					return results[i].Error
				}
				continue
			case !found:
				seen[p.dedupHash] = i
				continue
			case reject && d.hasBody && d.bodyHash != p.bodyHash:
				conflict = &Error{Code: CodeDedupConflict,
					Message: "the dedup id was sent before (as " + fmtID(d.m) + ") with another body; the queue's dedup_conflict is reject",
					Details: map[string]any{"field": "dedup_id", "id": fmtID(d.m)}}
			default:
				results[i] = SendResult{Index: i, ID: fmtID(d.m), Partition: d.m.part, Offset: d.m.off, Duplicate: true}
				ok[i] = false
				continue
			}
		}
		if atomic {
			return &Error{Code: CodeBatchRejected, Message: "message " + itoa(i) + ": " + conflict.Message,
				Details: map[string]any{"index": i, "code": conflict.Code}}
		}
		results[i].Error = conflict
		ok[i] = false
	}
	return nil
}

// expiryOf is when the expiry sweep must look at a message: its TTL or
// the end of the queue's retention, whichever comes first; 0 for never.
func expiryOf(st *deliveryState, a *Attributes) int64 {
	exp := st.ExpireAt
	if a.RetentionMs > 0 {
		r := st.Enqueued + a.RetentionMs
		if exp == 0 || r < exp {
			exp = r
		}
	}
	return exp
}

// murmur2 is Kafka's default partitioner hash (Utils.murmur2).
func murmur2(data []byte) uint32 {
	const seed uint32 = 0x9747b28c
	const m uint32 = 0x5bd1e995
	const r = 24
	length := len(data)
	h := seed ^ uint32(length)
	n := length / 4
	for i := 0; i < n; i++ {
		k := uint32(data[i*4]) | uint32(data[i*4+1])<<8 | uint32(data[i*4+2])<<16 | uint32(data[i*4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	rest := data[n*4:]
	switch len(rest) {
	case 3:
		h ^= uint32(rest[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(rest[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(rest[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
