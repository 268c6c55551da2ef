package queues

import (
	"fmt"
	"strings"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Kafka producers writing a queue's topic (issue 10 part 3: one delivery
// engine). A record produced over Kafka into a queue's topic is a queue
// message: the batch is appended as the producer sent it, through the
// log's own Append (so idempotent sequence checks and retries,
// compression and timestamps are the log's), and each record gets its
// state row, ready key and expiry key in the same Pebble batch, durable
// with it before the producer's acknowledgement. It is then receivable
// over HTTP and acquirable by share groups like a native send with no
// options: priority 0, the queue's default_delay_ms, no TTL of its own, no
// dedup_id (an idempotent producer's retries are the log's duplicates).
// Headers are kept as sent; the native API shows them as strings.

// AcceptsProduce reports whether Kafka producers may write the topic
// name as the queue's messages: true for a queue's own topic, false for a
// dead-letter queue created with its source (kind dlq: its records carry
// the dead-letter headers Kafka consumers of the DLQ rely on) and for any
// topic that is no queue's.
func (e *Engine) AcceptsProduce(name string) bool {
	q, err := e.queueByName(name)
	if err != nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.deleted && q.rec.Kind == "queue"
}

// ProducedWrite is the write of AppendProduced: applied, not yet durable.
// Wait must be called exactly once.
type ProducedWrite struct {
	pa    *topics.PendingAppend
	items []producedAppend
}

// producedAppend is one append of AppendProduced with its queue and the
// state of each of its records.
type producedAppend struct {
	q   *queue
	a   *topics.Append
	sts []deliveryState
}

// AppendProduced appends Kafka producers' batches (one per append, each a
// partition of a queue's topic, as a Produce request carries them) as
// queue messages. Each append gets its outcome as topics.Manager.Append
// gives it (Err, BaseOffset, Duplicate); on top of the log's checks, a
// record must fit the queue's limits (the native send's: key, header
// count, names and sizes, no reserved x-q- header, max_message_bytes),
// else its whole batch fails with topics.ErrInvalidRecord or
// topics.ErrMessageTooLarge and nothing of it is written. A topic that
// AcceptsProduce refuses gets a *topics.OwnedError; a transactional batch
// topics.ErrInvalidRecord (a transaction cannot include a queue). Like
// Send, the append runs under the queues' mutexes and no lock is held
// across the sync (Wait).
func (e *Engine) AppendProduced(appends []*topics.Append, now time.Time) *ProducedWrite {
	nowMs := now.UnixMilli()
	w := &ProducedWrite{}
	for _, a := range appends {
		q, attrs, err := e.produceTarget(a)
		if err == nil {
			var sts []deliveryState
			if sts, err = producedStates(a.Batch, &attrs, nowMs); err == nil {
				w.items = append(w.items, producedAppend{q: q, a: a, sts: sts})
				continue
			}
		}
		a.Err, a.BaseOffset = err, -1
	}
	if len(w.items) == 0 {
		return w
	}
	qs := make([]*queue, len(w.items))
	for i := range w.items {
		qs[i] = w.items[i].q
	}
	unlock := lockQueues(qs...)
	defer unlock()
	ok := make([]*topics.Append, 0, len(w.items))
	live := w.items[:0]
	for _, it := range w.items {
		if it.q.deleted {
			it.a.Err, it.a.BaseOffset = fmt.Errorf("%w: the queue %s is being deleted", topics.ErrUnknownTopic, it.q.rec.Name), -1
			continue
		}
		it.a.Extra = it.rowsLocked()
		ok = append(ok, it.a)
		live = append(live, it)
	}
	w.items = live
	w.pa = e.tm.Append(ok, now)
	for _, it := range w.items {
		if it.a.Err == nil && !it.a.Duplicate {
			it.q.available += int64(len(it.sts))
			it.q.totals.Sent += int64(len(it.sts))
		}
	}
	return w
}

// rowsLocked returns the append's Extra: the rows of each record, from
// the batch's base offset on (a produced batch's offset deltas are
// 0..n-1, topics.ValidateBatch).
// REQUIRES: it.q.mu held; the Extra runs inside the Append under it.
func (it producedAppend) rowsLocked() func(b *pebblestore.Batch, base int64) {
	q, sts, part := it.q, it.sts, it.a.Partition.Index
	attrs := q.rec.Attributes
	return func(b *pebblestore.Batch, base int64) {
		for i := range sts {
			q.newMessageRowsLocked(b, &attrs, msgKey{part: part, off: base + int64(i)}, &sts[i])
		}
	}
}

// produceTarget returns the queue an append writes and its attributes, or
// why Kafka producers may not write it.
func (e *Engine) produceTarget(a *topics.Append) (*queue, Attributes, error) {
	if a.Partition == nil {
		return nil, Attributes{}, topics.ErrUnknownTopic
	}
	name := a.Partition.Topic.Name
	refused := &topics.OwnedError{Topic: name, Owner: topics.OwnerQueue, Change: topics.ChangeProduce}
	if e.closed.Load() {
		return nil, Attributes{}, fmt.Errorf("%w: the broker is shutting down", topics.ErrUnknownTopic)
	}
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, Attributes{}, refused
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rec.Kind != "queue" || q.topic != a.Partition.Topic {
		return nil, Attributes{}, refused
	}
	return q, q.rec.Attributes, nil
}

// producedStates checks each record of a produced batch against the
// queue's limits and returns the state of each as a new message. A batch
// that does not decode is left to the append's validation, which answers
// it with the log's error.
func producedStates(batch []byte, a *Attributes, now int64) ([]deliveryState, error) {
	h, recs, err := topics.DecodeRecords(batch)
	if err != nil {
		return nil, err
	}
	if h.IsTransactional() {
		return nil, fmt.Errorf("%w: a transaction cannot write a native queue's topic (its records become messages at once; an abort could not take them back); produce without a transactional.id", topics.ErrInvalidRecord)
	}
	sts := make([]deliveryState, len(recs))
	for i := range recs {
		size, err := producedRecordSize(&recs[i], a)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		sts[i] = deliveryState{State: stateAvailable, Due: now + a.DefaultDelayMs, Enqueued: now, Size: uint32(size)}
	}
	return sts, nil
}

// producedRecordSize checks one produced record as prepareRecord checks a
// native message and returns its size (key, value and headers).
func producedRecordSize(r *topics.Record, a *Attributes) (int, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{topics.ErrInvalidRecord}, args...)...)
	}
	if len(r.Key) > KeyMax {
		return 0, invalid("a queue message's key is at most %d bytes; this one has %d", KeyMax, len(r.Key))
	}
	if len(r.Headers) > HeadersMax {
		return 0, invalid("a queue message has at most %d headers; this one has %d", HeadersMax, len(r.Headers))
	}
	size := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		switch {
		case len(h.Key) < 1 || len(h.Key) > HeaderKeyMax:
			return 0, invalid("header name %q must be 1 to %d bytes in a queue message", h.Key, HeaderKeyMax)
		case len(h.Value) > HeaderValueMax:
			return 0, invalid("header %q has %d bytes; a queue message's limit is %d", h.Key, len(h.Value), HeaderValueMax)
		case strings.HasPrefix(strings.ToLower(h.Key), ReservedHeaderPrefix):
			return 0, invalid("header %q: names starting with %s are reserved for the broker", h.Key, ReservedHeaderPrefix)
		}
		size += len(h.Key) + len(h.Value)
	}
	if int64(size) > a.MaxMessageBytes {
		return 0, fmt.Errorf("%w: the record is %d bytes (key, value and headers); the queue's max_message_bytes is %d", topics.ErrMessageTooLarge, size, a.MaxMessageBytes)
	}
	return size, nil
}

// Wait waits until the write is durable, then makes the new messages
// visible to receivers and share groups. Call it without holding any
// queue lock.
func (w *ProducedWrite) Wait() error {
	if w.pa == nil {
		return nil
	}
	err := w.pa.Wait()
	for _, it := range w.items {
		a := it.a
		if a.Err != nil || a.Duplicate {
			continue
		}
		q := it.q
		q.mu.Lock()
		if !q.deleted {
			for i := range it.sts {
				st := &it.sts[i]
				q.bands[st.Priority].insert(readyEntry{due: st.Due, m: msgKey{part: a.Partition.Index, off: a.BaseOffset + int64(i)}, deliveries: st.Deliveries})
			}
			q.wakeLocked()
		}
		q.mu.Unlock()
	}
	return err
}
