package queues

// Kafka share groups on a queue (KIP-932 on the delivery engine, issue 10
// part 3). A share group member's acquisition of a queue's record is a
// lease like a native receive's, with the member as its owner in the
// state row (deliveryState.Owner, row version 2), so a native receiver and
// a Kafka member never hold a message at the same time, and every rule of
// the queue applies to both: priority and delay decide what is acquirable,
// max_inflight bounds the leases, the lease ends by the tick's reaper
// (expiry_backoff_ms, max_expiries), max_receives and rejects move the
// message to the DLQ with the reason headers. The Kafka side names
// messages by partition and offset (the record's place in the queue's
// topic) instead of receipts: only the owner may settle a lease.
//
// The engine knows no Kafka: the owner is an opaque string, the outcomes
// are the four a share-group acknowledgement can have.

import (
	"fmt"
	"time"
)

// ShareOutcome is how a share-group member settles a message it holds.
type ShareOutcome int8

const (
	// ShareAccept acks the message.
	ShareAccept ShareOutcome = iota + 1
	// ShareRelease makes it available again at once (no backoff), or
	// moves it to the DLQ when it reached max_receives.
	ShareRelease
	// ShareReject moves it to the DLQ (reason rejected).
	ShareReject
	// ShareRenew restarts the lease for the lock duration.
	ShareRenew
)

// ShareAcquireRequest asks for leases for a share-group member.
type ShareAcquireRequest struct {
	// Owner names the member (1 to 1024 bytes); only it may settle
	// what it acquires.
	Owner string
	// Partitions, when set, are the only partitions leased from.
	Partitions []int32
	// MaxMessages bounds the leases (at least 1); MaxBytes their size
	// together (the first one whatever its size).
	MaxMessages int
	MaxBytes    int64
	// Lock is the lease's duration (1 s to 12 h, whole milliseconds).
	Lock time.Duration
}

// ShareLease is one message leased to a member: its record's place in
// the queue's topic and its delivery count (this lease included).
type ShareLease struct {
	Partition  int32
	Offset     int64
	Deliveries uint32
}

func checkShareOwner(owner string) *Error {
	if owner == "" || len(owner) > ownerMax {
		return rangeErr("owner", 1, ownerMax)
	}
	return nil
}

func checkShareLock(lock time.Duration) *Error {
	if ms := lock.Milliseconds(); ms < VisibilityMinMs || ms > VisibilityMaxMs {
		return rangeErr("lock_ms", VisibilityMinMs, VisibilityMaxMs)
	}
	return nil
}

// ShareAcquire leases up to req.MaxMessages ready messages to req.Owner,
// highest priority first, then earliest due, as Receive does, within the
// queue's max_inflight (at the limit it leases nothing; Kafka has no such
// error, the fetch waits). The leases are applied when it returns; wait
// makes them durable (call it without locks, before answering).
func (e *Engine) ShareAcquire(name string, req ShareAcquireRequest, now time.Time) ([]ShareLease, func() error, error) {
	nop := func() error { return nil }
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, nop, qerr
	}
	if err := checkShareOwner(req.Owner); err != nil {
		return nil, nop, err
	}
	if err := checkShareLock(req.Lock); err != nil {
		return nil, nop, err
	}
	if req.MaxMessages < 1 {
		return nil, nop, rangeErr("max_messages", 1, ReceiveMessagesMax)
	}
	var parts map[int32]bool
	if req.Partitions != nil {
		parts = make(map[int32]bool, len(req.Partitions))
		for _, p := range req.Partitions {
			parts[p] = true
		}
	}
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return nil, nop, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	a := &q.rec.Attributes
	want := min(int64(req.MaxMessages), a.MaxInflight-q.inflight)
	if want <= 0 {
		q.mu.Unlock()
		return nil, nop, nil
	}
	b := e.store.NewBatch()
	got, err := e.leaseReadyLocked(q, b, leaseRequest{want: want, maxBytes: max(req.MaxBytes, 1),
		visibilityMs: req.Lock.Milliseconds(), now: nowMs, owner: req.Owner, parts: parts})
	if err == nil && len(got) > 0 {
		err = b.Apply()
	}
	if err != nil || len(got) == 0 {
		q.mu.Unlock()
		b.Close()
		if err != nil {
			q.resetBandsAfterFailure() // the popped entries are in Pebble only
			return nil, nop, errStorage(err)
		}
		return nil, nop, nil
	}
	out := make([]ShareLease, len(got))
	for i, l := range got {
		q.available--
		q.inflight++
		q.setLeaseLocked(l.m, l.st.Deliveries, l.st.Deadline)
		q.leases[l.m] = leaseInfo{epoch: l.st.Deliveries, deadline: l.st.Deadline, owner: req.Owner}
		out[i] = ShareLease{Partition: l.m.part, Offset: l.m.off, Deliveries: l.st.Deliveries}
	}
	q.totals.Received += int64(len(got))
	q.checkedUnlock()
	return out, func() error {
		if err := b.Wait(); err != nil {
			return errStorage(err)
		}
		return nil
	}, nil
}

