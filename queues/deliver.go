package queues

import (
	"errors"
	"strconv"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// ReceiveRequest asks for up to MaxMessages ready messages.
type ReceiveRequest struct {
	MaxMessages int
	MaxBytes    int64
	// VisibilityTimeout and Wait count in whole milliseconds; nil: the
	// queue's visibility timeout, no wait.
	VisibilityTimeout *time.Duration
	Wait              *time.Duration
	Group             string
	Consumer          string
	// RequestID, when given, makes the receive safe to retry (memo.go):
	// 1 to RequestIDMax characters.
	RequestID *string
	// Ack lists receipts to settle before leasing, in the same write
	// (AckAndReceive); at most BatchMessagesMax.
	Ack []string
}

// requestID is the request's id, "" when it has none.
func (r *ReceiveRequest) requestID() string {
	if r.RequestID == nil {
		return ""
	}
	return *r.RequestID
}

// Message is a received (or browsed) message. Times that do not apply
// are the zero time.Time.
type Message struct {
	ID        string
	Partition int32
	Offset    int64
	Receipt   string
	State     string
	Body      []byte
	// Key is nil for a record without a key.
	Key        []byte
	Headers    map[string]string
	Priority   int
	Deliveries uint32
	Expiries   uint32
	Nacks      uint32
	EnqueuedAt time.Time
	// VisibleAt is set for an available message, LeaseUntil for a leased one.
	VisibleAt   time.Time
	LeaseUntil  time.Time
	ExpireAt    time.Time
	LastError   string
	DeadLetter  *DeadLetterInfo
	bodyMissing bool
}

// DeadLetterInfo is the story of a dead-lettered message, from its headers.
type DeadLetterInfo struct {
	Reason string
	Detail string
	// FailedAt is the x-q-dlq-failed-at header as the record carries it.
	FailedAt    string
	SourceQueue string
	SourceID    string
	Deliveries  int64
}

// ReceiveResult is what Receive leased.
type ReceiveResult struct {
	Messages []Message
}

type leased struct {
	m  msgKey
	st deliveryState
}

// CheckReceive validates a receive request against the queue and returns
// the wait to apply in ms (0 for none).
func (e *Engine) CheckReceive(name string, req *ReceiveRequest) (int64, error) {
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return 0, qerr
	}
	q.mu.Lock()
	a := q.rec.Attributes
	q.mu.Unlock()
	if req.MaxMessages == 0 {
		req.MaxMessages = 1
	}
	if req.MaxMessages < 1 || req.MaxMessages > ReceiveMessagesMax {
		return 0, rangeErr("max_messages", 1, ReceiveMessagesMax)
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = ReceiveBytesDefault
	}
	if req.MaxBytes < ReceiveBytesMin || req.MaxBytes > ReceiveBytesMax {
		return 0, rangeErr("max_bytes", ReceiveBytesMin, ReceiveBytesMax)
	}
	if v := req.VisibilityTimeout; v != nil && (v.Milliseconds() < VisibilityMinMs || v.Milliseconds() > VisibilityMaxMs) {
		return 0, rangeErr("visibility_timeout_ms", VisibilityMinMs, VisibilityMaxMs)
	}
	var wait int64
	if req.Wait != nil {
		wait = req.Wait.Milliseconds()
		if wait < 0 || wait > a.ReceiveWaitMaxMs {
			return 0, rangeErr("wait_ms", 0, a.ReceiveWaitMaxMs)
		}
	}
	if req.Group != "" && req.Group != name {
		return 0, withField(errf(CodeGroupNotFound, "group %q does not exist; native queues have one built-in group named after the queue", req.Group), "group")
	}
	if len(req.Consumer) > ConsumerMax {
		return 0, rangeErr("consumer", 0, ConsumerMax)
	}
	if id := req.RequestID; id != nil && (len(*id) < 1 || len(*id) > RequestIDMax) {
		return 0, withField(errf(CodeInvalidRequestID, "request_id must be 1 to %d characters", RequestIDMax), "request_id")
	}
	if len(req.Ack) > BatchMessagesMax {
		return 0, rangeErr("ack", 0, BatchMessagesMax)
	}
	return wait, nil
}

