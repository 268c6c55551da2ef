package topics

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// Transactions on the log side (KIP-98).
//
// A partition remembers, per producer, the first offset of its ongoing
// transaction (a row under pebblestore.TxnOngoingKey, written in the same
// Pebble batch as that first transactional batch). The last stable offset is
// the smallest of those first offsets and the high watermark, but never
// below the log start. A COMMIT or ABORT control batch, written by the
// transaction coordinator (MarkerAppends, with AppendAtomic: the markers of
// every partition of a transaction, its committed consumer offsets and the
// coordinator's outcome row land in one Pebble batch), ends the producer's
// transaction; an abort adds an entry to the aborted-transaction index
// (pebblestore.TxnAbortedKey) in the same Pebble batch as the marker.

// AbortedTxn is one aborted transaction of a partition: the producer, the
// first offset of its data and the offset of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// Control record types (Kafka ControlRecordType).
const (
	controlTypeAbort  int16 = 0
	controlTypeCommit int16 = 1
)

// Marker is one transaction marker to write.
type Marker struct {
	Partition     *Partition
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// sends the marker (the leader epoch of its __transaction_state
	// partition; 0 with one coordinator). A marker whose coordinator epoch
	// is lower than the last one written for its producer here is refused
	// with ErrTransactionCoordinatorFenced (KIP-98).
	CoordinatorEpoch int32
	// OnlyIfOngoing (WriteTxnMarkers) writes the control batch only when
	// the producer has an ongoing transaction on the partition, and
	// refuses a producer epoch older than the producer's there
	// (ErrInvalidProducerEpoch); without an ongoing transaction only the
	// producer's state takes the marker's epochs.
	OnlyIfOngoing bool
}

// ControlBatch builds a control batch holding one COMMIT or ABORT marker in
// Kafka's format: key (version i16 = 0, type i16), value (version i16 = 0,
// coordinator epoch i32).
func ControlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, now time.Time) ([]byte, error) {
	nowMs := now.UnixMilli()
	typ := controlTypeAbort
	if commit {
		typ = controlTypeCommit
	}
	key := binary.BigEndian.AppendUint16([]byte{0, 0}, uint16(typ))
	value := binary.BigEndian.AppendUint32([]byte{0, 0}, uint32(coordinatorEpoch))
	h := BatchHeader{
		Attributes:    batchAttributeTransactional | batchAttributeControl,
		BaseTimestamp: nowMs, MaxTimestamp: nowMs,
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: -1,
	}
	return EncodeBatch(h, []Record{{Key: key, Value: value}})
}

// ControlBatchCommit reports whether a control batch is a COMMIT marker.
func ControlBatchCommit(batch []byte) (bool, error) {
	_, recs, err := DecodeRecords(batch)
	if err != nil {
		return false, err
	}
	if len(recs) != 1 || len(recs[0].Key) < 4 {
		return false, fmt.Errorf("%w: control batch has no control record", ErrInvalidRecord)
	}
	return int16(binary.BigEndian.Uint16(recs[0].Key[2:])) == controlTypeCommit, nil
}

// MarkerAppends builds one append per marker, a control batch that ends
// the producer's transaction on the marker's partition, for Append or
// AppendAtomic. A marker whose partition was deleted gets ErrUnknownTopic
// and writes nothing (AppendAtomic leaves it out without failing).
func MarkerAppends(markers []Marker, now time.Time) []*Append {
	appends := make([]*Append, 0, len(markers))
	for _, mk := range markers {
		batch, err := ControlBatch(mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch, now)
		if err != nil {
			// EncodeBatch fails only on invalid input; one record of fixed
			// size is never invalid.
			panic(fmt.Sprintf("topics: encoding a transaction marker: %v", err))
		}
		appends = append(appends, &Append{Partition: mk.Partition, Batch: batch, marker: true, markerAbort: !mk.Commit,
			onlyIfOngoing: mk.OnlyIfOngoing, coordinatorEpoch: mk.CoordinatorEpoch})
	}
	return appends
}

