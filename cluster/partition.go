package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"sync"

	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

var (
	// ErrInvalidBatch: a proposed command is not one valid Kafka record
	// batch (magic 2, its length, a CRC-32C that matches); send a batch
	// as the producer encodes it.
	ErrInvalidBatch = errors.New("cluster: not a valid Kafka record batch (magic 2, length and CRC-32C checked)")
	// ErrOffsetOutOfRange: no applied batch holds the offset asked.
	ErrOffsetOutOfRange = errors.New("cluster: offset out of the partition log's range")
	// ErrOutOfOrderSequence: an idempotent producer's batch does not
	// follow its last one (a gap, or a new epoch not starting at 0);
	// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER.
	ErrOutOfOrderSequence = errors.New("cluster: the batch's sequence does not follow the producer's last batch on this partition")
	// ErrInvalidProducerEpoch: an idempotent producer's batch with an
	// epoch older than one already applied (a fenced producer).
	ErrInvalidProducerEpoch = errors.New("cluster: the batch's producer epoch is older than the producer's current epoch on this partition")
	// ErrTransactionCoordinatorFenced: a transaction marker whose
	// coordinator epoch is lower than that of the last marker applied for
	// its producer (a deposed coordinator's); it takes no offset and
	// changes nothing. Kafka TRANSACTION_COORDINATOR_FENCED.
	ErrTransactionCoordinatorFenced = errors.New("cluster: the marker's coordinator epoch is older than that of the producer's last marker on this partition")
)

