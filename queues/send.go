package queues

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// SendMessage is one message of a send. Body is required (an empty body is
// []byte{}); Key is nil for a record without a key. Optional fields are
// nil when not given; Delay and DeliverAt, TTL and ExpireAt exclude each
// other. Durations count in whole milliseconds (the unit of the rows).
type SendMessage struct {
	Body      []byte
	Key       []byte
	Headers   map[string]string
	Delay     *time.Duration
	DeliverAt *time.Time
	Priority  *int32
	TTL       *time.Duration
	ExpireAt  *time.Time
	DedupID   *string
	Group     *string
	Partition *int32
	// Invalid, when set, is why the transport could not read this message
	// (bad base64, a time that does not parse): Send answers the message
	// with it, as it answers a message it refuses itself (an item error,
	// or batch_rejected in an atomic request).
	Invalid *Error
}

// SendRequest is a send or send-batch: 1..1000 messages. With Atomic, one
// bad message rejects the whole request (batch_rejected) and nothing is
// written; otherwise each message succeeds or fails alone.
type SendRequest struct {
	Messages []SendMessage
	Atomic   bool
}

// SendResult is the outcome of one message. ExpireAt is the zero time for
// a message without a TTL.
type SendResult struct {
	Index     int
	ID        string
	Partition int32
	Offset    int64
	Duplicate bool
	VisibleAt time.Time
	ExpireAt  time.Time
	Error     *Error
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

// prepare checks one message against the queue's attributes (§3.5 table),
// one step per group of fields, in the order the table lists them.
func prepare(msg *SendMessage, a *Attributes, partitions int32, now int64) (preparedMessage, *Error) {
	p := preparedMessage{partition: -1}
	if msg.Invalid != nil {
		return p, msg.Invalid
	}
	if err := prepareRecord(msg, &p); err != nil {
		return p, err
	}
	if err := prepareSchedule(msg, a, &p, now); err != nil {
		return p, err
	}
	if err := preparePriority(msg, a, &p); err != nil {
		return p, err
	}
	if err := prepareExpiry(msg, a, &p, now); err != nil {
		return p, err
	}
	if err := prepareDedup(msg, a, &p); err != nil {
		return p, err
	}
	if err := preparePlacement(msg, &p, partitions); err != nil {
		return p, err
	}
	if int64(p.size) > a.MaxMessageBytes {
		e := withField(errf(CodeMessageTooLarge, "the message is %d bytes (key, value and headers); the queue's limit is %d", p.size, a.MaxMessageBytes), "body")
		e.Details["max"] = a.MaxMessageBytes
		return p, e
	}
	return p, nil
}

// prepareRecord builds the record: body, key and headers, and its size.
func prepareRecord(msg *SendMessage, p *preparedMessage) *Error {
	if msg.Body == nil {
		return withField(errf(CodeInvalidBody, "the message has no body"), "body")
	}
	p.rec.Value, p.rec.Key = msg.Body, msg.Key
	if len(p.rec.Key) > KeyMax {
		return rangeErr("key", 0, KeyMax)
	}
	if len(msg.Headers) > HeadersMax {
		return withField(errf(CodeTooManyHeaders, "%d headers; the limit is %d", len(msg.Headers), HeadersMax), "headers")
	}
	p.size = len(p.rec.Key) + len(p.rec.Value)
	names := make([]string, 0, len(msg.Headers))
	for k := range msg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := msg.Headers[k]
		if len(k) < 1 || len(k) > HeaderKeyMax {
			return withField(errf(CodeOutOfRange, "header name %q must be 1 to %d bytes", k, HeaderKeyMax), "headers")
		}
		if len(v) > HeaderValueMax {
			return withField(errf(CodeOutOfRange, "header %q has %d bytes; the limit is %d", k, len(v), HeaderValueMax), "headers")
		}
		if strings.HasPrefix(strings.ToLower(k), ReservedHeaderPrefix) {
			return withField(errf(CodeReservedHeader, "header %q: names starting with %s are reserved for the broker", k, ReservedHeaderPrefix), "headers")
		}
		p.rec.Headers = append(p.rec.Headers, topics.RecordHeader{Key: k, Value: []byte(v)})
		p.size += len(k) + len(v)
	}
	return nil
}