// Receive leases up to req.MaxMessages ready messages, highest priority
// first, then earliest due. It never waits: long polling is the caller's
// loop over Receive and Wake. REQUIRES: CheckReceive accepted req.
func (e *Engine) Receive(name string, req ReceiveRequest, now time.Time) ([]Message, error) {
	msgs, _, err := e.AckAndReceive(name, req.Ack, req, now)
	return msgs, err
}

// AckAndReceive settles receipts as Ack does, then leases as Receive does,
// in one Pebble batch and so one synced write: a consumer that acks the
// batch it finished with its next receive pays one round trip and one fsync
// per batch instead of two (KIP-932's ShareFetch carries acknowledgements
// the same way). The ack results come back whatever is leased; when nothing
// can be leased the acks are still committed. A call with receipts is never
// refused with max_inflight_reached: at the limit it leases nothing and
// still answers the ack results.
// REQUIRES: CheckReceive accepted req; len(receipts) <= BatchMessagesMax.
func (e *Engine) AckAndReceive(name string, receipts []string, req ReceiveRequest, now time.Time) ([]Message, []ItemResult, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, nil, qerr
	}
	var results []ItemResult
	var valid []int
	if len(receipts) > 0 {
		results = make([]ItemResult, len(receipts))
		valid = e.decodeReceipts(q, receipts, results)
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	a := q.rec.Attributes
	acks := &write{e: e, now: nowMs}
	freed, settled := e.ackLocked(q, receipts, valid, results, acks)
	b := e.store.NewBatch()
	for _, f := range acks.ops {
		f(b)
	}
	// A retry is answered from its memo before max_inflight is looked at:
	// the first attempt's own leases may be what fills it.
	requestID := req.requestID()
	if requestID != "" {
		again, live, err := e.replayMemoLocked(q, requestID, settled, nowMs)
		if err != nil {
			q.mu.Unlock()
			b.Close()
			return nil, nil, errStorage(err)
		}
		if live {
			// A retry: the first attempt's leases, nothing new. The memo is
			// written again so that the answer waits for a WAL sync, which
			// covers the first attempt's leases even if its own sync is
			// still in flight.
			r := q.memos[requestID]
			b.Set(memoKey(q.id, requestID), r.encode())
			return e.finishReceive(receiveCommit{q: q, b: b, acks: acks, got: again, replay: true, req: req, now: nowMs, results: results})
		}
	}
	inflight := q.inflight - freed
	if inflight >= a.MaxInflight && len(receipts) == 0 {
		n := q.inflight
		q.mu.Unlock()
		b.Close()
		return nil, results, errf(CodeMaxInflightReached, "queue %q has %d messages in flight, its max_inflight; ack some first", name, n)
	}
	visibility := a.VisibilityTimeoutMs
	if req.VisibilityTimeout != nil {
		visibility = req.VisibilityTimeout.Milliseconds()
	}
	got, err := e.leaseReadyLocked(q, b, leaseRequest{
		want: max(0, min(int64(req.MaxMessages), a.MaxInflight-inflight)), maxBytes: req.MaxBytes,
		visibilityMs: visibility, now: nowMs, settled: settled,
	})
	if err != nil {
		q.mu.Unlock()
		b.Close()
		q.resetBandsAfterFailure() // the popped entries are in Pebble only
		return nil, nil, errStorage(err)
	}
	var memo *receiveMemo
	if requestID != "" && len(got) > 0 {
		r := newMemo(got)
		memo = &r
		b.Set(memoKey(q.id, requestID), r.encode())
	}
	return e.finishReceive(receiveCommit{q: q, b: b, acks: acks, memo: memo, got: got, req: req, now: nowMs, results: results})
}

