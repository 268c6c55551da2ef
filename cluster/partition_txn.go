package cluster

// Transactions on a replicated partition (KIP-98), decided at apply so
// every replica holds the same state at every log position, and rebuilt
// by the replay after a restart (or restored from a state row,
// partition_logstart.go).
//
//   - A transactional batch is checked like an idempotent one (epoch,
//     sequence); the producer's first one since its last marker opens its
//     transaction on the partition at the batch's base offset (Kafka's
//     rule before KIP-890: the partition does not ask the transaction
//     coordinator).
//   - A control batch (COMMIT or ABORT, Kafka's control record format),
//     proposed by the leader for WriteTxnMarkers, ends the producer's
//     transaction: it takes one offset like a data batch (its partition
//     leader epoch is the Raft term of its entry), and an ABORT adds
//     (producer, first offset, marker offset) to the aborted-transaction
//     index. A marker whose epoch is older than the producer's is
//     ErrInvalidProducerEpoch; then one whose coordinator epoch (its
//     control record's value) is lower than that of the producer's last
//     marker here is ErrTransactionCoordinatorFenced (Kafka's order and
//     rule, ProducerAppendInfo appendEndTxnMarker, KIP-98: equal or
//     higher passes). Either takes no offset and changes nothing: a
//     deposed transaction coordinator's late marker cannot end the
//     transaction the producer started since through the new coordinator.
//     Kafka's followers only log it; here the replicated state machine
//     decides, so every replica refuses it alike. A marker that ends
//     nothing (no ongoing transaction: a retried marker) takes no offset
//     and is no error, but its epochs are recorded like any marker's. A
//     marker of a newer epoch fences the producer's older one here (its
//     next batch starts at sequence 0 of the marker's epoch).
//   - The last stable offset is the smallest first offset of an ongoing
//     transaction, else the high watermark; never below the log start
//     (as the local partitions, topics/txn.go). The index keeps the
//     aborted transactions whose marker is at or above the log start:
//     a read_committed reader at or above the log start may still meet
//     their data.
//
// There is no "applied but not durable" window as on a local partition:
// an entry is applied only once committed on a majority.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// Batch attribute bits (Kafka v2 record batch).
const (
	batchTransactional = 0x10
	batchControl       = 0x20
	batchCompression   = 0x07
	batchLogAppendTime = 0x08
	batchDeleteHorizon = 0x40 // KIP-534: the base timestamp is the delete horizon
	batchRecordsAt     = 57   // the record count; the records follow the header
)

// AbortedTxn is one aborted transaction of a partition: the producer, the
// first offset of its data and the offset of its ABORT marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// controlRecord reads a control batch's one control record: commit true
// for COMMIT, false for ABORT (Kafka ControlRecordType, key: version i16 =
// 0, type i16), and the coordinator epoch of its value (Kafka
// EndTransactionMarker: version i16, coordinator epoch i32). Anything
// else is ErrInvalidBatch.
func controlRecord(b []byte) (commit bool, coordinatorEpoch int32, err error) {
	attrs := binary.BigEndian.Uint16(b[batchAttributesAt:])
	if attrs&batchTransactional == 0 || attrs&batchCompression != 0 {
		return false, 0, fmt.Errorf("%w: a control batch must be transactional and uncompressed (attributes %#x)", ErrInvalidBatch, attrs)
	}
	if int64(binary.BigEndian.Uint64(b[batchProducerIDAt:])) < 0 || binary.BigEndian.Uint32(b[batchRecordsAt:]) != 1 {
		return false, 0, fmt.Errorf("%w: a control batch holds one record of a producer", ErrInvalidBatch)
	}
	// The record: length, attributes i8, timestamp delta, offset delta,
	// key length (varints), key.
	r := b[batchHeaderSize:]
	short := false
	varint := func() int64 {
		v, k := binary.Varint(r)
		if k <= 0 {
			short = true
			return -1
		}
		r = r[k:]
		return v
	}
	if varint() < 0 || len(r) < 1 {
		return false, 0, fmt.Errorf("%w: control record cut short", ErrInvalidBatch)
	}
	r = r[1:]
	varint()
	varint()
	n := varint()
	if short || n < 4 || int64(len(r)) < n {
		return false, 0, fmt.Errorf("%w: control record cut short or its key not 4 bytes", ErrInvalidBatch)
	}
	version, typ := binary.BigEndian.Uint16(r), binary.BigEndian.Uint16(r[2:])
	if version != 0 || typ > 1 {
		return false, 0, fmt.Errorf("%w: control record version %d type %d, want version 0, ABORT (0) or COMMIT (1)", ErrInvalidBatch, version, typ)
	}
	r = r[n:]
	if v := varint(); short || v < 6 || int64(len(r)) < v {
		return false, 0, fmt.Errorf("%w: control record value cut short or shorter than 6 bytes (version, coordinator epoch)", ErrInvalidBatch)
	}
	return typ == 1, int32(binary.BigEndian.Uint32(r[2:])), nil
}