// retentionOf is how long the queue keeps a message at most.
func retentionOf(a *Attributes) int64 {
	if a.RetentionMs == 0 {
		return RetentionMaxMs
	}
	return a.RetentionMs
}

// prepareSchedule sets when the message becomes ready: the queue's default
// delay, delay_ms or deliver_at, within the queue's retention.
func prepareSchedule(msg *SendMessage, a *Attributes, p *preparedMessage, now int64) *Error {
	retention := retentionOf(a)
	p.due = now + a.DefaultDelayMs
	switch {
	case msg.Delay != nil && msg.DeliverAt != nil:
		return withField(errf(CodeConflictingFields, "give at most one of delay_ms and deliver_at"), "delay_ms")
	case msg.Delay != nil:
		delay := msg.Delay.Milliseconds()
		if delay < 0 {
			return rangeErr("delay_ms", 0, retention)
		}
		if delay > retention {
			return withField(errf(CodeDelayExceedsRetain, "delay_ms %d exceeds the queue's retention %d ms", delay, retention), "delay_ms")
		}
		p.due = now + delay
	case msg.DeliverAt != nil:
		at := msg.DeliverAt.UnixMilli()
		if at-now > retention {
			return withField(errf(CodeDelayExceedsRetain, "deliver_at is more than the queue's retention (%d ms) away", retention), "deliver_at")
		}
		p.due = max(now, at)
	}
	return nil
}

// preparePriority checks the priority against the queue's levels.
func preparePriority(msg *SendMessage, a *Attributes, p *preparedMessage) *Error {
	if msg.Priority == nil {
		return nil
	}
	if *msg.Priority < 0 || *msg.Priority >= a.PriorityLevels {
		e := withField(errf(CodePriorityOutOfRange, "priority %d is outside 0..%d (the queue has %d levels)", *msg.Priority, a.PriorityLevels-1, a.PriorityLevels), "priority")
		e.Details["min"], e.Details["max"] = 0, a.PriorityLevels-1
		return e
	}
	p.priority = uint8(*msg.Priority)
	return nil
}

// prepareExpiry sets the message's own TTL: ttl_ms or expire_at.
func prepareExpiry(msg *SendMessage, a *Attributes, p *preparedMessage, now int64) *Error {
	retention := retentionOf(a)
	switch {
	case msg.TTL != nil && msg.ExpireAt != nil:
		return withField(errf(CodeConflictingFields, "give at most one of ttl_ms and expire_at"), "ttl_ms")
	case msg.TTL != nil:
		ttl := msg.TTL.Milliseconds()
		if ttl < 1000 || ttl > retention {
			return rangeErr("ttl_ms", 1000, retention)
		}
		p.expireAt = now + ttl
	case msg.ExpireAt != nil:
		at := msg.ExpireAt.UnixMilli()
		if at <= now {
			return withField(errf(CodeExpireInPast, "expire_at %s is not in the future", msg.ExpireAt.UTC().Format(time.RFC3339Nano)), "expire_at")
		}
		if at-now > retention {
			return rangeErr("ttl_ms", 1000, retention)
		}
		p.expireAt = at
	}
	return nil
}