// leaseRequest is what one receive may lease: up to want messages of at
// most maxBytes together (the first one whatever its size), each for
// visibilityMs, skipping the messages settled by the acks of the same call.
type leaseRequest struct {
	want, maxBytes int64
	visibilityMs   int64
	now            int64
	settled        map[msgKey]bool
	// owner, for a Kafka share-group member's acquisition (share.go),
	// is written into the leases; parts, when set, are the only
	// partitions leased from.
	owner string
	parts map[int32]bool
}

// leaseReadyLocked leases ready messages, highest priority first, then
// earliest due: their rows move from the ready index to the lease index
// in b. Stale entries of the bands (settled, gone, changed, expired) are
// dropped on the way.
// REQUIRES: q.mu held.
func (e *Engine) leaseReadyLocked(q *queue, b *pebblestore.Batch, lr leaseRequest) ([]leased, error) {
	a := &q.rec.Attributes
	want := lr.want
	var got []leased
	var bytes int64
	for prio := int(a.PriorityLevels) - 1; prio >= 0 && int64(len(got)) < want; prio-- {
		band := &q.bands[prio]
		var skipped []readyEntry // of partitions not asked for
		for int64(len(got)) < want && len(skipped) < readyBufferSize {
			top, ok, err := q.peekBand(prio)
			if err != nil {
				return nil, err
			}
			if !ok || top.due > lr.now {
				break
			}
			if lr.settled[top.m] {
				band.pop() // acked above, in this batch
				continue
			}
			if lr.parts != nil && !lr.parts[top.m.part] {
				skipped = append(skipped, band.pop())
				continue
			}
			st, ok, err := e.getState(q, top.m)
			if err != nil {
				return nil, err
			}
			if !ok || st.State != stateAvailable || st.Due != top.due || int(st.Priority) != prio || st.Deliveries != top.deliveries {
				band.pop() // gone, or stale
				continue
			}
			if exp := expiryOf(&st, a); exp > 0 && exp <= lr.now {
				band.pop() // expired: the expiry sweep settles it
				continue
			}
			if len(got) > 0 && bytes+int64(st.Size) > lr.maxBytes {
				want = int64(len(got))
				break
			}
			band.pop()
			old := st
			st.State = stateInflight
			st.Deliveries++
			st.Deadline = lr.now + lr.visibilityMs
			st.LeaseStart = lr.now
			st.Owner = lr.owner
			if st.FirstRecv == 0 {
				st.FirstRecv = lr.now
			}
			if invariantsEnabled {
				checkTransition(&old, &st, lr.now)
			}
			b.Delete(readyKey(q.id, old.Priority, old.Due, top.m))
			b.Set(stateKey(q.id, top.m), st.encode())
			b.Set(leaseKey(q.id, st.Deadline, top.m), u32Bytes(st.Deliveries))
			bytes += int64(st.Size)
			got = append(got, leased{m: top.m, st: st})
		}
		for _, e := range skipped {
			band.insert(e) // still in Pebble: back in the buffer
		}
	}
	return got, nil
}

// receiveCommit is a receive ready to commit: b holds the acks' rows (acks
// runs their in-memory updates once applied) and, unless replay, the
// leases of got; with replay, got are a memo's existing leases. memo, when
// set, is the request's new memo; results are the acks' results.
type receiveCommit struct {
	q       *queue
	b       *pebblestore.Batch
	acks    *write
	memo    *receiveMemo
	got     []leased
	replay  bool
	req     ReceiveRequest
	now     int64
	results []ItemResult
}

