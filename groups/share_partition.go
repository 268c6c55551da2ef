package groups

// The share-partition state machine of KIP-932 ("Queues for Kafka"), one
// per (share group, topic, partition), in plain Go values: no wire format,
// no store, no clock of its own (every method takes now). share.go keeps
// one per partition a share group has fetched, under shareState.mu, and
// writes its row (encodeRow) in the Pebble batch of every change.
//
// Records between the share-partition start offset (SPSO, start) and the
// end offset (SPEO, end: the first offset never acquired) form the
// in-flight window; each has a state (KIP-932 "In-flight records"):
//
//	Available --acquire--> Acquired --ACCEPT--------------> Acknowledged
//	    ^                     |------REJECT / GAP-----------> Archived
//	    |---RELEASE / lock expiry / member gone---|  (Archived instead once
//	                                                 the delivery count has
//	                                                 reached the limit)
//
// A record is acquired by one member at a time, until it acknowledges it or
// its acquisition lock expires. The start offset moves past the records at
// the front of the window that reached a final state (Acknowledged or
// Archived). Offsets below the start offset are done; offsets at or past
// end were never delivered.
//
// This is the backing of plain topics; a native queue's topic has the
// queue's own delivery state instead (share_queue.go), with the same
// operations: acquire, acknowledge, release and expire.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Record states (Kafka's RecordState codes, as in the share coordinator's
// records).
const (
	shareAvailable    int8 = 0
	shareAcquired     int8 = 1
	shareAcknowledged int8 = 2
	shareArchived     int8 = 4
)

// Acknowledgement types of ShareFetch and ShareAcknowledge (KIP-932, RENEW
// KIP-1222).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// shareRecord is one offset of the in-flight window.
type shareRecord struct {
	state      int8
	deliveries int16
	owner      string    // the acquiring member while Acquired
	deadline   time.Time // the acquisition lock's expiry while Acquired
}

// sharePartition is the delivery state of one partition for one share
// group.
type sharePartition struct {
	start  int64
	window []shareRecord // window[i] is offset start+i; len = end - start
}

func (sp *sharePartition) end() int64 { return sp.start + int64(len(sp.window)) }

// BatchSpan is one stored batch as acquisition sees it: its offsets and
// whether it is a control batch (transaction markers are never delivered).
type BatchSpan struct {
	Base, Last int64
	Control    bool
}

// AcquiredRange is a run of acquired offsets with one delivery count, as
// ShareFetch lists them (AcquiredRecords).
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// shareLimits are the group's delivery settings.
type shareLimits struct {
	lock          time.Duration // group.share.record.lock.duration.ms
	deliveryLimit int16         // group.share.delivery.count.limit
	maxInFlight   int           // group.share.partition.max.record.locks
	// wholeBatches: the fetch's share_acquire_mode is batch_optimized
	// (KIP-1206): max_records is a soft limit, a new batch once begun is
	// acquired to its end.
	wholeBatches bool
	// batchSize: ShareFetch's batch_size (v1+). In batch_optimized mode
	// the new records of one acquisition are listed as ranges of whole
	// stored batches, a range closed before the stored batch that starts
	// batchSize or more offsets after its first (Kafka 4.2
	// SharePartition.createBatches). 0: one range.
	batchSize int
}