// prepareDedup checks the dedup_id and computes the dedup row's key: of
// the dedup_id, else of the body when the queue has content_dedup.
func prepareDedup(msg *SendMessage, a *Attributes, p *preparedMessage) *Error {
	if msg.DedupID != nil {
		id := *msg.DedupID
		ok := len(id) >= 1 && len(id) <= DedupIDMax
		for i := 0; ok && i < len(id); i++ {
			ok = id[i] >= 0x21 && id[i] <= 0x7e
		}
		if !ok {
			return withField(errf(CodeInvalidDedupID, "dedup_id must be 1 to %d printable ASCII characters without spaces", DedupIDMax), "dedup_id")
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
	return nil
}

// preparePlacement checks the FIFO group and the explicit partition.
func preparePlacement(msg *SendMessage, p *preparedMessage, partitions int32) *Error {
	if msg.Group != nil {
		return withField(errf(CodeFIFODisabled, "group is for FIFO queues; this queue is not FIFO"), "group")
	}
	if msg.Partition != nil {
		if *msg.Partition < 0 || *msg.Partition >= partitions {
			return withField(errf(CodeInvalidPartition, "partition %d is outside 0..%d", *msg.Partition, partitions-1), "partition")
		}
		p.partition = *msg.Partition
	}
	return nil
}

// Send appends messages to the queue's log and makes them available, all
// in one group-committed write through the write path of every append
// (write.apply, then pendingWrite.finish). It returns after the write is
// durable.
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
	s, err := prepareSend(&req, &attrs, q.topic.NumPartitions(), nowMs)
	if err != nil {
		return nil, err
	}
	// The disk is almost full: refuse the whole request before any row
	// (dedup included) is written, unless every message was invalid
	// anyway. topics.Manager.AppendAtomic refuses too, should the guard
	// turn low between here and the append.
	if slices.Contains(s.ok, true) {
		if err := e.store.Space().Check(); err != nil {
			return nil, errStorage(err)
		}
	}

	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, errf(CodeQueueNotFound, "queue %q does not exist", name)
	}
	if err := e.dedupSendLocked(q, &attrs, s, nowMs); err != nil {
		q.mu.Unlock()
		return nil, err
	}
	pw, werr := e.sendWriteLocked(q, &attrs, s, nowMs).apply()
	q.mu.Unlock()
	if werr == nil {
		werr = pw.finish() // durable now: visible to receivers
	}
	if werr != nil {
		s.failWritten(AsError(werr))
	}
	s.resolveDuplicates()
	return s.results, nil
}

// sendBatch is a send request on its way through Send: the outcome of
// each message, the prepared ones, which are still to be written (ok) and
// which repeat an earlier message of the request (duplicateOf).
type sendBatch struct {
	atomic   bool
	results  []SendResult
	prepared []preparedMessage
	ok       []bool
	// duplicateOf[i] is the index of the earlier message of this request
	// that message i repeats (same dedup key), -1 when it repeats none.
	// Its id is known once that message is written (resolveDuplicates).
	duplicateOf []int
}

// prepareSend checks every message (prepare). An invalid message is an
// item error, or batch_rejected for the whole request when it is atomic;
// a request over SendBytesMax is request_too_large.
func prepareSend(req *SendRequest, a *Attributes, partitions int32, now int64) (*sendBatch, *Error) {
	n := len(req.Messages)
	s := &sendBatch{atomic: req.Atomic, results: make([]SendResult, n), prepared: make([]preparedMessage, n),
		ok: make([]bool, n), duplicateOf: make([]int, n)}
	total := 0
	for i := range req.Messages {
		s.results[i] = SendResult{Index: i, Partition: -1, Offset: -1}
		s.duplicateOf[i] = -1
		p, err := prepare(&req.Messages[i], a, partitions, now)
		if err != nil {
			if req.Atomic {
				return nil, batchRejected(i, err)
			}
			s.results[i].Error = err
			continue
		}
		total += p.size
		s.prepared[i], s.ok[i] = p, true
	}
	if total > SendBytesMax {
		return nil, errf(CodeRequestTooLarge, "the messages add up to %d bytes; one request may carry %d", total, SendBytesMax)
	}
	return s, nil
}

// batchRejected is the error of an atomic request whose message i failed.
func batchRejected(i int, err *Error) *Error {
	return &Error{Code: CodeBatchRejected, Message: "message " + itoa(i) + ": " + err.Message,
		Details: map[string]any{"index": i, "code": err.Code}}
}