// finishReceive commits c.b with the memo and answers the messages of
// c.got. REQUIRES: c.q.mu held; it is released.
func (e *Engine) finishReceive(c receiveCommit) ([]Message, []ItemResult, error) {
	q, b, acks, memo, got, req, now, results := c.q, c.b, c.acks, c.memo, c.got, c.req, c.now, c.results
	fresh := !c.replay
	if b.Empty() {
		// Nothing leased, nothing acked: the answer rests on what was read
		// (pendingWrite.finishAnswer).
		topic := q.topic
		q.mu.Unlock()
		b.Close()
		if err := e.syncBarrier(); err != nil {
			return nil, nil, err
		}
		return e.answer(q, topic, got, req, now), results, nil
	}
	if err := b.Apply(); err != nil {
		q.mu.Unlock()
		b.Close()
		if fresh {
			// Nothing was written; the popped entries are back in Pebble only.
			q.resetBandsAfterFailure()
		}
		return nil, nil, errStorage(err)
	}
	for _, f := range acks.onApplied {
		f()
	}
	if fresh {
		for _, l := range got {
			q.available--
			q.inflight++
			q.setLeaseLocked(l.m, l.st.Deliveries, l.st.Deadline)
		}
		q.totals.Received += int64(len(got))
	}
	if memo != nil {
		q.memos[req.requestID()] = *memo
	}
	if invariantsEnabled {
		q.checkQueueLocked()
	}
	topic := q.topic
	q.mu.Unlock()
	if err := b.Wait(); err != nil {
		return nil, nil, errStorage(err)
	}
	return e.answer(q, topic, got, req, now), results, nil
}

// answer reads the leased messages' records and gives each its receipt.
func (e *Engine) answer(q *queue, topic *topics.Topic, got []leased, req ReceiveRequest, now int64) []Message {
	if len(got) == 0 {
		return nil
	}
	rr := newRecordReader(topic)
	out := make([]Message, 0, len(got))
	for _, l := range got {
		msg := e.messageView(q, rr, l.m, &l.st, now)
		if msg.bodyMissing {
			continue // retention removed the record; the lease lapses and the sweep drops it
		}
		msg.Receipt = e.encodeReceipt(receipt{qid: q.id, m: l.m, epoch: l.st.Deliveries})
		out = append(out, msg)
	}
	return out
}

// resetBandsAfterFailure forgets the buffered ready entries so that they
// are reloaded from Pebble.
func (q *queue) resetBandsAfterFailure() {
	q.mu.Lock()
	for i := range q.bands {
		q.bands[i].reset(false)
	}
	q.mu.Unlock()
}

// messageView builds the API view of a message, reading its record.
func (e *Engine) messageView(q *queue, rr *recordReader, m msgKey, st *deliveryState, now int64) Message {
	msg := Message{
		ID: fmtID(m), Partition: m.part, Offset: m.off, Priority: int(st.Priority),
		Deliveries: st.Deliveries, Expiries: st.Expiries, Nacks: st.Nacks,
		EnqueuedAt: time.UnixMilli(st.Enqueued), LastError: st.LastError,
		State: stateName(st.State, st.Due, now),
	}
	switch st.State {
	case stateAvailable:
		msg.VisibleAt = time.UnixMilli(st.Due)
	case stateInflight:
		msg.LeaseUntil = time.UnixMilli(st.Deadline)
	}
	if st.ExpireAt > 0 {
		msg.ExpireAt = time.UnixMilli(st.ExpireAt)
	}
	rec, err := rr.read(m)
	if err != nil {
		msg.bodyMissing = true
		return msg
	}
	msg.Body, msg.Key = rec.Value, rec.Key
	var dl *DeadLetterInfo
	for _, h := range rec.Headers {
		if msg.Headers == nil {
			msg.Headers = map[string]string{}
		}
		msg.Headers[h.Key] = string(h.Value)
		if h.Key == HeaderDLQReason {
			dl = &DeadLetterInfo{}
		}
	}
	if dl != nil {
		dl.Reason = msg.Headers[HeaderDLQReason]
		dl.Detail = msg.Headers[HeaderDLQDetail]
		dl.FailedAt = msg.Headers[HeaderDLQFailedAt]
		dl.SourceQueue = msg.Headers[HeaderDLQSourceQueue]
		dl.SourceID = msg.Headers[HeaderDLQSourceID]
		dl.Deliveries, _ = strconv.ParseInt(msg.Headers[HeaderDLQDeliveries], 10, 64)
		msg.DeadLetter = dl
	}
	return msg
}