// The fields of a Kafka v2 record batch header this file reads or writes
// (KIP-98 format): baseOffset and partitionLeaderEpoch sit before the
// CRC-32C, which covers the bytes from attributes on, so a reader may set
// both without touching the checksum (Kafka's own broker sets them so).
const (
	batchHeaderSize     = 61
	batchLengthAt       = 8
	batchEpochAt        = 12
	batchMagicAt        = 16
	batchCRCAt          = 17
	batchAttributesAt   = 21
	batchLastDeltaAt    = 23
	batchMaxTsAt        = 35
	batchProducerIDAt   = 43
	batchProducerEpAt   = 51
	batchBaseSeqAt      = 53
	batchLengthOverhead = 12 // baseOffset and batchLength precede what batchLength counts
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CheckBatch checks that b is one whole Kafka v2 record batch with a
// matching CRC-32C, and returns its number of offsets (lastOffsetDelta+1).
func CheckBatch(b []byte) (int64, error) {
	if len(b) < batchHeaderSize {
		return 0, fmt.Errorf("%w: %d bytes, a header has %d", ErrInvalidBatch, len(b), batchHeaderSize)
	}
	if n := int64(int32(binary.BigEndian.Uint32(b[batchLengthAt:]))); n != int64(len(b)-batchLengthOverhead) {
		return 0, fmt.Errorf("%w: batchLength %d, the batch has %d bytes after it", ErrInvalidBatch, n, len(b)-batchLengthOverhead)
	}
	if b[batchMagicAt] != 2 {
		return 0, fmt.Errorf("%w: magic %d", ErrInvalidBatch, b[batchMagicAt])
	}
	if got, want := crc32.Checksum(b[batchAttributesAt:], castagnoli), binary.BigEndian.Uint32(b[batchCRCAt:]); got != want {
		return 0, fmt.Errorf("%w: CRC-32C %#x, the header says %#x", ErrInvalidBatch, got, want)
	}
	delta := int32(binary.BigEndian.Uint32(b[batchLastDeltaAt:]))
	if delta < 0 {
		return 0, fmt.Errorf("%w: lastOffsetDelta %d", ErrInvalidBatch, delta)
	}
	return int64(delta) + 1, nil
}

// PartitionLog is the state machine of one partition's Raft group, whose
// Raft log IS the partition log: the data is written once. A command is
// one Kafka record batch as the producer sent it; the Raft entry holding
// it is the only copy on disk. Applying it assigns its offsets (the
// partition's next offset, in log order, alike on every replica) and
// records where it is: (base offset, Raft index, term, size, max
// timestamp) in an in-memory index. Read fetches the entries from the
// Raft log and returns the batches with their base offset and partition
// leader epoch (the Raft term of the entry) set, both outside the CRC.
//
// Idempotent producers (KIP-98) are deduplicated here, at apply, so every
// replica decides alike and the decision survives a failover: per
// producer ID the epoch and its last five batches (first and last
// sequence, base offset), as Kafka's ProducerStateManager keeps them. A
// batch equal to one of those is a duplicate: it takes no offset and its
// result is the original base offset (success). A sequence that does not
// follow the last batch is ErrOutOfOrderSequence, an older epoch
// ErrInvalidProducerEpoch; both take no offset. Transactions (KIP-98):
// partition_txn.go.
//
// Invariants: offsets are contiguous from 0 and follow the log order;
// every batch the index names is committed and applied (so never
// truncated by Raft); the index and the producer state are rebuilt at
// start by applying the log again (the Host replays every committed
// entry, after the state row its compacted log starts from). A command
// that is not a valid batch takes no offset and is the proposer's error
// on every replica alike. The other commands: a log-start command moves
// the log start (partition_logstart.go), a compaction command compacts
// the log (partition_compact.go).
//
// Apply is called by the Host's loop; the readers from any goroutine.
type PartitionLog struct {
	store   *pebblestore.Store
	group   uint64
	compact Compactor

	mu struct {
		sync.RWMutex
		batches []indexedBatch // by base offset
		next    int64          // the high watermark: every applied offset is below it
		// producers: the idempotent producers' state (above).
		producers map[int64]*producerState
		waiters   map[chan struct{}]struct{}
		// logStart, anchors, compactTo: partition_logstart.go.
		logStart  int64
		anchors   []uint64
		compactTo uint64
		// ongoing and aborted: partition_txn.go.
		ongoing map[int64]int64
		aborted []AbortedTxn
		// cleanEnd: the largest clean range end a compaction command
		// applied since the start (partition_compact.go); a leader's
		// hint only, not in the state rows.
		cleanEnd         int64
		tombstoneHorizon int64
	}
}

type indexedBatch struct {
	base      int64
	raftIndex uint64
	term      uint64
	maxTs     int64
	size      int32
	lastDelta int32 // the batch holds [base, base+lastDelta]
}

// producerBatches is how many of a producer's last batches are kept for
// deduplication (Kafka: 5, the most in-flight requests an idempotent
// producer may have).
const producerBatches = 5

type producerState struct {
	epoch int16
	// coordinatorEpoch is that of the producer's last marker applied here
	// (noCoordinatorEpoch when none, or restored from a state row of
	// version 1 or 2); it never decreases and survives epoch bumps
	// (partition_txn.go).
	coordinatorEpoch int32
	// last holds the last batches, oldest first.
	last []producerBatch
	// lastTimestamp is the max timestamp of the producer's last batch
	// applied since this replica started, or since the state row it
	// restored (not in the rows); -1 when none (DescribeProducers).
	lastTimestamp int64
}

// noCoordinatorEpoch is the coordinator epoch of a producer no marker was
// applied for: any marker's passes it (Kafka's ProducerStateEntry: -1).
const noCoordinatorEpoch = -1

type producerBatch struct {
	firstSeq, lastSeq int32
	base              int64
}

// NewPartitionLog is the state machine of the partition replicated by
// Raft group group, whose entries are in store; compact decides its
// compaction commands (partition_compact.go; nil: refused, alike on
// every replica built so).
func NewPartitionLog(store *pebblestore.Store, group uint64, compact Compactor) *PartitionLog {
	l := &PartitionLog{store: store, group: group, compact: compact}
	l.mu.producers = map[int64]*producerState{}
	l.mu.ongoing = map[int64]int64{}
	l.mu.waiters = map[chan struct{}]struct{}{}
	l.mu.tombstoneHorizon = -1
	return l
}

// Apply implements GroupStateMachine: the result is the batch's base
// offset (the original one for a duplicate).
func (l *PartitionLog) Apply(e Entry) (uint64, error) {
	if isLogStartCommand(e.Data) {
		return l.applyLogStart(e)
	}
	if isCompactionCommand(e.Data) {
		return l.applyCompaction(e)
	}
	n, err := CheckBatch(e.Data)
	if err != nil {
		return 0, err
	}
	b := e.Data
	attrs := binary.BigEndian.Uint16(b[batchAttributesAt:])
	if attrs&batchControl != 0 {
		return l.applyMarker(e, n)
	}
	txn := attrs&batchTransactional != 0
	pid := int64(binary.BigEndian.Uint64(b[batchProducerIDAt:]))
	if txn && pid < 0 {
		return 0, fmt.Errorf("%w: a transactional batch without a producer ID", ErrInvalidBatch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base := l.mu.next
	if pid >= 0 {
		epoch := int16(binary.BigEndian.Uint16(b[batchProducerEpAt:]))
		first := int32(binary.BigEndian.Uint32(b[batchBaseSeqAt:]))
		dup, ok, err := l.checkSequence(pid, epoch, first, n)
		if err != nil {
			return 0, err
		}
		if ok {
			return uint64(dup), nil
		}
		l.recordSequence(pid, epoch, first, n, base)
		l.mu.producers[pid].lastTimestamp = int64(binary.BigEndian.Uint64(b[batchMaxTsAt:]))
		if _, open := l.mu.ongoing[pid]; txn && !open {
			l.mu.ongoing[pid] = base // the transaction's first batch here opens it
		}
	}
	l.appendLocked(e, b, base, n)
	return uint64(base), nil
}

// appendLocked adds batch b, applied at e, to the index at base (n
// offsets) and wakes the waiters. A batch without records (one compaction
// emptied, partition_compact.go) takes its offsets but stays out of the
// index. REQUIRES: l.mu held.
func (l *PartitionLog) appendLocked(e Entry, b []byte, base, n int64) {
	maxTs := int64(binary.BigEndian.Uint64(b[batchMaxTsAt:]))
	if binary.BigEndian.Uint32(b[batchRecordsAt:]) != 0 {
		l.mu.batches = append(l.mu.batches, indexedBatch{base: base, raftIndex: e.Index, term: e.Term, maxTs: maxTs,
			size: int32(len(b)), lastDelta: int32(n - 1)})
	}
	l.mu.next += n
	l.wakeLocked()
}

// wakeLocked signals every waiter. REQUIRES: l.mu held.
func (l *PartitionLog) wakeLocked() {
	for w := range l.mu.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// lastSeq is the sequence of a batch's last record (sequences wrap from
// MaxInt32 to 0, as Kafka's).
func lastSeq(first int32, n int64) int32 {
	return int32((int64(first) + n - 1) % (math.MaxInt32 + 1))
}

// checkSequence decides a batch of producer pid: a duplicate of a kept
// batch (its base offset, true), the next batch (false), or an error.
// REQUIRES: l.mu held.
func (l *PartitionLog) checkSequence(pid int64, epoch int16, first int32, n int64) (int64, bool, error) {
	st := l.mu.producers[pid]
	switch {
	case st != nil && epoch < st.epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, pid, epoch, st.epoch)
	case st == nil || epoch > st.epoch || len(st.last) == 0:
		// A new producer or epoch, or an epoch a marker started (fenced).
		if first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d epoch %d starts at sequence %d on this partition, not 0", ErrOutOfOrderSequence, pid, epoch, first)
		}
		return 0, false, nil
	}
	last := lastSeq(first, n)
	for _, pb := range st.last {
		if pb.firstSeq == first && pb.lastSeq == last {
			return pb.base, true, nil
		}
	}
	if want := lastSeq(st.last[len(st.last)-1].lastSeq, 2); first != want {
		return 0, false, fmt.Errorf("%w: producer %d sent sequence %d, the next is %d", ErrOutOfOrderSequence, pid, first, want)
	}
	return 0, false, nil
}

// recordSequence keeps an accepted batch of producer pid. REQUIRES: l.mu held.
func (l *PartitionLog) recordSequence(pid int64, epoch int16, first int32, n, base int64) {
	st := l.mu.producers[pid]
	switch {
	case st == nil:
		st = &producerState{epoch: epoch, coordinatorEpoch: noCoordinatorEpoch, lastTimestamp: -1}
		l.mu.producers[pid] = st
	case st.epoch != epoch:
		st.epoch, st.last = epoch, nil
	}
	if len(st.last) == producerBatches {
		st.last = append(st.last[:0], st.last[1:]...)
	}
	st.last = append(st.last, producerBatch{firstSeq: first, lastSeq: lastSeq(first, n), base: base})
}

// HighWatermark is the next offset: every offset below it is committed
// (on a majority, durably) and readable.
func (l *PartitionLog) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.next
}

// AddWaiter registers w to be signalled (without blocking) after every
// applied batch: a long-polling fetch waits on it.
func (l *PartitionLog) AddWaiter(w chan struct{}) {
	l.mu.Lock()
	l.mu.waiters[w] = struct{}{}
	l.mu.Unlock()
}

// RemoveWaiter unregisters w.
func (l *PartitionLog) RemoveWaiter(w chan struct{}) {
	l.mu.Lock()
	delete(l.mu.waiters, w)
	l.mu.Unlock()
}

// Read returns the batch holding offset, as a Kafka fetch returns it:
// base offset and partition leader epoch set. The bytes are a copy.
func (l *PartitionLog) Read(offset int64) ([]byte, error) {
	out, err := l.ReadRange(offset, 1, true, nil)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("%w: %d (the log ends at %d)", ErrOffsetOutOfRange, offset, l.HighWatermark())
	}
	return out, err
}

