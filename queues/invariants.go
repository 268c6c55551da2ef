package queues

import (
	"bytes"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Self-checks of the engine, run only with the invariants build tag
// (invariantsEnabled; STYLE.md rule 11). Each call site reads
//
//	if invariantsEnabled { ... }
//
// so that without the tag the check and its arguments compile away. A
// failed check panics: it is a programmer error, never a client's.

// invariantScanMax bounds the state rows checkQueueLocked scans; larger
// queues are not scanned (the check would make tests quadratic).
const invariantScanMax = 5000

func invariantf(format string, args ...any) {
	panic(fmt.Sprintf("queues: invariant violated: "+format, args...))
}

// checkStateRow checks that a state row about to be written is possible,
// and that it survives its codec.
func checkStateRow(s *deliveryState) {
	switch s.State {
	case stateAvailable:
		if s.Deadline != 0 {
			invariantf("available state row with deadline %d", s.Deadline)
		}
	case stateInflight:
		if s.Deliveries == 0 || s.Deadline <= s.LeaseStart || s.FirstRecv == 0 || s.FirstRecv > s.LeaseStart {
			invariantf("inflight state row %+v", *s)
		}
		if s.Deadline-s.LeaseStart > VisibilityMaxMs {
			invariantf("a lease of %d ms (the longest is %d)", s.Deadline-s.LeaseStart, VisibilityMaxMs)
		}
	case stateAcked:
	default:
		invariantf("state row in state %d", s.State)
	}
	if s.Owner != "" && s.State != stateInflight {
		invariantf("state row %+v has an owner but no lease", *s)
	}
	if int(s.Priority) >= PriorityLevelsMax {
		invariantf("state row of priority %d", s.Priority)
	}
	if uint64(s.Nacks)+uint64(s.Expiries) > uint64(s.Deliveries) {
		invariantf("%d nacks and %d expiries in %d deliveries", s.Nacks, s.Expiries, s.Deliveries)
	}
}

// checkTransition checks one state row change of a message that stays: a
// receive (available to inflight, one more delivery), an extend (inflight
// to inflight), a nack or a lease running out (inflight to available), an
// ack kept for retain_acked_ms (to acked). Delivery counts never move back.
func checkTransition(old, cur *deliveryState, now int64) {
	ok := false
	switch {
	case old.State == stateAvailable && cur.State == stateInflight:
		ok = cur.Deliveries == old.Deliveries+1 && cur.Deadline > now && cur.LeaseStart == now && old.Due <= now
	case old.State == stateInflight && cur.State == stateInflight:
		ok = cur.Deliveries == old.Deliveries && cur.Deadline > now
	case old.State == stateInflight && cur.State == stateAvailable:
		ok = cur.Deliveries == old.Deliveries && cur.Due >= now &&
			cur.Nacks+cur.Expiries == old.Nacks+old.Expiries+1
	case old.State != stateAcked && cur.State == stateAcked:
		ok = cur.Deliveries == old.Deliveries && old.Deliveries > 0
	}
	if !ok {
		invariantf("state transition at %d from %+v to %+v", now, *old, *cur)
	}
}

// checkQueueLocked checks that q's rows agree with each other and with its
// in-memory state: every state row decodes and is possible; each available
// message has exactly its ready key, each inflight one its lease key (and
// its lease in memory, same epoch), each acked one its retained key; no
// ready or lease key points elsewhere; the counters match the rows.
// REQUIRES: q.mu held; no write of q applied but its in-memory update not
// yet run.
func (q *queue) checkQueueLocked() {
	if q.deleted || q.available+q.inflight+q.retained > invariantScanMax {
		return
	}
	s := q.e.store
	type row struct {
		st    deliveryState
		index int // index keys found for it
	}
	rows := map[msgKey]*row{}
	scan := func(prefix byte, f func(k, v []byte)) {
		lower := tablePrefix(prefix, q.id)
		it, err := s.NewIter(lower, pebblestore.PrefixEnd(lower))
		if err != nil {
			invariantf("iterating: %v", err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.Value()
			if err != nil {
				invariantf("reading %x: %v", it.Key(), err)
			}
			f(bytes.Clone(it.Key()), v)
		}
	}
	var available, inflight, retained int64
	scan(pebblestore.PrefixQueueState, func(k, v []byte) {
		st, err := decodeState(v)
		if err != nil {
			invariantf("queue %s: %v", q.rec.Name, err)
		}
		checkStateRow(&st)
		m := msgFromKeyTail(k)
		rows[m] = &row{st: st}
		switch st.State {
		case stateAvailable:
			available++
		case stateInflight:
			inflight++
			if l, ok := q.leases[m]; !ok || l.epoch != st.Deliveries || l.owner != st.Owner {
				invariantf("queue %s: message %s is inflight (epoch %d, owner %q) but its lease in memory is %+v, %v", q.rec.Name, fmtID(m), st.Deliveries, st.Owner, l, ok)
			}
		case stateAcked:
			retained++
		}
	})
	if available != q.available || inflight != q.inflight || retained != q.retained || int64(len(q.leases)) != inflight {
		invariantf("queue %s: rows hold %d available, %d inflight, %d acked; memory says %d, %d (%d leases), %d",
			q.rec.Name, available, inflight, retained, q.available, q.inflight, len(q.leases), q.retained)
	}
	index := func(kind string, prefix byte, want uint8, match func(k []byte, r *row) bool) {
		scan(prefix, func(k, v []byte) {
			m := msgFromKeyTail(k)
			r := rows[m]
			if r == nil || r.st.State != want || !match(k, r) {
				invariantf("queue %s: %s key %x of message %s does not match its state row %+v", q.rec.Name, kind, k, fmtID(m), r)
			}
			r.index++
		})
	}
	base := len(tablePrefix(0, 0))
	index("ready", pebblestore.PrefixQueueReady, stateAvailable, func(k []byte, r *row) bool {
		return k[base] == 255-r.st.Priority && u64At(k, base+1) == max(r.st.Due, 0)
	})
	index("lease", pebblestore.PrefixQueueLease, stateInflight, func(k []byte, r *row) bool {
		return u64At(k, base) == max(r.st.Deadline, 0)
	})
	index("retained", pebblestore.PrefixQueueRetained, stateAcked, func(k []byte, r *row) bool {
		return u64At(k, base) == max(r.st.Deadline, 0)
	})
	for m, r := range rows {
		if r.index != 1 {
			invariantf("queue %s: message %s (%+v) has %d index keys, want 1", q.rec.Name, fmtID(m), r.st, r.index)
		}
	}
}

// checkedUnlock releases q.mu, checking q first under the invariants tag.
func (q *queue) checkedUnlock() {
	if invariantsEnabled {
		q.checkQueueLocked()
	}
	q.mu.Unlock()
}