// sendWriteLocked builds the write of the messages still ok: each goes to
// its partition (explicit, else its key's hash, else round robin) as a new
// available message, with its dedup row; once applied, its result gets
// its id.
// REQUIRES: q.mu held.
func (e *Engine) sendWriteLocked(q *queue, a *Attributes, s *sendBatch, now int64) *write {
	w := &write{e: e, now: now}
	partitions := q.topic.NumPartitions()
	dedupWindowMs := a.DedupWindowMs
	for i := range s.prepared {
		if !s.ok[i] {
			continue
		}
		p := &s.prepared[i]
		part := p.partition
		if part < 0 {
			if len(p.rec.Key) > 0 {
				part = int32(murmur2(p.rec.Key)&0x7fffffff) % partitions
			} else {
				part = int32(q.rr % uint32(partitions))
				q.rr++
			}
		}
		st := deliveryState{State: stateAvailable, Priority: p.priority, Due: p.due, Enqueued: now, ExpireAt: p.expireAt, Size: uint32(p.size)}
		var rows func(b *pebblestore.Batch, m msgKey)
		if p.dedup {
			rows = func(b *pebblestore.Batch, m msgKey) {
				expires := now + dedupWindowMs
				b.Set(dedupKey(q.id, p.dedupHash), encodeDedup(dedupEntry{m: m, expires: expires, bodyHash: p.bodyHash, hasBody: true}))
				b.Set(dedupExpiryKey(q.id, expires, p.dedupHash), nil)
			}
		}
		r := &s.results[i]
		w.target(q, part).addRecordRows(p.rec, st, rows, func(m msgKey) {
			r.ID, r.Partition, r.Offset = fmtID(m), m.part, m.off
			r.VisibleAt = time.UnixMilli(p.due)
			if p.expireAt > 0 {
				r.ExpireAt = time.UnixMilli(p.expireAt)
			}
			q.totals.Sent++
		})
	}
	return w
}

// failWritten reports err on every message the write carried.
func (s *sendBatch) failWritten(err *Error) {
	for i := range s.results {
		if s.ok[i] {
			s.results[i].Error = err
		}
	}
}

// resolveDuplicates answers each repeat of an earlier message of the
// request with that message's id, or with its error when it failed.
func (s *sendBatch) resolveDuplicates() {
	for i, j := range s.duplicateOf {
		if j < 0 {
			continue
		}
		r := &s.results[j]
		s.results[i].ID, s.results[i].Partition, s.results[i].Offset = r.ID, r.Partition, r.Offset
		if r.Error != nil {
			s.results[i].Error, s.results[i].Duplicate = r.Error, false
		}
	}
}

// dedupSendLocked marks the duplicates among the prepared messages: a
// message whose dedup row is live (dedupLookupLocked) answers the
// original's id; a repeat of an earlier message of this request answers
// that message's id once it is written (duplicateOf, resolveDuplicates).
// A duplicate dedup_id with another body is the item error dedup_conflict
// when dedup_conflict is reject (batch_rejected, nothing written, in an
// atomic request). Duplicates and conflicts are taken out of ok.
// REQUIRES: q.mu held.
func (e *Engine) dedupSendLocked(q *queue, a *Attributes, s *sendBatch, now int64) *Error {
	reject := a.DedupConflict == DedupConflictReject
	seen := map[[16]byte]int{}
	for i := range s.prepared {
		if !s.ok[i] || !s.prepared[i].dedup {
			continue
		}
		p := &s.prepared[i]
		var conflict *Error
		if j, dup := seen[p.dedupHash]; dup {
			if reject && s.prepared[j].bodyHash != p.bodyHash {
				conflict = &Error{Code: CodeDedupConflict,
					Message: "message " + itoa(j) + " of this request has the same dedup id and another body; the queue's dedup_conflict is reject",
					Details: map[string]any{"field": "dedup_id", "index": j}}
			} else {
				s.results[i].Duplicate = true
				s.ok[i] = false
				s.duplicateOf[i] = j
				continue
			}
		} else {
			d, found, err := e.dedupLookupLocked(q, a, p.dedupHash, now)
			switch {
			case err != nil:
				s.results[i].Error = errStorage(err)
				s.ok[i] = false
				if s.atomic {
					return s.results[i].Error
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
				s.results[i] = SendResult{Index: i, ID: fmtID(d.m), Partition: d.m.part, Offset: d.m.off, Duplicate: true}
				s.ok[i] = false
				continue
			}
		}
		if s.atomic {
			return batchRejected(i, conflict)
		}
		s.results[i].Error = conflict
		s.ok[i] = false
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