// ItemResult is the outcome of one receipt of an ack, nack or extend.
type ItemResult struct {
	Index     int
	Receipt   string
	ID        string
	Status    string    // acked, already_acked, requeued, dead_lettered, discarded, extended
	VisibleAt time.Time // requeued: when it is ready again
	LeaseTill time.Time // extended: the new deadline
	Error     *Error
}

// decodeReceipts checks receipts in order: invalid_receipt, wrong_queue,
// duplicate_in_request. Valid ones are returned with their index.
func (e *Engine) decodeReceipts(q *queue, receipts []string, results []ItemResult) []int {
	seen := map[string]bool{}
	var valid []int
	for i, s := range receipts {
		results[i] = ItemResult{Index: i, Receipt: s}
		r, err := e.decodeReceipt(s)
		if err != nil {
			results[i].Error = err
			continue
		}
		if r.qid != q.id {
			results[i].Error = errf(CodeWrongQueue, "the receipt belongs to another queue")
			continue
		}
		if seen[s] {
			results[i].Error = errf(CodeDuplicateInRequest, "the receipt appears twice in this request")
			continue
		}
		seen[s] = true
		results[i].ID = fmtID(r.m)
		valid = append(valid, i)
	}
	return valid
}

func checkReceiptCount(receipts []string) *Error {
	if len(receipts) < 1 || len(receipts) > BatchMessagesMax {
		return rangeErr("receipts", 1, BatchMessagesMax)
	}
	return nil
}

// getState reads a message's state row; ok false when it has none.
func (e *Engine) getState(q *queue, m msgKey) (deliveryState, bool, error) {
	v, err := e.store.Get(stateKey(q.id, m))
	if errors.Is(err, pebblestore.ErrNotFound) {
		return deliveryState{}, false, nil
	}
	if err != nil {
		return deliveryState{}, false, err
	}
	st, err := decodeState(v)
	return st, err == nil, err
}

// Ack settles leased messages. A receipt whose lease lapsed but whose
// message was not leased again is still accepted (late ack, as SQS).
func (e *Engine) Ack(name string, receipts []string, now time.Time) ([]ItemResult, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, qerr
	}
	if err := checkReceiptCount(receipts); err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(receipts))
	valid := e.decodeReceipts(q, receipts, results)
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	w := &write{e: e, now: nowMs}
	_, _ = e.ackLocked(q, receipts, valid, results, w)
	if err := w.commitUnlockAnswer(q.checkedUnlock); err != nil {
		return nil, err
	}
	return results, nil
}

// ackLocked adds the settlement of receipts[valid] to w (rows only: an ack
// never appends) and fills results. The in-memory counters change when w
// is applied. It returns how many leases
// the acks end (what they free of max_inflight) and the messages they
// settle: the late acks of lapsed leases among them are still in the ready
// bands, and a memo replay must not answer any of them, until w is applied.
// REQUIRES: q.mu held; decodeReceipts checked receipts[valid].
func (e *Engine) ackLocked(q *queue, receipts []string, valid []int, results []ItemResult, w *write) (freed int64, settled map[msgKey]bool) {
	for _, i := range valid {
		r := checkedReceipt(receipts[i])
		st, ok, err := e.getState(q, r.m)
		if err != nil {
			results[i].Error = errStorage(err)
			continue
		}
		switch {
		case !ok:
			results[i].Error = errf(CodeNotFound, "message %s is gone (acked, dead-lettered, expired or purged)", fmtID(r.m))
		case st.State == stateAcked:
			if st.Deliveries == r.epoch {
				results[i].Status = "already_acked"
			} else {
				results[i].Error = errf(CodeLeaseLost, "message %s was received again (delivery %d) and acked under that lease", fmtID(r.m), st.Deliveries)
			}
		case st.Deliveries != r.epoch:
			results[i].Error = errf(CodeLeaseLost, "the lease of this receipt ended and message %s was received again (delivery %d)", fmtID(r.m), st.Deliveries)
		default:
			results[i].Status = "acked"
			if st.State == stateInflight {
				freed++
			}
			if settled == nil {
				settled = map[msgKey]bool{}
			}
			settled[r.m] = true
			q.ackStateLocked(r.m, st, w)
		}
	}
	return freed, settled
}