// lastStableLocked is the last stable offset: the first offset of the
// oldest ongoing transaction, or the high watermark; never below the log
// start. DeleteRecords (or retention) may move the log start past the
// first records of a transaction that is still open: the transaction goes
// on holding back what follows, but an LSO below the log start would send
// read_committed readers that start at it (ListOffsets latest) out of
// range again and again (Kafka clamps it the same way,
// UnifiedLog.maybeIncrementFirstUnstableOffset).
//
// REQUIRES: p.mu held.
func (p *Partition) lastStableLocked() int64 {
	hwm := p.highWatermark.Load()
	lso := hwm
	for _, first := range p.mu.ongoing {
		if first < lso {
			lso = first
		}
	}
	// A transaction whose marker is applied but not durable is not ended
	// yet: with no durable decision before the marker (txns writes none),
	// a crash now would leave it open, to be aborted later.
	for _, e := range p.mu.ending {
		if e.marker >= hwm && e.first < lso {
			lso = e.first
		}
	}
	return max(lso, p.logStart.Load())
}

// OngoingTransactions returns, per producer ID, the first offset of its
// ongoing transaction in the partition.
func (p *Partition) OngoingTransactions() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]int64, len(p.mu.ongoing))
	for k, v := range p.mu.ongoing {
		out[k] = v
	}
	return out
}

// abortedOverlapping returns the aborted transactions of index (by marker
// offset) whose data may lie in [from, to]: marker at or after from and
// first offset at or before to.
func abortedOverlapping(index []AbortedTxn, from, to int64) []AbortedTxn {
	i := sort.Search(len(index), func(i int) bool { return index[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range index[i:] {
		if a.FirstOffset <= to {
			out = append(out, a)
		}
	}
	return out
}

// applyTxnLocked updates the transaction state for the batch h appended at
// base and adds the rows that persist it to b.
//
// REQUIRES: p.mu held.
func (p *Partition) applyTxnLocked(b *pebblestore.Batch, h BatchHeader, base int64, abort bool) {
	if !h.IsTransactional() || h.ProducerID < 0 {
		return
	}
	key := pebblestore.TxnOngoingKey(p.Topic.ID, p.Index, h.ProducerID)
	if !h.IsControl() {
		if _, ok := p.mu.ongoing[h.ProducerID]; !ok {
			p.mu.ongoing[h.ProducerID] = base
			b.Set(key, binary.BigEndian.AppendUint64(nil, uint64(base)))
		}
		return
	}
	first, ok := p.mu.ongoing[h.ProducerID]
	if !ok {
		return // a marker for a transaction with no data here (retried markers)
	}
	delete(p.mu.ongoing, h.ProducerID)
	p.mu.ending = append(p.mu.ending, endingTxn{first: first, marker: base})
	b.Delete(key)
	if abort {
		p.mu.aborted = append(p.mu.aborted, AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: base})
		v := binary.BigEndian.AppendUint64(nil, uint64(h.ProducerID))
		b.Set(pebblestore.TxnAbortedKey(p.Topic.ID, p.Index, base), binary.BigEndian.AppendUint64(v, uint64(first)))
	}
}

// endingTxn is a transaction of a partition whose marker (at marker) is
// applied; its data starts at first.
type endingTxn struct {
	first, marker int64
}

// pruneEndingLocked forgets the ending transactions whose marker is below
// the high watermark: durable, so ended.
//
// REQUIRES: p.mu held.
func (p *Partition) pruneEndingLocked() {
	hwm := p.highWatermark.Load()
	p.mu.ending = slices.DeleteFunc(p.mu.ending, func(e endingTxn) bool { return e.marker < hwm })
}

// recoverTxns loads the partition's ongoing and aborted transactions.
func (p *Partition) recoverTxns(store *pebblestore.Store) error {
	prefix := pebblestore.PartitionPrefix(pebblestore.PrefixTxnOngoing, p.Topic.ID, p.Index)
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			_ = it.Close()
			return err
		}
		if len(v) != 8 {
			_ = it.Close()
			return fmt.Errorf("%w: ongoing transaction row of %s/%d is %d bytes", pebblestore.ErrCorruption, p.Topic.Name, p.Index, len(v))
		}
		p.mu.ongoing[pebblestore.OffsetFromKey(it.Key())] = int64(binary.BigEndian.Uint64(v))
	}
	if err := it.Close(); err != nil {
		return err
	}
	prefix = pebblestore.PartitionPrefix(pebblestore.PrefixTxnAborted, p.Topic.ID, p.Index)
	it, err = store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		if len(v) != 16 {
			return fmt.Errorf("%w: aborted transaction row of %s/%d is %d bytes", pebblestore.ErrCorruption, p.Topic.Name, p.Index, len(v))
		}
		p.mu.aborted = append(p.mu.aborted, AbortedTxn{
			ProducerID:  int64(binary.BigEndian.Uint64(v)),
			FirstOffset: int64(binary.BigEndian.Uint64(v[8:])),
			LastOffset:  pebblestore.OffsetFromKey(it.Key()),
		})
	}
	return nil
}