// ShareSettle is one message a member settles, by its record's place.
type ShareSettle struct {
	Partition int32
	Offset    int64
	Outcome   ShareOutcome
}

// ShareSettleRequest settles messages req.Owner holds.
type ShareSettleRequest struct {
	Owner string
	Items []ShareSettle
	// Lock is the new lease of a ShareRenew.
	Lock time.Duration
	// Reason is the dead-letter detail of a ShareReject
	// (x-q-dlq-last-error).
	Reason string
}

// ShareSettle applies a member's settlements all or nothing: every item
// must name a message leased to req.Owner (a lease past its deadline that
// the reaper has not ended yet still counts), else nothing changes and
// the error is a *Error with CodeNotInflight. The outcome is applied when
// it returns; wait makes it durable.
func (e *Engine) ShareSettle(name string, req ShareSettleRequest, now time.Time) (func() error, error) {
	nop := func() error { return nil }
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nop, qerr
	}
	if err := checkShareOwner(req.Owner); err != nil {
		return nop, err
	}
	if len(req.Reason) > ReasonMax {
		return nop, rangeErr("reason", 0, ReasonMax)
	}
	renew := false
	for _, it := range req.Items {
		if it.Outcome < ShareAccept || it.Outcome > ShareRenew {
			return nop, errf(CodeInvalidEnum, "unknown settlement outcome %d", it.Outcome)
		}
		renew = renew || it.Outcome == ShareRenew
	}
	if err := checkShareLock(req.Lock); renew && err != nil {
		return nop, err
	}
	s, unlock, err := e.newShareRun(q, now)
	if err != nil {
		return nop, err
	}
	sts := make([]deliveryState, len(req.Items))
	for i, it := range req.Items {
		m := msgKey{part: it.Partition, off: it.Offset}
		st, err := s.held(m, req.Owner)
		if err == nil && it.Outcome == ShareRenew && s.now+req.Lock.Milliseconds()-st.LeaseStart > VisibilityMaxMs {
			err = errf(CodeNotInflight, "message %s has been held for %d ms; a lease may last at most %d ms from its acquisition", fmtID(m), s.now-st.LeaseStart, VisibilityMaxMs)
		}
		if err == nil && it.Outcome == ShareReject && s.from.dlq != nil {
			if serr := e.store.Space().Check(); serr != nil {
				err = errStorage(serr) // a reject appends to the DLQ: not while the disk is almost full
			}
		}
		if err != nil {
			unlock()
			return nop, err
		}
		sts[i] = st
	}
	for i, it := range req.Items {
		s.settle(msgKey{part: it.Partition, off: it.Offset}, sts[i], it.Outcome, req)
	}
	return s.commit(unlock)
}

// ShareReleaseOwner makes every message owner holds in the queue
// available again (or dead-letters it past max_receives): the member left,
// was fenced or closed its share session. wait makes it durable.
func (e *Engine) ShareReleaseOwner(name, owner string, now time.Time) (func() error, error) {
	nop := func() error { return nil }
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nop, qerr
	}
	s, unlock, err := e.newShareRun(q, now)
	if err != nil {
		return nop, err
	}
	for m, li := range q.leases {
		if li.owner != owner {
			continue
		}
		st, err := s.held(m, owner)
		if err != nil {
			continue // the in-memory owner disagreed with the row: the row wins
		}
		s.settle(m, st, ShareRelease, ShareSettleRequest{})
	}
	return s.commit(unlock)
}

// shareRun is one settlement of a member's messages: a nackRun (releases
// and rejects) whose write also carries accepts and renewals.
type shareRun struct {
	nackRun
}