// ReadRange appends to dst the batches from the one holding offset on,
// up to maxBytes (the first one whole when minOne, KIP-74), as a Kafka
// fetch returns them. offset == the high watermark reads nothing; an
// offset outside [log start, high watermark] is ErrOffsetOutOfRange.
func (l *PartitionLog) ReadRange(offset int64, maxBytes int, minOne bool, dst []byte) ([]byte, error) {
	l.mu.RLock()
	next, start := l.mu.next, l.mu.logStart
	i := sort.Search(len(l.mu.batches), func(i int) bool { return l.mu.batches[i].base > offset }) - 1
	if i < 0 || l.batchEndLocked(i) <= offset {
		i++ // offset is in a gap compaction left: the next batch
	}
	var want []indexedBatch
	if offset >= start && offset < next && i < len(l.mu.batches) {
		total := 0
		for _, b := range l.mu.batches[i:] {
			if total+int(b.size) > maxBytes && !(minOne && total == 0) {
				break
			}
			total += int(b.size)
			want = append(want, b)
		}
	}
	l.mu.RUnlock()
	if offset < start || offset > next {
		return dst, fmt.Errorf("%w: %d (the log is [%d, %d])", ErrOffsetOutOfRange, offset, start, next)
	}
	for _, at := range want {
		v, err := l.store.Get(pebblestore.RaftEntryKey(l.group, at.raftIndex))
		if err != nil {
			return dst, fmt.Errorf("cluster: raft group %d: read the entry %d of offset %d: %w", l.group, at.raftIndex, at.base, err)
		}
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil || len(e.GetData()) < 16+batchHeaderSize {
			return dst, fmt.Errorf("cluster: raft group %d: decode the entry %d of offset %d: %w", l.group, at.raftIndex, at.base, pebblestore.ErrCorruption)
		}
		start := len(dst)
		dst = append(dst, e.GetData()[16:]...) // the envelope, then the batch
		binary.BigEndian.PutUint64(dst[start:], uint64(at.base))
		binary.BigEndian.PutUint32(dst[start+batchEpochAt:], uint32(min(at.term, math.MaxInt32)))
	}
	return dst, nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-279) on the leader