// batchLastOffsetDelta reads the last offset delta of a stored batch.
func batchLastOffsetDelta(b []byte) int32 {
	if len(b) < batchLastOffsetDeltaOffset+4 {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b[batchLastOffsetDeltaOffset:]))
}

// IsTransactionalBatch reports whether b starts with a v2 batch header whose
// transactional attribute is set. It does not validate the batch.
func IsTransactionalBatch(b []byte) bool {
	if len(b) < BatchHeaderSize {
		return false
	}
	return int16(binary.BigEndian.Uint16(b[batchAttributesOffset:]))&batchAttributeTransactional != 0
}

// ProducerInfo is what a partition knows of one producer (DescribeProducers).
type ProducerInfo struct {
	ProducerID int64
	Epoch      int16
	// CoordinatorEpoch is that of the producer's last marker here, -1
	// when none is known.
	CoordinatorEpoch int32
	LastSequence     int32 // -1 when no batch is remembered
	LastTimestamp    int64 // -1 when no batch is remembered
	// TxnStartOffset is the first offset of the producer's ongoing
	// transaction here, -1 when none.
	TxnStartOffset int64
}

// Producers returns the producers the partition remembers, by producer ID.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProducerInfo, 0, len(p.mu.producers))
	for id, st := range p.mu.producers {
		info := ProducerInfo{ProducerID: id, Epoch: st.Epoch, CoordinatorEpoch: st.CoordinatorEpoch, LastSequence: -1, LastTimestamp: -1, TxnStartOffset: -1}
		if n := len(st.Batches); n > 0 {
			info.LastSequence, info.LastTimestamp = st.Batches[n-1].LastSeq, st.Batches[n-1].Timestamp
		}
		if first, ok := p.mu.ongoing[id]; ok {
			info.TxnStartOffset = first
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// pruneAbortedLocked forgets the aborted transactions whose marker is below
// end (retention deleted them with their rows).
//
// REQUIRES: p.mu held.
func (p *Partition) pruneAbortedLocked(end int64) {
	i := sort.Search(len(p.mu.aborted), func(i int) bool { return p.mu.aborted[i].LastOffset >= end })
	if i > 0 {
		p.mu.aborted = append(p.mu.aborted[:0:0], p.mu.aborted[i:]...)
	}
}

// dropAbortedLocked removes from the aborted-transaction index the entries
// whose marker is at one of offsets (compaction found their data gone). It
// replaces the slice rather than changing it: readers hold snapshots.
//
// REQUIRES: p.mu held.
func (p *Partition) dropAbortedLocked(offsets []int64) {
	if len(offsets) == 0 {
		return
	}
	drop := make(map[int64]bool, len(offsets))
	for _, o := range offsets {
		drop[o] = true
	}
	kept := make([]AbortedTxn, 0, len(p.mu.aborted))
	for _, a := range p.mu.aborted {
		if !drop[a.LastOffset] {
			kept = append(kept, a)
		}
	}
	p.mu.aborted = kept
}

// AbortedTransactions returns the partition's aborted-transaction index,
// by marker offset.
func (p *Partition) AbortedTransactions() []AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]AbortedTxn(nil), p.mu.aborted...)
}
