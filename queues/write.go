package queues

import (
	"strconv"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Dead-letter reasons (x-q-dlq-reason).
const (
	ReasonMaxReceives = "max_receives"
	ReasonMaxExpiries = "max_expiries"
	ReasonRejected    = "rejected"
	ReasonExpired     = "expired"
	ReasonUnclaimed   = "unclaimed"
	ReasonAdmin       = "admin"
)

// Headers the broker adds to dead-lettered records, readable by Kafka
// consumers of the DLQ topic.
const (
	HeaderDLQReason      = "x-q-dlq-reason"
	HeaderDLQDetail      = "x-q-dlq-last-error"
	HeaderDLQSourceQueue = "x-q-dlq-source-queue"
	HeaderDLQSourceID    = "x-q-dlq-source-id"
	HeaderDLQSourcePart  = "x-q-dlq-source-partition"
	HeaderDLQSourceOff   = "x-q-dlq-source-offset"
	HeaderDLQDeliveries  = "x-q-dlq-deliveries"
	HeaderDLQExpiries    = "x-q-dlq-expiries"
	HeaderDLQFailedAt    = "x-q-dlq-failed-at"
	HeaderDLQEnqueuedAt  = "x-q-dlq-enqueued-at"
	HeaderRedrivenFrom   = "x-q-redriven-from"
	HeaderRedriveCount   = "x-q-redrive-count"
)

// write is one atomic mutation: source-side rows (ops), and optionally
// records appended to other queues in the same Pebble batch.
type write struct {
	e       *Engine
	now     int64
	ops     []func(b *pebblestore.Batch)
	targets []*appendTarget
	// onApplied runs once the write is applied, under the locks held by
	// the caller: in-memory updates.
	onApplied []func()
}

// appendTarget collects records appended to one partition of a queue.
type appendTarget struct {
	q    *queue
	part int32
	recs []storedRecord
	sts  []deliveryState
	// rows[i], when set, adds rows of recs[i] that need its message key
	// (a send's dedup row) to the batch that appends it.
	rows []func(b *pebblestore.Batch, m msgKey)
	// after is called per record with its new message key once applied.
	after []func(m msgKey)
	// chunks are the record batches recs were split into (moveBatchBytes).
	chunks []appendChunk
}

// appendChunk is the append of recs[from:to] of a target.
type appendChunk struct {
	a        *topics.Append
	from, to int
}

// moveBatchBytes bounds the key, value and header bytes of one record
// batch of a move: a queue topic refuses batches over its
// max.message.bytes (queueTopicMessageBytes), and one write may move up to
// tickBudget messages of up to MessageBytesMax each into one partition.
// The margin covers the per-record framing.
const moveBatchBytes = SendBytesMax

func (w *write) op(f func(b *pebblestore.Batch)) { w.ops = append(w.ops, f) }

func (w *write) target(q *queue, part int32) *appendTarget {
	for _, t := range w.targets {
		if t.q == q && t.part == part {
			return t
		}
	}
	t := &appendTarget{q: q, part: part}
	w.targets = append(w.targets, t)
	return t
}

// addRecord appends rec to q (partition part) as a new available message.
func (t *appendTarget) addRecord(rec storedRecord, st deliveryState, after func(m msgKey)) {
	t.addRecordRows(rec, st, nil, after)
}

// addRecordRows is addRecord with rows that need the message key.
func (t *appendTarget) addRecordRows(rec storedRecord, st deliveryState, rows func(b *pebblestore.Batch, m msgKey), after func(m msgKey)) {
	t.recs = append(t.recs, rec)
	t.sts = append(t.sts, st)
	t.rows = append(t.rows, rows)
	t.after = append(t.after, after)
}

// commitUnlock applies w, calls unlock (releasing the locks apply
// required), then waits for the write to be durable: no lock is held across
// the fsync.
func (w *write) commitUnlock(unlock func()) error {
	pw, err := w.apply()
	unlock()
	if err != nil {
		return err
	}
	return pw.finish()
}

// commitUnlockAnswer is commitUnlock for a call that answers from what it
// read (finishAnswer).
func (w *write) commitUnlockAnswer(unlock func()) error {
	empty := len(w.ops) == 0 && len(w.targets) == 0 // apply writes no batch
	if err := w.commitUnlock(unlock); err != nil || !empty {
		return err
	}
	return w.e.syncBarrier()
}

// pendingWrite is an applied write; finish makes it durable.
type pendingWrite struct {
	batch   *pebblestore.Batch
	pa      *topics.PendingAppend
	targets []*appendTarget
	now     int64
}

// apply writes everything in one Pebble batch and runs onApplied.
// REQUIRES: the locks of every queue involved are held.
func (w *write) apply() (*pendingWrite, error) {
	pw := &pendingWrite{now: w.now}
	if len(w.targets) == 0 {
		if len(w.ops) == 0 {
			for _, f := range w.onApplied {
				f()
			}
			return pw, nil
		}
		b := w.e.store.NewBatch()
		for _, f := range w.ops {
			f(b)
		}
		if err := b.Apply(); err != nil {
			b.Close()
			return nil, errStorage(err)
		}
		pw.batch = b
		for _, f := range w.onApplied {
			f()
		}
		return pw, nil
	}
	// Every batch of every target, and the source rows (ops), go into one
	// Pebble batch or none: with per-partition appends, a refused one
	// (storage_full, a batch too large) would lose the messages whose
	// source rows another one carried.
	var appends []*topics.Append
	for _, t := range w.targets {
		p, ok := t.q.topic.Partition(t.part)
		if !ok {
			return nil, errf(CodeInternal, "queue %s has no partition %d", t.q.rec.Name, t.part)
		}
		t.chunks = t.chunks[:0]
		for from := 0; from < len(t.recs); {
			to, size := from, 0
			for to < len(t.recs) && (to == from || size+t.recs[to].size() <= moveBatchBytes) {
				size += t.recs[to].size()
				to++
			}
			raw, err := encodeBatch(t.recs[from:to], w.now)
			if err != nil {
				return nil, errf(CodeInternal, "encoding a batch for %s: %v", t.q.rec.Name, err)
			}
			t, first, end := t, from, to
			a := &topics.Append{Partition: p, Batch: raw, Extra: func(b *pebblestore.Batch, base int64) {
				attrs := t.q.rec.Attributes
				for i := first; i < end; i++ {
					m := msgKey{part: t.part, off: base + int64(i-first)}
					t.q.newMessageRowsLocked(b, &attrs, m, &t.sts[i])
					if t.rows[i] != nil {
						t.rows[i](b, m)
					}
				}
			}}
			t.chunks = append(t.chunks, appendChunk{a: a, from: from, to: to})
			appends = append(appends, a)
			from = to
		}
	}
	pa, err := w.e.tm.AppendAtomic(appends, func(b *pebblestore.Batch) {
		for _, f := range w.ops {
			f(b)
		}
	}, time.UnixMilli(w.now))
	if err != nil {
		return nil, errStorage(err)
	}
	pw.pa = pa
	for _, t := range w.targets {
		for _, c := range t.chunks {
			for i := c.from; i < c.to; i++ {
				t.q.available++
				if t.after[i] != nil {
					t.after[i](msgKey{part: t.part, off: c.a.BaseOffset + int64(i-c.from)})
				}
			}
		}
	}
	pw.targets = w.targets
	for _, f := range w.onApplied {
		f()
	}
	return pw, nil
}

// finish waits until the write is durable, then makes appended records
// visible to receivers. Call it without holding any queue lock.
func (pw *pendingWrite) finish() error {
	if pw == nil {
		return nil
	}
	var err error
	if pw.batch != nil {
		err = pw.batch.Wait()
	}
	if pw.pa != nil {
		err = pw.pa.Wait()
	}
	for _, t := range pw.targets {
		t.q.mu.Lock()
		if !t.q.deleted {
			for _, c := range t.chunks {
				for i := c.from; i < c.to; i++ {
					st := &t.sts[i]
					t.q.bands[st.Priority].insert(readyEntry{due: st.Due, m: msgKey{part: t.part, off: c.a.BaseOffset + int64(i-c.from)}, deliveries: st.Deliveries})
				}
			}
			t.q.wakeLocked()
		}
		t.q.mu.Unlock()
	}
	if err != nil {
		return errStorage(err)
	}
	return nil
}

// finishAnswer is finish for a call that answers a client from what it
// read (ack, nack, extend, receive). When the write holds nothing (every
// item refused), the answer still waits until every write it may have
// read is durable (pebblestore.Store.SyncBarrier): writes are visible from
// apply, durable only after finish, so without it a refusal could rest on
// a lease that a crash takes back (a receive whose answer was lost, then
// an ack of the previous receipt refused with lease_lost, and after the
// restart that receipt acks). A write that holds something needs no
// barrier: its WAL sync covers every batch applied before it.
func (pw *pendingWrite) finishAnswer(e *Engine) error {
	if err := pw.finish(); err != nil {
		return err
	}
	if pw.batch == nil && pw.pa == nil {
		return e.syncBarrier()
	}
	return nil
}

// syncBarrier waits until every write applied so far is durable.
func (e *Engine) syncBarrier() error {
	if err := e.store.SyncBarrier(); err != nil {
		return errStorage(err)
	}
	return nil
}

// newMessageRowsLocked adds the rows of a new available message m: its
// state row, its ready key and its expiry key, if it has an expiry.
// REQUIRES: q.mu held (expiryFrom).
func (q *queue) newMessageRowsLocked(b *pebblestore.Batch, attrs *Attributes, m msgKey, st *deliveryState) {
	b.Set(stateKey(q.id, m), st.encode())
	b.Set(readyKey(q.id, st.Priority, st.Due, m), u32Bytes(st.Deliveries))
	if exp := expiryOf(st, attrs); exp > 0 {
		b.Set(expiryKey(q.id, exp, m), nil)
		q.expiryFrom = min(q.expiryFrom, exp)
	}
}

// removeRows deletes a message's state row and its ready or lease key.
func (q *queue) removeRows(b *pebblestore.Batch, m msgKey, st *deliveryState) {
	b.Delete(stateKey(q.id, m))
	switch st.State {
	case stateAvailable:
		b.Delete(readyKey(q.id, st.Priority, st.Due, m))
	case stateInflight:
		b.Delete(leaseKey(q.id, st.Deadline, m))
	}
}

// forgetLocked updates the in-memory counters of a message that left.
// REQUIRES: q.mu held.
func (q *queue) forgetLocked(m msgKey, st *deliveryState) {
	switch st.State {
	case stateAvailable:
		q.available--
	case stateInflight:
		q.inflight--
		delete(q.leases, m)
	case stateAcked:
		q.retained--
	}
}

// deadLetterLocked moves a message of from.q to from.dlq within w: the
// record is copied with the dead-letter headers, the queue's rows are
// deleted. With no DLQ (dead_letter none), or when the record is gone, the
// message is discarded.
// REQUIRES: the locks of from.q and from.dlq held.
func (w *write) deadLetterLocked(from moveSource, m msgKey, st deliveryState, reason, detail string) {
	q, dlq, rr := from.q, from.dlq, from.rr
	w.op(func(b *pebblestore.Batch) { q.removeRows(b, m, &st) })
	w.onApplied = append(w.onApplied, func() { q.forgetLocked(m, &st) })
	if dlq == nil || dlq.deleted {
		w.onApplied = append(w.onApplied, func() { q.totals.Discarded++ })
		return
	}
	rec, err := rr.read(m)
	if err != nil {
		w.e.log.Warn().Err(err).Str("queue", q.rec.Name).Str("id", fmtID(m)).Msg("cannot copy a message to its dead-letter queue; it is discarded")
		w.onApplied = append(w.onApplied, func() { q.totals.Discarded++ })
		return
	}
	headers := make([]topics.RecordHeader, 0, len(rec.Headers)+10)
	for _, h := range rec.Headers {
		if len(h.Key) >= 8 && h.Key[:8] == "x-q-dlq-" {
			continue // a message dead-lettered twice keeps only its latest story
		}
		headers = append(headers, h)
	}
	hv := func(k, v string) { headers = append(headers, topics.RecordHeader{Key: k, Value: []byte(v)}) }
	hv(HeaderDLQReason, reason)
	if detail != "" {
		hv(HeaderDLQDetail, detail)
	}
	hv(HeaderDLQSourceQueue, q.rec.Name)
	hv(HeaderDLQSourceID, fmtID(m))
	hv(HeaderDLQSourcePart, strconv.Itoa(int(m.part)))
	hv(HeaderDLQSourceOff, strconv.FormatInt(m.off, 10))
	hv(HeaderDLQDeliveries, strconv.FormatUint(uint64(st.Deliveries), 10))
	hv(HeaderDLQExpiries, strconv.FormatUint(uint64(st.Expiries), 10))
	hv(HeaderDLQFailedAt, formatHeaderTime(w.now))
	hv(HeaderDLQEnqueuedAt, formatHeaderTime(st.Enqueued))
	out := storedRecord{Key: rec.Key, Value: rec.Value, Headers: headers}
	size := len(out.Key) + len(out.Value)
	for _, h := range headers {
		size += len(h.Key) + len(h.Value)
	}
	part := m.part % dlq.topic.NumPartitions()
	w.target(dlq, part).addRecord(out, deliveryState{State: stateAvailable, Due: w.now, Enqueued: w.now, Size: uint32(size)}, nil)
	w.onApplied = append(w.onApplied, func() { q.totals.DeadLettered[reason]++ })
}

// formatHeaderTime formats Unix ms as the dead-letter headers carry times
// (x-q-dlq-failed-at, x-q-dlq-enqueued-at): RFC 3339 UTC with
// milliseconds. It is a format of the stored records, which Kafka
// consumers of a DLQ read, not of the native API (httpapi formats its own).
func formatHeaderTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// parseHeaderTime reads a time of a dead-letter header in Unix ms.
func parseHeaderTime(s string) (int64, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// size is the record's key, value and header bytes.
func (r *storedRecord) size() int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