// acquire gives member up to max records: first the Available ones of the
// window (released or expired), in offset order, then new ones from spans
// (the batches stored at and after end, in order; offsets between batches,
// removed by compaction, and control batches are archived at once, never
// delivered). It returns the acquired offsets as runs of equal delivery
// count, and whether the window changed.
func (sp *sharePartition) acquire(member string, max int, spans []BatchSpan, lim shareLimits, now time.Time) ([]AcquiredRange, bool) {
	var out []AcquiredRange
	changed := false
	cut := false // the next record taken opens a new range
	take := func(off int64, r *shareRecord) {
		r.state, r.owner, r.deadline = shareAcquired, member, now.Add(lim.lock)
		if r.deliveries < 32767 {
			r.deliveries++
		}
		changed = true
		if n := len(out); n > 0 && !cut && out[n-1].Last == off-1 && out[n-1].DeliveryCount == r.deliveries {
			out[n-1].Last = off
			return
		}
		out = append(out, AcquiredRange{First: off, Last: off, DeliveryCount: r.deliveries})
		cut = false
	}
	got := 0
	for i := range sp.window {
		if got >= max {
			return out, changed
		}
		if sp.window[i].state == shareAvailable {
			take(sp.start+int64(i), &sp.window[i])
			got++
		}
	}
	newFirst := int64(-1) // the first offset of the open range of new records
	for _, s := range spans {
		if got >= max || len(sp.window) >= lim.maxInFlight {
			break
		}
		if s.Last < sp.end() {
			continue
		}
		for sp.end() < s.Base { // a gap left by compaction
			sp.window = append(sp.window, shareRecord{state: shareArchived})
			changed = true
		}
		begun := false // a record of this batch was taken by this call
		if newFirst >= 0 && lim.wholeBatches && lim.batchSize > 0 && s.Base-newFirst >= int64(lim.batchSize) {
			cut, newFirst = true, s.Base
		}
		for off := sp.end(); off <= s.Last && len(sp.window) < lim.maxInFlight; off++ {
			if got >= max && (!lim.wholeBatches || !begun) {
				break
			}
			sp.window = append(sp.window, shareRecord{})
			if s.Control {
				sp.window[len(sp.window)-1].state = shareArchived
				changed = true
				continue
			}
			take(off, &sp.window[len(sp.window)-1])
			got++
			begun = true
			if newFirst < 0 {
				newFirst = off
			}
		}
	}
	sp.advance()
	return out, changed
}

// AckBatch is one acknowledgement batch of a request: offsets First..Last
// and either one type for all of them or one type per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Acknowledgement failures, per partition.
var (
	// errInvalidRecordState: an offset is not acquired by this member
	// (Kafka INVALID_RECORD_STATE).
	errInvalidRecordState = errors.New("groups: a record of the acknowledgement is not acquired by this member; it may have been redelivered after its acquisition lock expired")
	// errInvalidAck: malformed batches (Kafka INVALID_REQUEST).
	errInvalidAck = errors.New("groups: invalid acknowledgement batch: first offset after last, overlapping batches, a type count that is neither 1 nor the batch's length, or an unknown type")
)

// acknowledge applies member's batches, all or nothing (Kafka's
// SharePartition.acknowledge validates every batch before it changes a
// record). GAP acknowledges an offset without a record and archives it;
// RENEW extends the acquisition lock (KIP-1222).
func (sp *sharePartition) acknowledge(member string, batches []AckBatch, lim shareLimits, now time.Time) error {
	prev := int64(-1)
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || len(b.Types) == 0 || (len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1) {
			return errInvalidAck
		}
		prev = b.Last
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return errInvalidAck
			}
		}
		// Offsets below the start offset are final already: skipped
		// without error, as Kafka's SharePartition does. An offset past
		// the window fails the loop at once, so it never runs longer
		// than the window.
		for off := max(b.First, sp.start); off <= b.Last; off++ {
			r := sp.at(off)
			if r == nil || r.state != shareAcquired || r.owner != member {
				return errInvalidRecordState
			}
		}
	}
	for _, b := range batches {
		for off := max(b.First, sp.start); off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			r := sp.at(off)
			switch t {
			case AckAccept:
				*r = shareRecord{state: shareAcknowledged, deliveries: r.deliveries}
			case AckRelease:
				sp.release(r, lim)
			case AckReject, AckGap:
				*r = shareRecord{state: shareArchived, deliveries: r.deliveries}
			case AckRenew:
				r.deadline = now.Add(lim.lock)
			}
		}
	}
	sp.advance()
	return nil
}

// release makes an acquired record Available again, or Archived once its
// delivery count reached the limit (KIP-932: "the record is archived and
// no longer delivered").
func (sp *sharePartition) release(r *shareRecord, lim shareLimits) {
	if r.deliveries >= lim.deliveryLimit {
		*r = shareRecord{state: shareArchived, deliveries: r.deliveries}
		return
	}
	*r = shareRecord{state: shareAvailable, deliveries: r.deliveries}
}

// releaseMember releases every record member holds (it left, was fenced,
// or closed its share session). It reports whether anything changed.
func (sp *sharePartition) releaseMember(member string, lim shareLimits) bool {
	changed := false
	for i := range sp.window {
		if r := &sp.window[i]; r.state == shareAcquired && r.owner == member {
			sp.release(r, lim)
			changed = true
		}
	}
	if changed {
		sp.advance()
	}
	return changed
}

