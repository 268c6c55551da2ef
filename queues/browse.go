package queues

import (
	"fmt"
	"sort"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// BrowseRequest lists messages without leasing them.
type BrowseRequest struct {
	// State filters: ready, delayed, inflight, acked, or "" for all.
	State string
	// After is a message id; listing starts after it.
	After string
	// Limit is 1..1000, default 100.
	Limit int
	// Reason and Source filter dead-lettered messages by their headers.
	Reason, Source string
}

// Browse lists a queue's live messages in (partition, offset) order. It
// takes no lease and changes nothing. next is the id to pass as After.
func (e *Engine) Browse(name string, req BrowseRequest, now time.Time) ([]Message, string, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, "", qerr
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	if req.Limit < 1 || req.Limit > 1000 {
		return nil, "", rangeErr("limit", 1, 1000)
	}
	switch req.State {
	case "", "ready", "delayed", "inflight", "acked":
	default:
		return nil, "", withField(errf(CodeInvalidEnum, "state %q is not one of ready, delayed, inflight, acked", req.State), "state")
	}
	prefix := tablePrefix(pebblestore.PrefixQueueState, q.id)
	lower := prefix
	if req.After != "" {
		m, err := parseID(req.After)
		if err != nil {
			return nil, "", withField(err, "after")
		}
		lower = pebblestore.PrefixEnd(stateKey(q.id, m))
	}
	it, err := e.store.NewIter(lower, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, "", errStorage(err)
	}
	defer it.Close()
	rr := newRecordReader(q.topic)
	var out []Message
	next := ""
	scanned := 0
	for ok := it.First(); ok && len(out) < req.Limit && scanned < 100000; ok = it.Next() {
		scanned++
		v, err := it.Value()
		if err != nil {
			return nil, "", errStorage(err)
		}
		st, err := decodeState(v)
		if err != nil {
			return nil, "", errStorage(err)
		}
		m := msgFromKeyTail(it.Key())
		next = fmtID(m)
		if req.State != "" && stateName(st.State, st.Due, nowMs) != req.State {
			continue
		}
		msg := e.messageView(q, rr, m, &st, nowMs)
		if req.Reason != "" && (msg.DeadLetter == nil || msg.DeadLetter.Reason != req.Reason) {
			continue
		}
		if req.Source != "" && (msg.DeadLetter == nil || msg.DeadLetter.SourceQueue != req.Source) {
			continue
		}
		out = append(out, msg)
	}
	if !it.Valid() {
		next = ""
	}
	if out == nil {
		out = []Message{}
	}
	return out, next, nil
}

// GetMessage returns one live message by id.
func (e *Engine) GetMessage(name, id string, now time.Time) (Message, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return Message{}, qerr
	}
	m, perr := parseID(id)
	if perr != nil {
		return Message{}, perr
	}
	st, ok, err := e.getState(q, m)
	if err != nil {
		return Message{}, errStorage(err)
	}
	if !ok {
		return Message{}, errf(CodeMessageNotFound, "queue %q has no live message %s", name, id)
	}
	return e.messageView(q, newRecordReader(q.topic), m, &st, nowMs), nil
}

// DeleteMessage removes one message whatever its state (a leased one
// too: its receipt then gets not_found).
func (e *Engine) DeleteMessage(name, id string, now time.Time) error {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return qerr
	}
	m, perr := parseID(id)
	if perr != nil {
		return perr
	}
	q.mu.Lock()
	st, ok, err := e.getState(q, m)
	if err != nil {
		q.mu.Unlock()
		return errStorage(err)
	}
	if !ok {
		q.mu.Unlock()
		return errf(CodeMessageNotFound, "queue %q has no live message %s", name, id)
	}
	w := &write{e: e, now: nowMs}
	w.op(func(b *pebblestore.Batch) {
		q.removeRows(b, m, &st)
		if st.State == stateAcked {
			b.Delete(retainedKey(q.id, st.Deadline, m))
		}
	})
	w.onApplied = append(w.onApplied, func() { q.forgetLocked(m, &st) })
	pw, aerr := w.apply()
	q.mu.Unlock()
	if aerr != nil {
		return aerr
	}
	return pw.finish()
}

// PurgeRequest selects the messages a purge deletes; the zero value
// selects every message.
type PurgeRequest struct {
	// States lists the states to delete (ready, delayed, inflight, acked);
	// nil for every state. Leased (inflight) messages are deleted only when
	// listed.
	States []string
	// OlderThan deletes only messages sent at least this long ago (whole
	// milliseconds); 0 for any age.
	OlderThan time.Duration
}