// of epoch current, from the index, as Kafka's leader epoch cache does
// (the current epoch starts at the end of the log when a leader takes
// over): for epoch == current, (current, high watermark); for an older
// epoch, the largest epoch of a batch not above it (epoch itself when
// there is none) and the base offset of the first batch of a larger
// epoch, or the high watermark when none has one yet; (-1, -1) for an
// epoch below 0 or above current.
func (l *PartitionLog) EndOffsetForEpoch(epoch, current int32) (int32, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case epoch < 0 || epoch > current:
		return -1, -1
	case epoch == current:
		return current, l.mu.next
	}
	i := sort.Search(len(l.mu.batches), func(i int) bool { return l.mu.batches[i].term > uint64(epoch) })
	floor := epoch
	if i > 0 {
		floor = int32(l.mu.batches[i-1].term)
	}
	if i == len(l.mu.batches) {
		return floor, l.mu.next
	}
	return floor, max(l.mu.batches[i].base, l.mu.logStart)
}

// OffsetForTimestamp is ListOffsets' answer for a timestamp ts >= 0: the
// base offset of the first batch whose max timestamp is at least ts, and
// that timestamp; (-1, -1) when none. Batch granularity: Kafka returns
// the first record at or after ts, which can be inside that batch.
func (l *PartitionLog) OffsetForTimestamp(ts int64) (int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, b := range l.mu.batches {
		if b.maxTs >= ts {
			return max(b.base, l.mu.logStart), b.maxTs
		}
	}
	return -1, -1
}

// MaxTimestamp is the largest max timestamp of a batch and the base
// offset of that batch (ListOffsets -3, KIP-734); (-1, -1) when empty.
func (l *PartitionLog) MaxTimestamp() (int64, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	off, ts := int64(-1), int64(-1)
	for _, b := range l.mu.batches {
		if b.maxTs > ts {
			off, ts = max(b.base, l.mu.logStart), b.maxTs
		}
	}
	return off, ts
}
