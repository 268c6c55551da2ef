package queues

import (
	"bytes"
	"container/heap"
	"errors"
	"strconv"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// tickBudget bounds the leases reaped and the expiry keys swept per queue
// per Tick, so one Tick never holds a queue for long.
const tickBudget = 1000

// sweepIntervalMs is how often the dedup and retained-ack tables are swept.
const sweepIntervalMs = 10000

// unclaimedIntervalMs is how often the unclaimed sweep runs: how late past
// max_unclaimed_age_ms a message may be dead-lettered.
const unclaimedIntervalMs = 1000

// deadLetterRetryMs is how long a lease that ran out stays in flight when
// its message is due for the DLQ while the disk is almost full: the move
// appends the message to the DLQ, so it waits, and is tried again after
// this long (in memory only; a restart tries at once).
const deadLetterRetryMs = 5000

// unclaimedCursorLagMs keeps the unclaimed sweep's cursors this far behind
// now, so a send that read the clock before a sweep and wrote its ready key
// after it is still examined.
const unclaimedCursorLagMs = 10000

// TickReport says what one Tick did, for metrics.
type TickReport struct {
	Reaped       int
	Requeued     int
	Expired      int
	Discarded    int
	DeadLettered map[string]int
	DedupSwept   int
	AckedSwept   int
	RedriveMoved int
	// DeadLetterDeferred counts leases that ran out while the disk was
	// almost full and whose message waits in flight for its DLQ move.
	DeadLetterDeferred int
	Errors             int
}

// Tick runs the queue maintenance due at now: expired leases (requeued,
// or dead-lettered at max_receives / max_expiries), TTL and retention
// expiry, dedup and retained-ack cleanup, redrive steps, and wakes long
// polls whose messages became due. Each step is bounded; calls are
// serialized.
func (e *Engine) Tick(now time.Time) TickReport {
	nowMs := now.UnixMilli()
	rep := TickReport{DeadLettered: map[string]int{}}
	if e.closed.Load() {
		return rep
	}
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	for _, q := range e.allQueues() {
		if err := e.tickQueue(q, nowMs, &rep); err != nil {
			rep.Errors++
			e.log.Error().Err(err).Str("queue", q.rec.Name).Msg("queue maintenance failed; retrying at the next tick")
		}
	}
	e.runTasks(nowMs, &rep)
	return rep
}

func (e *Engine) tickQueue(q *queue, now int64, rep *TickReport) (retErr error) {
	q.mu.Lock()
	dlq := e.deadLetterQueueLocked(q)
	q.rates.sample(now, &q.totals)
	q.mu.Unlock()
	unlock := lockQueues(q, dlq)
	// The sweep cursors move as the write is built; a write that fails
	// must leave them where they were, or the keys they passed would not
	// be swept again until a restart.
	expiryFrom, unclaimedAt, unclaimedFrom, sweepAt := q.expiryFrom, q.unclaimedAt, q.unclaimedFrom, q.sweepAt
	defer func() {
		if retErr != nil && unlock != nil {
			q.expiryFrom, q.unclaimedAt, q.unclaimedFrom, q.sweepAt = expiryFrom, unclaimedAt, unclaimedFrom, sweepAt
		}
		if unlock != nil {
			unlock()
		}
	}()
	if q.deleted {
		return nil
	}
	if dlq != nil && dlq.deleted {
		dlq = nil
	}
	t := &tickRun{
		e: e, from: moveSource{q: q, dlq: dlq, rr: newRecordReader(q.topic)}, a: q.rec.Attributes, now: now, rep: rep,
		w: &write{e: e, now: now}, touched: map[msgKey]bool{}, dead: map[string]int{},
		// While the disk is almost full (pebblestore.SpaceGuard), no
		// message is copied to the DLQ: each step below that would move
		// one leaves it where it is and tries again later. Moves without a
		// DLQ (dead_letter none) only delete rows and go on.
		low: dlq != nil && e.store.Space().Low(),
	}
	if err := t.stepsLocked(); err != nil {
		q.restoreLeases(t.popped)
		return err
	}
	pw, err := t.w.apply()
	if err != nil {
		q.restoreLeases(t.popped)
		return err
	}
	t.appliedLocked()
	unlock()
	unlock = nil
	return pw.finish()
}

// moveSource is where a message settled by a sweep or a nack comes from:
// its queue, the queue's DLQ (nil with dead_letter none) and the reader of
// the queue's records, whose copy a dead-letter move appends.
type moveSource struct {
	q, dlq *queue
	rr     *recordReader
}

// applyMove applies w, a write that moves messages of from's queue
// (requeues, DLQ moves); once it is applied, inserts the ready entries it
// made and wakes the queue's receivers; then unlocks the queues (the
// invariants checked first). The caller waits on the result for
// durability, outside the locks.
// REQUIRES: the locks of from's queue and DLQ held; unlock releases them.
func applyMove(w *write, from moveSource, inserts []func(), unlock func()) (*pendingWrite, error) {
	pw, err := w.apply()
	if err == nil {
		for _, f := range inserts {
			f()
		}
		if len(inserts) > 0 {
			from.q.wakeLocked()
		}
	}
	if invariantsEnabled {
		from.q.checkQueueLocked()
		if from.dlq != nil {
			from.dlq.checkQueueLocked()
		}
	}
	unlock()
	return pw, err
}

// tickRun is one tick of one queue: the write it builds, the messages it
// settled (touched, so that no later step settles them twice), the lease
// entries it popped (restored if the write fails) and the ready entries
// to insert once it is applied.
type tickRun struct {
	e          *Engine
	from       moveSource
	a          Attributes
	now        int64
	low        bool // the disk is almost full: nothing is copied to the DLQ
	rep        *TickReport
	w          *write
	touched    map[msgKey]bool
	dead       map[string]int // dead-lettered per reason
	popped     []leaseEntry
	inserts    []readyEntry
	insertPrio []uint8
}

// stepsLocked builds the tick's write, step by step.
// REQUIRES: the locks of the queue and of its DLQ held.
func (t *tickRun) stepsLocked() error {
	q := t.from.q
	// 1. Leases that ran out.
	if err := t.reapLeasesLocked(); err != nil {
		return err
	}
	// 2. TTL and retention expiry of available messages. While the disk is
	// low, a queue that dead-letters expired messages waits: expired
	// messages are never delivered meanwhile (receive skips them).
	if q.expiryFrom <= t.now && !(t.low && t.a.OnExpire == "dead_letter") {
		if err := t.expireAvailableLocked(); err != nil {
			return err
		}
	}
	// 3. Ready messages never received, past max_unclaimed_age_ms (not
	// while the disk is low: they stay ready).
	if t.a.MaxUnclaimedAgeMs > 0 && t.now >= q.unclaimedAt && !t.low {
		q.unclaimedAt = t.now + unclaimedIntervalMs
		if err := t.e.sweepUnclaimedLocked(t.w, t.from, t.touched, t.dead); err != nil {
			return err
		}
	}
	// 4. Dedup entries past their window, acked messages past
	// retain_acked_ms, dead receive memos.
	if t.now >= q.sweepAt {
		q.sweepAt = t.now + sweepIntervalMs
		q.sweepMemosLocked(t.w, t.now)
		if err := t.e.sweepDedup(q, t.w, t.now, t.rep); err != nil {
			return err
		}
		if err := t.e.sweepRetained(q, t.w, t.now-t.a.RetainAckedMs, t.rep); err != nil {
			return err
		}
	}
	return nil
}

// reapLeasesLocked settles up to tickBudget leases that ran out: each
// message expires, goes to the DLQ past max_expiries or max_receives, or
// becomes available again after expiry_backoff_ms.
// REQUIRES: the locks of the queue and of its DLQ held.
func (t *tickRun) reapLeasesLocked() error {
	q, a, now := t.from.q, &t.a, t.now
	for n := 0; n < tickBudget; n++ {
		le, ok := q.nextExpiredLeaseLocked(now)
		if !ok {
			break
		}
		t.popped = append(t.popped, le)
		st, ok, err := t.e.getState(q, le.m)
		if err != nil {
			return err
		}
		if !ok || st.State != stateInflight || st.Deliveries != le.epoch {
			delete(q.leases, le.m) // memory disagreed with the store; the store wins
			continue
		}
		m := le.m
		prev := st
		st.Expiries++
		exp := expiryOf(&st, a)
		expired := exp > 0 && exp <= now
		if t.low && (expired && expiryDeadLetters(a, &st, now) ||
			!expired && a.MaxExpiries > 0 && st.Expiries >= uint32(a.MaxExpiries) ||
			!expired && a.MaxReceives > 0 && st.Deliveries >= uint32(a.MaxReceives)) {
			// Due for the DLQ: stays in flight (not redelivered past its
			// limits), and the lease's late ack still works.
			q.setLeaseLocked(m, le.epoch, now+deadLetterRetryMs)
			t.rep.DeadLetterDeferred++
			continue
		}
		t.touched[le.m] = true
		t.rep.Reaped++
		switch {
		case expired:
			t.expireLocked(m, st)
		case a.MaxExpiries > 0 && st.Expiries >= uint32(a.MaxExpiries):
			t.w.deadLetterLocked(t.from, m, st, ReasonMaxExpiries, st.LastError)
			t.dead[ReasonMaxExpiries]++
		case a.MaxReceives > 0 && st.Deliveries >= uint32(a.MaxReceives):
			t.w.deadLetterLocked(t.from, m, st, ReasonMaxReceives, st.LastError)
			t.dead[ReasonMaxReceives]++
		default:
			t.requeueLocked(m, prev, st)
		}
	}
	return nil
}

// requeueLocked makes a message whose lease ran out available again after
// the queue's expiry_backoff_ms. prev is its state before the tick, st
// with the expiry counted.
func (t *tickRun) requeueLocked(m msgKey, prev, st deliveryState) {
	q := t.from.q
	old := st
	st.State = stateAvailable
	st.Due = t.now + t.a.ExpiryBackoffMs
	st.Deadline = 0
	st.Owner = ""
	nst := st
	if invariantsEnabled {
		checkTransition(&prev, &nst, t.now)
	}
	t.w.op(func(b *pebblestore.Batch) {
		b.Delete(leaseKey(q.id, old.Deadline, m))
		b.Set(stateKey(q.id, m), nst.encode())
		b.Set(readyKey(q.id, nst.Priority, nst.Due, m), u32Bytes(nst.Deliveries))
	})
	t.w.onApplied = append(t.w.onApplied, func() {
		q.inflight--
		q.available++
		delete(q.leases, m)
		q.totals.Reaped++
	})
	t.inserts = append(t.inserts, readyEntry{due: nst.Due, m: m, deliveries: nst.Deliveries})
	t.insertPrio = append(t.insertPrio, nst.Priority)
	t.rep.Requeued++
}

// expireLocked expires one message (expireLocked of the engine) and
// counts it.
func (t *tickRun) expireLocked(m msgKey, st deliveryState) {
	if t.e.expireLocked(t.w, t.from, m, st) {
		t.dead[ReasonExpired]++
	} else {
		t.rep.Expired++
	}
}

// expireAvailableLocked visits up to tickBudget expiry keys due by now:
// an available message past its TTL or retention expires; one whose
// retention grew gets a later key; the others (gone, leased, acked) only
// lose the key. The expiry cursor moves past what was visited.
// REQUIRES: the locks of the queue and of its DLQ held.
func (t *tickRun) expireAvailableLocked() error {
	q, now := t.from.q, t.now
	prefix := tablePrefix(pebblestore.PrefixQueueExpiry, q.id)
	lower := expiryKey(q.id, q.expiryFrom, msgKey{})
	upper := expiryKey(q.id, now+1, msgKey{})
	it, err := t.e.store.NewIter(lower, upper)
	if err != nil {
		return err
	}
	n, last := 0, q.expiryFrom
	for ok := it.First(); ok && n < tickBudget; ok = it.Next() {
		k := append([]byte(nil), it.Key()...)
		m := msgFromKeyTail(k)
		last = u64At(k, len(prefix))
		n++
		t.w.op(func(b *pebblestore.Batch) { b.Delete(k) })
		if t.touched[m] {
			continue
		}
		st, ok, err := t.e.getState(q, m)
		if err != nil {
			_ = it.Close()
			return err
		}
		if !ok || st.State != stateAvailable {
			continue // gone, or inflight (the lease end decides), or acked
		}
		t.touched[m] = true
		if exp := expiryOf(&st, &t.a); exp > now {
			t.w.op(func(b *pebblestore.Batch) { b.Set(expiryKey(q.id, exp, m), nil) }) // retention grew
			continue
		}
		t.expireLocked(m, st)
	}
	if err := it.Close(); err != nil {
		return err
	}
	if n < tickBudget {
		q.expiryFrom = now + 1
	} else {
		q.expiryFrom = last
	}
	return nil
}

// appliedLocked follows the applied write in memory: requeued messages
// back in their bands, the report's dead-letter counts, and long polls
// woken when something buffered is due (or a refill may find it).
// REQUIRES: the locks of the queue and of its DLQ held.
func (t *tickRun) appliedLocked() {
	q, dlq := t.from.q, t.from.dlq
	for i, in := range t.inserts {
		q.bands[t.insertPrio[i]].insert(in)
	}
	for r, n := range t.dead {
		t.rep.DeadLettered[r] += n
	}
	if len(q.waiters) > 0 {
		due, found := q.nextDueLocked()
		incomplete := false
		for i := range q.bands {
			if !q.bands[i].complete && len(q.bands[i].h) == 0 {
				incomplete = true
			}
		}
		if len(t.inserts) > 0 || (found && due <= t.now) || incomplete {
			q.wakeLocked()
		}
	}
	if invariantsEnabled {
		q.checkQueueLocked()
		if dlq != nil {
			dlq.checkQueueLocked()
		}
	}
}

// sweepUnclaimedLocked dead-letters, with reason unclaimed, available
// messages that were never received and have been ready for
// max_unclaimed_age_ms: ready keys of delivery count 0 due at or before
// now - max_unclaimed_age_ms. The age counts from the due time (the send,
// or the end of its delay): a delayed message is not claimable before.
// Nacked and reaped messages have a delivery count and are never touched.
//
// Per band a cursor remembers how far the ready index was examined, so
// neither old nacked messages nor the tombstones of received ones are read
// again at every run. A ready key of delivery count 0 is written due at or
// after its send's clock reading, which is at most unclaimedCursorLagMs
// before the sweep's; a clock stepping back resets the cursors. At most
// tickBudget keys are examined per run.
// REQUIRES: q.mu and dlq.mu held.
func (e *Engine) sweepUnclaimedLocked(w *write, src moveSource, touched map[msgKey]bool, dead map[string]int) error {
	q, now := src.q, w.now
	a := &q.rec.Attributes
	if now < q.unclaimedClock {
		q.unclaimedFrom = [PriorityLevelsMax]readyEntry{}
	}
	q.unclaimedClock = now
	bound := now - a.MaxUnclaimedAgeMs
	detail := "ready for " + strconv.FormatInt(a.MaxUnclaimedAgeMs, 10) + " ms and never received (max_unclaimed_age_ms)"
	budget := tickBudget
	for prio := 0; prio < int(a.PriorityLevels) && budget > 0; prio++ {
		from := &q.unclaimedFrom[prio]
		prefix := readyBandPrefix(q.id, uint8(prio))
		lower := readyKey(q.id, uint8(prio), from.due, from.m)
		upper := readyKey(q.id, uint8(prio), bound+1, msgKey{})
		if bytes.Compare(lower, upper) >= 0 {
			continue
		}
		it, err := e.store.NewIter(lower, upper)
		if err != nil {
			return err
		}
		valid := it.First()
		for ; valid && budget > 0; valid = it.Next() {
			budget--
			k := it.Key()
			m := msgFromKeyTail(k)
			due := u64At(k, len(prefix))
			v, err := it.Value()
			if err != nil {
				_ = it.Close()
				return err
			}
			if decodeU32(v) != 0 || touched[m] {
				continue // received before (nacked or reaped), or settled by this tick
			}
			st, ok, err := e.getState(q, m)
			if err != nil {
				_ = it.Close()
				return err
			}
			if !ok || st.State != stateAvailable || st.Deliveries != 0 || st.FirstRecv != 0 || st.Due != due || int(st.Priority) != prio {
				continue
			}
			touched[m] = true
			w.deadLetterLocked(src, m, st, ReasonUnclaimed, detail)
			dead[ReasonUnclaimed]++
		}
		if valid {
			k := it.Key()
			*from = readyEntry{due: u64At(k, len(prefix)), m: msgFromKeyTail(k)}
		} else {
			*from = readyEntry{due: min(bound+1, now-unclaimedCursorLagMs)}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	return nil
}

// restoreLeases puts popped lease entries back after a failed tick.
// REQUIRES: q.mu held.
func (q *queue) restoreLeases(popped []leaseEntry) {
	for _, le := range popped {
		if l, ok := q.leases[le.m]; ok && l.epoch == le.epoch && l.deadline == le.deadline {
			heap.Push(&q.leaseHeap, le)
		}
	}
}

// expireLocked settles a message past its TTL or retention: to the DLQ
// when it had an explicit TTL and on_expire is dead_letter, else dropped.
// It reports whether the message goes to the DLQ.
// REQUIRES: q.mu and dlq.mu held.
func (e *Engine) expireLocked(w *write, from moveSource, m msgKey, st deliveryState) bool {
	q := from.q
	a := q.rec.Attributes
	if expiryDeadLetters(&a, &st, w.now) && from.dlq != nil {
		w.deadLetterLocked(from, m, st, ReasonExpired, "the message's TTL passed")
		return true
	}
	w.op(func(b *pebblestore.Batch) { q.removeRows(b, m, &st) })
	w.onApplied = append(w.onApplied, func() {
		q.forgetLocked(m, &st)
		q.totals.Expired++
	})
	return false
}

// expiryDeadLetters reports whether an expired message goes to the DLQ
// (when the queue has one) rather than being dropped: its explicit TTL
// passed and on_expire is dead_letter. The queue's retention only drops.
func expiryDeadLetters(a *Attributes, st *deliveryState, now int64) bool {
	return st.ExpireAt > 0 && st.ExpireAt <= now && a.OnExpire == "dead_letter"
}

// sweepDedup visits the dedup expiry keys that are due. An entry past its
// window is deleted, unless dedup_scope is in_queue and its original is
// still queued: then it is looked at again later (a new expiry key; the
// entry's own expires does not move, so once the original leaves, the
// window from the send decides). An entry whose window is not over was
// rewritten by a later send and has an expiry key of its own.
// REQUIRES: q.mu held.
func (e *Engine) sweepDedup(q *queue, w *write, now int64, rep *TickReport) error {
	a := &q.rec.Attributes
	prefix := tablePrefix(pebblestore.PrefixQueueDedupExp, q.id)
	it, err := e.store.NewIter(prefix, dedupExpiryKey(q.id, now+1, [16]byte{}))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok, n := it.First(), 0; ok && n < tickBudget; ok, n = it.Next(), n+1 {
		k := append([]byte(nil), it.Key()...)
		var h [16]byte
		copy(h[:], k[len(k)-16:])
		w.op(func(b *pebblestore.Batch) { b.Delete(k) })
		rep.DedupSwept++
		v, err := e.store.Get(dedupKey(q.id, h))
		if errors.Is(err, pebblestore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		d, valid := decodeDedup(v)
		if valid && d.expires > now {
			continue
		}
		if valid && a.DedupScope == DedupScopeInQueue {
			queued, err := e.originalQueuedLocked(q, d.m)
			if err != nil {
				return err
			}
			if queued {
				again := now + max(a.DedupWindowMs, dedupRecheckMinMs)
				w.op(func(b *pebblestore.Batch) { b.Set(dedupExpiryKey(q.id, again, h), nil) })
				continue
			}
		}
		w.op(func(b *pebblestore.Batch) { b.Delete(dedupKey(q.id, h)) })
	}
	return it.Close()
}

func (e *Engine) sweepRetained(q *queue, w *write, before int64, rep *TickReport) error {
	prefix := tablePrefix(pebblestore.PrefixQueueRetained, q.id)
	it, err := e.store.NewIter(prefix, retainedKey(q.id, before+1, msgKey{}))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok, n := it.First(), 0; ok && n < tickBudget; ok, n = it.Next(), n+1 {
		k := append([]byte(nil), it.Key()...)
		m := msgFromKeyTail(k)
		w.op(func(b *pebblestore.Batch) { b.Delete(k) })
		st, ok, err := e.getState(q, m)
		if err != nil {
			return err
		}
		if ok && st.State == stateAcked {
			w.op(func(b *pebblestore.Batch) { b.Delete(stateKey(q.id, m)) })
			w.onApplied = append(w.onApplied, func() { q.retained-- })
			rep.AckedSwept++
		}
	}
	return it.Close()
}

// rateWindow keeps per-second samples of the totals for rates.
type rateWindow struct {
	samples [11]rateSample
	n, head int
}

type rateSample struct {
	at                       int64
	sent, received, acked    int64
	deadLettered, nackedReap int64
}

func (r *rateWindow) sample(now int64, t *Totals) {
	if r.n > 0 && now-r.samples[(r.head+len(r.samples)-1)%len(r.samples)].at < 1000 {
		return
	}
	var dead int64
	for _, v := range t.DeadLettered {
		dead += v
	}
	r.samples[r.head] = rateSample{at: now, sent: t.Sent, received: t.Received, acked: t.Acked, deadLettered: dead, nackedReap: t.Nacked + t.Reaped}
	r.head = (r.head + 1) % len(r.samples)
	r.n = min(r.n+1, len(r.samples))
}

// Rates are messages per second over the last ~10 seconds.
type Rates struct {
	Sent         float64
	Received     float64
	Acked        float64
	DeadLettered float64
}

func (r *rateWindow) rates() Rates {
	if r.n < 2 {
		return Rates{}
	}
	newest := r.samples[(r.head+len(r.samples)-1)%len(r.samples)]
	oldest := r.samples[(r.head+len(r.samples)-r.n)%len(r.samples)]
	dt := float64(newest.at-oldest.at) / 1000
	if dt <= 0 {
		return Rates{}
	}
	return Rates{
		Sent: float64(newest.sent-oldest.sent) / dt, Received: float64(newest.received-oldest.received) / dt,
		Acked: float64(newest.acked-oldest.acked) / dt, DeadLettered: float64(newest.deadLettered-oldest.deadLettered) / dt,
	}
}