// purgeStates are the states a purge can select (the browse names).
var purgeStates = []string{"ready", "delayed", "inflight", "acked"}

// purgeChunk bounds the state rows one purge step examines: the queue's
// lock is released between steps.
var purgeChunk = 10000

// check validates the request and returns the selected states (nil: all).
func (r *PurgeRequest) check() (map[string]bool, *Error) {
	if older := r.OlderThan.Milliseconds(); older < 0 || older > RetentionMaxMs {
		return nil, rangeErr("older_than_ms", 0, RetentionMaxMs)
	}
	if r.States == nil {
		return nil, nil
	}
	if len(r.States) == 0 {
		e := rangeErr("states", 1, int64(len(purgeStates)))
		e.Message = "states lists no state; list at least one, or send null (or leave it out) for every state"
		return nil, e
	}
	want := map[string]bool{}
	for _, s := range r.States {
		ok := false
		for _, p := range purgeStates {
			ok = ok || s == p
		}
		if !ok {
			return nil, withField(errf(CodeInvalidEnum, "state %q is not one of ready, delayed, inflight, acked", s), "states")
		}
		want[s] = true
	}
	if len(want) == len(purgeStates) {
		return nil, nil
	}
	return want, nil
}

// PurgeMatching deletes the messages of a queue that req selects: with
// states or older_than_ms those that match, scanned in steps of purgeChunk
// state rows; without, all of them (Purge). It returns how many were
// deleted. Dedup entries stay: a dedup id outlives the message.
func (e *Engine) PurgeMatching(name string, req PurgeRequest, now time.Time) (int64, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return 0, qerr
	}
	want, verr := req.check()
	if verr != nil {
		return 0, verr
	}
	olderMs := req.OlderThan.Milliseconds()
	if want == nil && olderMs == 0 {
		return e.Purge(name, now)
	}
	return e.purgeMatching(q, name, want, olderMs, nowMs)
}

// Purge deletes every message of a queue (ready, delayed, in flight,
// retained). Dedup entries stay: a dedup id outlives the message. The log
// keeps the records for Kafka readers until retention.
func (e *Engine) Purge(name string, now time.Time) (int64, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return 0, qerr
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, errf(CodeQueueNotFound, "queue %q does not exist", name)
	}
	b := e.store.NewBatch()
	for _, p := range deliveryTables {
		start := tablePrefix(p, q.id)
		b.DeleteRange(start, pebblestore.PrefixEnd(start))
	}
	if err := b.Apply(); err != nil {
		q.mu.Unlock()
		b.Close()
		return 0, errStorage(err)
	}
	n := q.available + q.inflight + q.retained
	q.available, q.inflight, q.retained = 0, 0, 0
	q.leases = map[msgKey]leaseInfo{}
	q.leaseHeap = q.leaseHeap[:0]
	q.memos = map[string]receiveMemo{}
	for i := range q.bands {
		q.bands[i].reset(true)
	}
	q.expiryFrom = nowMs
	q.mu.Unlock()
	if err := b.Wait(); err != nil {
		return 0, errStorage(err)
	}
	e.log.Info().Str("queue", name).Int64("messages", n).Msg("queue purged")
	return n, nil
}