// applyMarker applies the control batch of e (n offsets): the result is
// its base offset, or the high watermark when it ends nothing.
func (l *PartitionLog) applyMarker(e Entry, n int64) (uint64, error) {
	b := e.Data
	commit, coordinatorEpoch, err := controlRecord(b)
	if err != nil {
		return 0, err
	}
	pid := int64(binary.BigEndian.Uint64(b[batchProducerIDAt:]))
	epoch := int16(binary.BigEndian.Uint16(b[batchProducerEpAt:]))
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.mu.producers[pid]
	if st != nil && epoch < st.epoch {
		return 0, fmt.Errorf("%w: marker of producer %d epoch %d, current %d", ErrInvalidProducerEpoch, pid, epoch, st.epoch)
	}
	if st != nil && coordinatorEpoch < st.coordinatorEpoch {
		return 0, fmt.Errorf("%w: marker of producer %d coordinator epoch %d, its last marker's %d; a newer transaction coordinator owns the producer",
			ErrTransactionCoordinatorFenced, pid, coordinatorEpoch, st.coordinatorEpoch)
	}
	switch {
	case st == nil:
		l.mu.producers[pid] = &producerState{epoch: epoch, coordinatorEpoch: coordinatorEpoch, lastTimestamp: -1}
	case epoch > st.epoch:
		st.epoch, st.last = epoch, nil // fenced: the new epoch starts at sequence 0
		st.coordinatorEpoch = coordinatorEpoch
	default:
		st.coordinatorEpoch = coordinatorEpoch
	}
	first, open := l.mu.ongoing[pid]
	if !open {
		return uint64(l.mu.next), nil
	}
	base := l.mu.next
	delete(l.mu.ongoing, pid)
	if !commit {
		l.mu.aborted = append(l.mu.aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: base})
	}
	l.appendLocked(e, b, base, n)
	return uint64(base), nil
}

// LastStableOffset is the offset below which every transaction is ended
// (read_committed fetches stop there): the smallest first offset of an
// ongoing transaction, else the high watermark; never below the log start.
func (l *PartitionLog) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastStableLocked()
}

// AbortedTransactions is the aborted transactions whose data may lie in
// [from, to]: marker at or after from, first offset at or before to; in
// marker order. A copy.
func (l *PartitionLog) AbortedTransactions(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.mu.aborted), func(i int) bool { return l.mu.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range l.mu.aborted[i:] {
		if a.FirstOffset <= to {
			out = append(out, a)
		}
	}
	return out
}

// OngoingTransactions is, per producer ID, the first offset of its ongoing
// transaction on the partition. A copy.
func (l *PartitionLog) OngoingTransactions() map[int64]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[int64]int64, len(l.mu.ongoing))
	for pid, first := range l.mu.ongoing {
		out[pid] = first
	}
	return out
}

// ProducerInfo is what the partition knows of one producer
// (DescribeProducers, KIP-664).
type ProducerInfo struct {
	ProducerID int64
	Epoch      int16
	// CoordinatorEpoch is that of the producer's last marker here, -1
	// when none is known.
	CoordinatorEpoch int32
	// LastSequence is that of the last record of the producer's last
	// batch here, -1 when none is kept (a marker fenced its epoch).
	LastSequence int32
	// LastTimestamp is the max timestamp of its last batch, -1 when
	// unknown (none since this replica started or restored a state row).
	LastTimestamp int64
	// TxnStartOffset is the first offset of its ongoing transaction
	// here, -1 when none.
	TxnStartOffset int64
}

// Producers is the producers the partition keeps state for, by producer
// ID: what the replicated state machine decided at the applied position,
// alike on every replica (the timestamps aside).
func (l *PartitionLog) Producers() []ProducerInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerInfo, 0, len(l.mu.producers))
	for id, st := range l.mu.producers {
		info := ProducerInfo{ProducerID: id, Epoch: st.epoch, CoordinatorEpoch: st.coordinatorEpoch,
			LastSequence: -1, LastTimestamp: st.lastTimestamp, TxnStartOffset: -1}
		if n := len(st.last); n > 0 {
			info.LastSequence = st.last[n-1].lastSeq
		}
		if first, ok := l.mu.ongoing[id]; ok {
			info.TxnStartOffset = first
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// pruneAbortedLocked drops the aborted transactions whose marker is below
// the log start: no read at or above it returns their data. REQUIRES:
// l.mu held.
func (l *PartitionLog) pruneAbortedLocked() {
	i := sort.Search(len(l.mu.aborted), func(i int) bool { return l.mu.aborted[i].LastOffset >= l.mu.logStart })
	if i > 0 {
		l.mu.aborted = append([]AbortedTxn(nil), l.mu.aborted[i:]...)
	}
}

// encodeTxnsLocked appends the transactions' part of a state row
// (partition_logstart.go) to b. REQUIRES: l.mu held.
func (l *PartitionLog) encodeTxnsLocked(b []byte) []byte {
	ids := make([]int64, 0, len(l.mu.ongoing))
	for id := range l.mu.ongoing {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint64(b, uint64(l.mu.ongoing[id]))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.mu.aborted)))
	for _, a := range l.mu.aborted {
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	}
	return b
}

// decodeTxns reads the transactions' part of a state row into st and
// returns what follows it; what says what is wrong ("" when nothing).
func decodeTxns(v []byte, st *stateRow) (rest []byte, what string) {
	if len(v) < 4 {
		return v, "the ongoing transactions cut short"
	}
	n := binary.BigEndian.Uint32(v)
	if v = v[4:]; uint64(len(v)) < 16*uint64(n) {
		return v, fmt.Sprintf("%d ongoing transactions in %d bytes", n, len(v))
	}
	for range n {
		st.ongoing[int64(binary.BigEndian.Uint64(v))] = int64(binary.BigEndian.Uint64(v[8:]))
		v = v[16:]
	}
	if len(v) < 4 {
		return v, "the aborted transactions cut short"
	}
	n = binary.BigEndian.Uint32(v)
	if v = v[4:]; uint64(len(v)) < 24*uint64(n) {
		return v, fmt.Sprintf("%d aborted transactions in %d bytes", n, len(v))
	}
	for range n {
		st.aborted = append(st.aborted, AbortedTxn{ProducerID: int64(binary.BigEndian.Uint64(v)),
			FirstOffset: int64(binary.BigEndian.Uint64(v[8:])), LastOffset: int64(binary.BigEndian.Uint64(v[16:]))})
		v = v[24:]
	}
	return v, ""
}
