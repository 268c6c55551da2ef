package queues

import (
	"encoding/binary"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// Receive memos make a receive with a request_id safe to retry: a client
// whose response was lost sends the same request again and gets back the
// messages the first attempt leased, with the same receipts, instead of
// leasing more (NATIVE-QUEUE.md §3.5, S7; SQS's ReceiveRequestAttemptId).
//
// Invariants:
//   - A memo is written in the same batch as the leases it names, so a
//     memo on disk always names leases that were granted.
//   - A memo is live until the latest deadline of its leases at grant time;
//     a retry after that leases afresh. Extending a lease does not extend
//     its memo.
//   - A retry answers only the memo's messages still in flight under the
//     same epoch: acked, released or re-leased ones are left out, so a
//     retry never hands out a receipt that is already stale.
//   - Memos are swept by Tick once dead, cleared by purge and by deleting
//     the queue.

// receiveMemo is what one request_id leased.
type receiveMemo struct {
	deadline int64
	items    []memoItem
}

type memoItem struct {
	m     msgKey
	epoch uint32
}

// encodeMemo: deadline u64 | n u16 | n × (part u32 | offset u64 | epoch u32).
func (r *receiveMemo) encode() []byte {
	out := make([]byte, 0, 10+16*len(r.items))
	out = binary.BigEndian.AppendUint64(out, uint64(r.deadline))
	out = binary.BigEndian.AppendUint16(out, uint16(len(r.items)))
	for _, it := range r.items {
		out = appendMsg(out, it.m)
		out = binary.BigEndian.AppendUint32(out, it.epoch)
	}
	return out
}

func decodeMemo(v []byte) (receiveMemo, error) {
	if len(v) < 10 {
		return receiveMemo{}, fmt.Errorf("%w: receive memo of %d bytes", pebblestore.ErrCorruption, len(v))
	}
	r := receiveMemo{deadline: int64(binary.BigEndian.Uint64(v))}
	n := int(binary.BigEndian.Uint16(v[8:]))
	if len(v) != 10+16*n {
		return receiveMemo{}, fmt.Errorf("%w: receive memo of %d bytes for %d messages", pebblestore.ErrCorruption, len(v), n)
	}
	r.items = make([]memoItem, n)
	for i := range r.items {
		p := v[10+16*i:]
		r.items[i] = memoItem{
			m:     msgKey{part: int32(binary.BigEndian.Uint32(p)), off: int64(binary.BigEndian.Uint64(p[4:]))},
			epoch: binary.BigEndian.Uint32(p[12:]),
		}
	}
	return r, nil
}

// loadMemos reads the queue's memos at start, dropping none: dead ones go
// at the next Tick.
func (q *queue) loadMemos() error {
	lower := tablePrefix(pebblestore.PrefixQueueMemo, q.id)
	it, err := q.e.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		r, err := decodeMemo(v)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.rec.Name, err)
		}
		q.memos[string(it.Key()[len(lower):])] = r
	}
	return it.Close()
}

// replayMemoLocked returns the live leases of request id, and whether a
// live memo exists for it. Messages in settled are acked by the same call
// (its batch is not applied yet) and are left out.
// REQUIRES: q.mu held.
func (e *Engine) replayMemoLocked(q *queue, id string, settled map[msgKey]bool, now int64) ([]leased, bool, error) {
	r, ok := q.memos[id]
	if !ok || r.deadline <= now {
		return nil, false, nil
	}
	var out []leased
	for _, it := range r.items {
		if settled[it.m] {
			continue
		}
		st, ok, err := e.getState(q, it.m)
		if err != nil {
			return nil, true, err
		}
		if ok && st.State == stateInflight && st.Deliveries == it.epoch {
			out = append(out, leased{m: it.m, st: st})
		}
	}
	return out, true, nil
}

// newMemo describes the leases got, for request id.
func newMemo(got []leased) receiveMemo {
	r := receiveMemo{items: make([]memoItem, len(got))}
	for i, l := range got {
		r.items[i] = memoItem{m: l.m, epoch: l.st.Deliveries}
		r.deadline = max(r.deadline, l.st.Deadline)
	}
	return r
}

// sweepMemosLocked deletes dead memos within w. REQUIRES: q.mu held.
func (q *queue) sweepMemosLocked(w *write, now int64) {
	for id, r := range q.memos {
		if r.deadline > now {
			continue
		}
		key := memoKey(q.id, id)
		w.op(func(b *pebblestore.Batch) { b.Delete(key) })
		w.onApplied = append(w.onApplied, func() { delete(q.memos, id) })
	}
}