// ackStateLocked adds the ack of message m (state old) to w: its rows go,
// or it is kept as acked for retain_acked_ms.
// REQUIRES: q.mu held.
func (q *queue) ackStateLocked(m msgKey, old deliveryState, w *write) {
	a, now := &q.rec.Attributes, w.now
	retain := a.RetainAckedMs > 0
	w.op(func(b *pebblestore.Batch) {
		q.removeRows(b, m, &old)
		if retain {
			done := old
			done.State = stateAcked
			done.Deadline = now
			done.Owner = ""
			if invariantsEnabled {
				checkTransition(&old, &done, now)
			}
			b.Set(stateKey(q.id, m), done.encode())
			b.Set(retainedKey(q.id, now, m), nil)
		}
	})
	w.onApplied = append(w.onApplied, func() {
		q.forgetLocked(m, &old)
		q.totals.Acked++
		if retain {
			q.retained++
		}
	})
}

// NackRequest returns leased messages: requeued after Delay (whole
// milliseconds; nil: the queue's backoff), or to the DLQ with DeadLetter
// (a reject).
type NackRequest struct {
	Receipts   []string
	Delay      *time.Duration
	Reason     string
	DeadLetter bool
}

// Nack requeues or dead-letters leased messages.
func (e *Engine) Nack(name string, req NackRequest, now time.Time) ([]ItemResult, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, qerr
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	results := make([]ItemResult, len(req.Receipts))
	valid := e.decodeReceipts(q, req.Receipts, results)
	q.mu.Lock()
	dlq := e.deadLetterQueueLocked(q)
	q.mu.Unlock()
	unlock := lockQueues(q, dlq)
	if q.deleted {
		unlock()
		return nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	if dlq != nil && dlq.deleted {
		dlq = nil
	}
	n := &nackRun{e: e, from: moveSource{q: q, dlq: dlq, rr: newRecordReader(q.topic)}, a: q.rec.Attributes,
		req: &req, now: nowMs, w: &write{e: e, now: nowMs}}
	for _, i := range valid {
		n.nackLocked(&results[i])
	}
	pw, err := applyMove(n.w, n.from, n.inserts, unlock)
	if err != nil {
		return nil, err
	}
	if err := pw.finishAnswer(e); err != nil {
		return nil, err
	}
	return results, nil
}

// check validates a nack's receipt count, delay and reason.
func (req *NackRequest) check() *Error {
	if err := checkReceiptCount(req.Receipts); err != nil {
		return err
	}
	if req.Delay != nil && (req.Delay.Milliseconds() < 0 || req.Delay.Milliseconds() > VisibilityMaxMs) {
		return rangeErr("delay_ms", 0, VisibilityMaxMs)
	}
	if len(req.Reason) > ReasonMax {
		return rangeErr("reason", 0, ReasonMax)
	}
	return nil
}

// nackRun is one nack: the write it builds and the band insertions of
// requeued messages, run once the write is applied.
type nackRun struct {
	e       *Engine
	from    moveSource
	a       Attributes
	req     *NackRequest
	now     int64
	w       *write
	inserts []func()
}

// nackLocked settles the message of one valid receipt (res.Receipt): to
// the DLQ (a reject, or past max_receives), expired, or requeued after the
// request's delay or the queue's backoff. A receipt whose lease ended is
// not_inflight, except for a reject.
// REQUIRES: the locks of the queue and of its DLQ held.
func (n *nackRun) nackLocked(res *ItemResult) {
	r := checkedReceipt(res.Receipt)
	st, ok, err := n.e.getState(n.from.q, r.m)
	if err != nil {
		res.Error = errStorage(err)
		return
	}
	if res.Error = n.nackable(r, st, ok); res.Error != nil {
		return
	}
	n.settleLocked(r.m, st, res)
}

// settleLocked dead-letters (a reject, or past max_receives), expires or
// requeues message m, whose lease may end (state st).
// REQUIRES: the locks of the queue and of its DLQ held.
func (n *nackRun) settleLocked(m msgKey, st deliveryState, res *ItemResult) {
	a, now := &n.a, n.now
	expired := expiryOf(&st, a)
	toDLQ := n.req.DeadLetter || a.MaxReceives > 0 && st.Deliveries >= uint32(a.MaxReceives) ||
		expired > 0 && expired <= now && expiryDeadLetters(a, &st, now)
	if toDLQ && n.from.dlq != nil {
		// Moving to the DLQ appends the message: not while the disk is
		// almost full. The lease is left as it is.
		if err := n.e.store.Space().Check(); err != nil {
			res.Error = errStorage(err)
			return
		}
	}
	switch {
	case n.req.DeadLetter:
		n.w.deadLetterLocked(n.from, m, st, ReasonRejected, n.req.Reason)
		res.Status = statusMoved(n.from.dlq)
	case a.MaxReceives > 0 && st.Deliveries >= uint32(a.MaxReceives):
		n.w.deadLetterLocked(n.from, m, st, ReasonMaxReceives, n.req.Reason)
		res.Status = statusMoved(n.from.dlq)
	case expired > 0 && expired <= now:
		n.e.expireLocked(n.w, n.from, m, st)
		res.Status = "expired"
	default:
		res.Status = "requeued"
		res.VisibleAt = time.UnixMilli(n.requeueLocked(m, st))
	}
}

// nackable is nil when receipt r's message (state st; ok false when it is
// gone) may be nacked: its lease is live, or, for a reject, the message is
// still in flight or was reaped but not received again.
func (n *nackRun) nackable(r receipt, st deliveryState, ok bool) *Error {
	live := ok && st.State == stateInflight && st.Deadline > n.now
	reaped := ok && st.State == stateAvailable
	switch {
	case !ok:
		return errf(CodeNotFound, "message %s is gone (acked, dead-lettered, expired or purged)", fmtID(r.m))
	case st.Deliveries != r.epoch:
		return errf(CodeLeaseLost, "the lease of this receipt ended and message %s was received again (delivery %d)", fmtID(r.m), st.Deliveries)
	case n.req.DeadLetter && (live || reaped || st.State == stateInflight):
		return nil // reject: to the DLQ
	case !live:
		return errf(CodeNotInflight, "the lease of message %s has ended; it is no longer held", fmtID(r.m))
	}
	return nil
}

// requeueLocked makes a nacked message available again after the
// request's delay, else the queue's backoff; it returns when.
func (n *nackRun) requeueLocked(m msgKey, st deliveryState) int64 {
	q := n.from.q
	delay := int64(0)
	if n.req.Delay != nil {
		delay = n.req.Delay.Milliseconds()
	} else {
		delay = n.e.backoff(n.a.Backoff, st.Deliveries)
	}
	old := st
	st.State = stateAvailable
	st.Nacks++
	st.Due = n.now + delay
	st.Deadline = 0
	st.Owner = ""
	if n.req.Reason != "" {
		st.LastError = n.req.Reason
	}
	nst := st
	if invariantsEnabled {
		checkTransition(&old, &nst, n.now)
	}
	n.w.op(func(b *pebblestore.Batch) {
		b.Delete(leaseKey(q.id, old.Deadline, m))
		b.Set(stateKey(q.id, m), nst.encode())
		b.Set(readyKey(q.id, nst.Priority, nst.Due, m), u32Bytes(nst.Deliveries))
	})
	n.w.onApplied = append(n.w.onApplied, func() {
		q.inflight--
		q.available++
		delete(q.leases, m)
		q.totals.Nacked++
	})
	n.inserts = append(n.inserts, func() {
		q.bands[nst.Priority].insert(readyEntry{due: nst.Due, m: m, deliveries: nst.Deliveries})
	})
	return nst.Due
}

func statusMoved(dlq *queue) string {
	if dlq == nil {
		return "discarded"
	}
	return "dead_lettered"
}

func (e *Engine) backoff(b Backoff, deliveries uint32) int64 {
	e.rndMu.Lock()
	defer e.rndMu.Unlock()
	return b.delay(deliveries, e.rnd)
}

// ExtendRequest extends leases to now + VisibilityTimeout (whole
// milliseconds).
type ExtendRequest struct {
	Receipts          []string
	VisibilityTimeout time.Duration
}

// Extend moves the deadline of live leases to now + the visibility
// timeout. A lease may last at most 12 hours from its receive
// (visibility_too_long, never clamped); a lapsed lease is not_inflight.
func (e *Engine) Extend(name string, req ExtendRequest, now time.Time) ([]ItemResult, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, qerr
	}
	if err := checkReceiptCount(req.Receipts); err != nil {
		return nil, err
	}
	visibility := req.VisibilityTimeout.Milliseconds()
	if visibility < VisibilityMinMs || visibility > VisibilityMaxMs {
		return nil, rangeErr("visibility_timeout_ms", VisibilityMinMs, VisibilityMaxMs)
	}
	results := make([]ItemResult, len(req.Receipts))
	valid := e.decodeReceipts(q, req.Receipts, results)
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	w := &write{e: e, now: nowMs}
	for _, i := range valid {
		r := checkedReceipt(req.Receipts[i])
		st, ok, err := e.getState(q, r.m)
		if err != nil {
			results[i].Error = errStorage(err)
			continue
		}
		switch {
		case !ok:
			results[i].Error = errf(CodeNotFound, "message %s is gone", fmtID(r.m))
			continue
		case st.Deliveries != r.epoch:
			results[i].Error = errf(CodeLeaseLost, "the lease of this receipt ended and message %s was received again", fmtID(r.m))
			continue
		case st.State != stateInflight || st.Deadline <= nowMs:
			results[i].Error = errf(CodeNotInflight, "the lease of message %s has ended", fmtID(r.m))
			continue
		}
		deadline := nowMs + visibility
		if deadline-st.LeaseStart > VisibilityMaxMs {
			e := errf(CodeVisibilityTooLong, "a lease may last at most %d ms from its receive; this one began %d ms ago", VisibilityMaxMs, nowMs-st.LeaseStart)
			results[i].Error = e
			continue
		}
		q.extendLocked(r.m, st, deadline, w)
		results[i].Status = "extended"
		results[i].LeaseTill = time.UnixMilli(deadline)
	}
	if err := w.commitUnlockAnswer(q.checkedUnlock); err != nil {
		return nil, err
	}
	return results, nil
}