// expire releases the records whose acquisition lock expired at now.
func (sp *sharePartition) expire(lim shareLimits, now time.Time) bool {
	changed := false
	for i := range sp.window {
		if r := &sp.window[i]; r.state == shareAcquired && !now.Before(r.deadline) {
			sp.release(r, lim)
			changed = true
		}
	}
	if changed {
		sp.advance()
	}
	return changed
}

// nextDeadline is the earliest acquisition lock expiry, zero if none.
func (sp *sharePartition) nextDeadline() time.Time {
	var d time.Time
	for i := range sp.window {
		if r := &sp.window[i]; r.state == shareAcquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d
}

// startAt moves the start offset to off when the log no longer holds the
// records before it (retention, DeleteRecords); the window's records below
// it are dropped.
func (sp *sharePartition) startAt(off int64) bool {
	if off <= sp.start {
		return false
	}
	if off >= sp.end() {
		sp.start, sp.window = off, nil
		return true
	}
	sp.window = append([]shareRecord(nil), sp.window[off-sp.start:]...)
	sp.start = off
	return true
}

func (sp *sharePartition) at(off int64) *shareRecord {
	if off < sp.start || off >= sp.end() {
		return nil
	}
	return &sp.window[off-sp.start]
}

// advance moves the start offset past the final records at the front.
func (sp *sharePartition) advance() {
	n := 0
	for n < len(sp.window) && (sp.window[n].state == shareAcknowledged || sp.window[n].state == shareArchived) {
		n++
	}
	if n > 0 {
		sp.start += int64(n)
		sp.window = append(sp.window[:0], sp.window[n:]...)
	}
}

// counts returns how many records of the window are acquired and how many
// are still to be delivered (Available).
func (sp *sharePartition) counts() (acquired, available int) {
	for i := range sp.window {
		switch sp.window[i].state {
		case shareAcquired:
			acquired++
		case shareAvailable:
			available++
		}
	}
	return
}

// Row format (pebblestore key 0x24, see share.go), version 1:
//
//	version u8 | start i64 | n u32 | n x record
//	record: state u8 | deliveries i16 | deadline i64 | owner length u8 | owner
//
// Deadline and owner are written for Acquired records only (else 0 and
// empty), so a member that outlives a broker restart can still acknowledge
// what it holds, and what nobody acknowledges is redelivered once its lock
// expires.
const shareRowVersion = 1

func (sp *sharePartition) encodeRow() []byte {
	out := make([]byte, 0, 13+len(sp.window)*12)
	out = append(out, shareRowVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(sp.start))
	out = binary.BigEndian.AppendUint32(out, uint32(len(sp.window)))
	for _, r := range sp.window {
		out = append(out, byte(r.state))
		out = binary.BigEndian.AppendUint16(out, uint16(r.deliveries))
		var dl int64
		owner := ""
		if r.state == shareAcquired {
			dl, owner = r.deadline.UnixMilli(), r.owner
		}
		out = binary.BigEndian.AppendUint64(out, uint64(dl))
		out = append(out, byte(len(owner)))
		out = append(out, owner...)
	}
	return out
}

func decodeShareRow(b []byte) (*sharePartition, error) {
	if len(b) < 13 || b[0] != shareRowVersion {
		return nil, fmt.Errorf("share-partition row of %d bytes has no version-%d header", len(b), shareRowVersion)
	}
	sp := &sharePartition{start: int64(binary.BigEndian.Uint64(b[1:]))}
	n := binary.BigEndian.Uint32(b[9:])
	b = b[13:]
	if uint64(n) > uint64(len(b))/12 {
		return nil, fmt.Errorf("share-partition row claims %d records in %d bytes", n, len(b))
	}
	sp.window = make([]shareRecord, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(b) < 12 || len(b) < 12+int(b[11]) {
			return nil, errors.New("share-partition row ends inside a record")
		}
		r := shareRecord{state: int8(b[0]), deliveries: int16(binary.BigEndian.Uint16(b[1:]))}
		switch r.state {
		case shareAvailable, shareAcknowledged, shareArchived:
		case shareAcquired:
			r.deadline = time.UnixMilli(int64(binary.BigEndian.Uint64(b[3:])))
			r.owner = string(b[12 : 12+int(b[11])])
		default:
			return nil, fmt.Errorf("share-partition row has record state %d", r.state)
		}
		b = b[12+int(b[11]):]
		sp.window = append(sp.window, r)
	}
	return sp, nil
}