// purgeMatching deletes the messages in a state of want (nil: any) sent at
// least olderThanMs ago, one step of purgeChunk state rows at a time.
func (e *Engine) purgeMatching(q *queue, name string, want map[string]bool, olderThanMs, now int64) (int64, error) {
	prefix := tablePrefix(pebblestore.PrefixQueueState, q.id)
	upper := pebblestore.PrefixEnd(prefix)
	lower := prefix
	var total int64
	for {
		q.mu.Lock()
		if q.deleted {
			q.mu.Unlock()
			return total, errf(CodeQueueNotFound, "queue %q does not exist", name)
		}
		it, err := e.store.NewIter(lower, upper)
		if err != nil {
			q.mu.Unlock()
			return total, errStorage(err)
		}
		w := &write{e: e, now: now}
		var deleted int64
		done := true
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if n == purgeChunk {
				lower = append([]byte(nil), it.Key()...)
				done = false
				break
			}
			n++
			v, err := it.Value()
			if err != nil {
				_ = it.Close()
				q.mu.Unlock()
				return total, errStorage(err)
			}
			st, err := decodeState(v)
			if err != nil {
				_ = it.Close()
				q.mu.Unlock()
				return total, errStorage(err)
			}
			if want != nil && !want[stateName(st.State, st.Due, now)] {
				continue
			}
			if olderThanMs > 0 && now-st.Enqueued < olderThanMs {
				continue
			}
			m := msgFromKeyTail(it.Key())
			w.op(func(b *pebblestore.Batch) {
				q.removeRows(b, m, &st)
				if st.State == stateAcked {
					b.Delete(retainedKey(q.id, st.Deadline, m))
				}
			})
			w.onApplied = append(w.onApplied, func() { q.forgetLocked(m, &st) })
			deleted++
		}
		if err := it.Close(); err != nil {
			q.mu.Unlock()
			return total, errStorage(err)
		}
		pw, aerr := w.apply()
		q.mu.Unlock()
		if aerr != nil {
			return total, aerr
		}
		if err := pw.finish(); err != nil {
			return total, err
		}
		total += deleted
		if done {
			break
		}
	}
	states := "all"
	if want != nil {
		states = fmt.Sprint(sortedKeys(want))
	}
	e.log.Info().Str("queue", name).Str("states", states).Int64("older_than_ms", olderThanMs).Int64("messages", total).Msg("queue purged")
	return total, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Stats describes a queue's contents and traffic.
type Stats struct {
	Queue        string
	Kind         string
	Available    int64
	Ready        int64
	Delayed      int64
	DelayedExact bool
	Inflight     int64
	Retained     int64
	OldestAgeMs  int64
	DLQ          string
	DLQDepth     int64
	Waiters      int
	Partitions   []PartitionStats
	Totals       Totals
	Rates        Rates
}

// PartitionStats are the log offsets of one partition of the queue's topic.
type PartitionStats struct {
	Partition      int32
	LogStartOffset int64
	HighWatermark  int64
}

// Stats returns the queue's counters. Delayed is counted by a bounded scan
// of the ready index (delayed_exact false beyond 100000 keys).
func (e *Engine) Stats(name string, now time.Time) (Stats, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return Stats{}, qerr
	}
	q.mu.Lock()
	s := Stats{Queue: q.rec.Name, Kind: q.rec.Kind, Available: q.available, Inflight: q.inflight, Retained: q.retained,
		DLQ: q.rec.DeadLetterQueue, Waiters: len(q.waiters), Rates: q.rates.rates()}
	s.Totals = q.totals
	s.Totals.DeadLettered = map[string]int64{}
	for k, v := range q.totals.DeadLettered {
		s.Totals.DeadLettered[k] = v
	}
	levels := q.rec.Attributes.PriorityLevels
	dlq := e.deadLetterQueueLocked(q)
	q.mu.Unlock()
	if dlq != nil {
		dlq.mu.Lock()
		s.DLQDepth = dlq.available + dlq.inflight
		dlq.mu.Unlock()
	}
	// Delayed: ready index keys due after now.
	s.DelayedExact = true
	scanned := 0
	for p := 0; p < int(levels) && p < PriorityLevelsMax; p++ {
		prefix := readyBandPrefix(q.id, uint8(p))
		it, err := e.store.NewIter(readyKey(q.id, uint8(p), nowMs+1, msgKey{}), pebblestore.PrefixEnd(prefix))
		if err != nil {
			return Stats{}, errStorage(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if scanned++; scanned > 100000 {
				s.DelayedExact = false
				break
			}
			s.Delayed++
		}
		_ = it.Close()
	}
	s.Ready = max(s.Available-s.Delayed, 0)
	// Oldest: the lowest live offset of each partition.
	for _, p := range q.topic.Partitions() {
		s.Partitions = append(s.Partitions, PartitionStats{Partition: p.Index, LogStartOffset: p.LogStartOffset(), HighWatermark: p.HighWatermark()})
		prefix := appendMsg(tablePrefix(pebblestore.PrefixQueueState, q.id), msgKey{part: p.Index})[:9]
		it, err := e.store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
		if err != nil {
			return Stats{}, errStorage(err)
		}
		if it.First() {
			if v, err := it.Value(); err == nil {
				if st, err := decodeState(v); err == nil && st.State != stateAcked {
					s.OldestAgeMs = max(s.OldestAgeMs, nowMs-st.Enqueued)
				}
			}
		}
		_ = it.Close()
	}
	return s, nil
}