// extendLocked adds the move of message m's lease (state st) to deadline
// to w.
// REQUIRES: q.mu held.
func (q *queue) extendLocked(m msgKey, st deliveryState, deadline int64, w *write) {
	old := st
	st.Deadline = deadline
	nst := st
	if invariantsEnabled {
		checkTransition(&old, &nst, w.now)
	}
	w.op(func(b *pebblestore.Batch) {
		b.Delete(leaseKey(q.id, old.Deadline, m))
		b.Set(leaseKey(q.id, nst.Deadline, m), u32Bytes(nst.Deliveries))
		b.Set(stateKey(q.id, m), nst.encode())
	})
	w.onApplied = append(w.onApplied, func() { q.setLeaseLocked(m, nst.Deliveries, nst.Deadline) })
}

// Wait registers a wake-up channel for long polling: it receives a value
// when a message may have become ready (send, nack, reaped lease, due
// time) or the queue was deleted. Call the returned cancel when done.
func (e *Engine) Wait(name string) (<-chan struct{}, func(), error) {
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, nil, qerr
	}
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	q.waiters[ch] = struct{}{}
	q.mu.Unlock()
	return ch, func() {
		q.mu.Lock()
		delete(q.waiters, ch)
		q.mu.Unlock()
	}, nil
}

// wakeLocked signals every parked receiver.
// REQUIRES: q.mu held.
func (q *queue) wakeLocked() {
	for ch := range q.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