// newShareRun locks q and its DLQ. REQUIRES: no queue lock held.
func (e *Engine) newShareRun(q *queue, now time.Time) (*shareRun, func(), error) {
	nowMs := now.UnixMilli()
	q.mu.Lock()
	dlq := e.deadLetterQueueLocked(q)
	q.mu.Unlock()
	unlock := lockQueues(q, dlq)
	if q.deleted {
		unlock()
		return nil, nil, errf(CodeQueueDeleted, "queue %q was deleted", q.rec.Name)
	}
	if dlq != nil && dlq.deleted {
		dlq = nil
	}
	return &shareRun{nackRun{e: e, from: moveSource{q: q, dlq: dlq, rr: newRecordReader(q.topic)}, a: q.rec.Attributes,
		now: nowMs, w: &write{e: e, now: nowMs}}}, unlock, nil
}

// held returns the state of message m if owner holds its lease.
func (s *shareRun) held(m msgKey, owner string) (deliveryState, error) {
	st, ok, err := s.e.getState(s.from.q, m)
	switch {
	case err != nil:
		return st, errStorage(err)
	case !ok || st.State != stateInflight || st.Owner != owner:
		return st, errf(CodeNotInflight, "message %s is not held by this member (its lock expired, it was settled, or another consumer holds it)", fmtID(m))
	}
	return st, nil
}

var zeroDelay time.Duration

// settle adds one outcome to the run's write.
func (s *shareRun) settle(m msgKey, st deliveryState, o ShareOutcome, req ShareSettleRequest) {
	var res ItemResult
	switch o {
	case ShareAccept:
		s.from.q.ackStateLocked(m, st, s.w)
	case ShareRenew:
		s.from.q.extendLocked(m, st, s.now+req.Lock.Milliseconds(), s.w)
	case ShareRelease:
		s.req = &NackRequest{Delay: &zeroDelay}
		s.settleLocked(m, st, &res)
	case ShareReject:
		s.req = &NackRequest{DeadLetter: true, Reason: req.Reason}
		s.settleLocked(m, st, &res)
	default:
		panic(fmt.Sprintf("queues: share outcome %d", o))
	}
}

// commit applies the run's write, calls unlock, and returns the wait for
// its durability.
func (s *shareRun) commit(unlock func()) (func() error, error) {
	pw, err := applyMove(s.w, s.from, s.inserts, unlock)
	if err != nil {
		return func() error { return nil }, err
	}
	return pw.finish, nil
}

// SharePending is one partition of a queue as a share group's describe
// shows it: the first offset still in the queue (available or leased; the
// high watermark when none) and how many messages are (Pending, at most
// sharePendingMax: past it the count stops), Leased of them leased now
// (by HTTP receivers or share-group members alike).
type SharePending struct {
	Partition int32
	Start     int64
	Pending   int64
	Leased    int64
}

// sharePendingMax bounds the state rows one partition's count reads.
const sharePendingMax = 100000

// SharePending describes each partition of the queue for share-group
// views (DescribeShareGroupOffsets): its start offset and lag.
func (e *Engine) SharePending(name string) ([]SharePending, error) {
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return nil, qerr
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, errf(CodeQueueDeleted, "queue %q was deleted", name)
	}
	n := q.topic.NumPartitions()
	out := make([]SharePending, n)
	for p := int32(0); p < n; p++ {
		sp := SharePending{Partition: p, Start: -1}
		lower := stateKey(q.id, msgKey{part: p})
		it, err := e.store.NewIter(lower, stateKey(q.id, msgKey{part: p + 1}))
		if err != nil {
			return nil, errStorage(err)
		}
		for ok := it.First(); ok && sp.Pending < sharePendingMax; ok = it.Next() {
			v, err := it.Value()
			if err != nil {
				_ = it.Close()
				return nil, errStorage(err)
			}
			if st, err := decodeState(v); err == nil && st.State != stateAcked {
				if sp.Start < 0 {
					sp.Start = msgFromKeyTail(it.Key()).off
				}
				sp.Pending++
				if st.State == stateInflight {
					sp.Leased++
				}
			}
		}
		if err := it.Close(); err != nil {
			return nil, errStorage(err)
		}
		if sp.Start < 0 {
			if lp, ok := q.topic.Partition(p); ok {
				sp.Start = lp.HighWatermark()
			}
		}
		out[p] = sp
	}
	return out, nil
}
