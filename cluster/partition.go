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
// records where it is: (base offset, Raft index, term) in an in-memory
// index. Read fetches the entry from the Raft log and returns the batch
// with its base offset and partition leader epoch (the Raft term of the
// entry) set, both outside the CRC.
//
// Invariants: offsets are contiguous from 0 and follow the log order;
// every batch the index names is committed and applied (so never
// truncated by Raft); the index is rebuilt at start by applying the log
// again (the Host replays every committed entry). A command that is not
// a valid batch takes no offset and is the proposer's error on every
// replica alike.
//
// Apply is called by the Host's loop; Read and HighWatermark from any
// goroutine.
type PartitionLog struct {
	store *pebblestore.Store
	group uint64

	mu struct {
		sync.RWMutex
		batches []indexedBatch // by base offset
		next    int64          // the high watermark: every applied offset is below it
	}
}

type indexedBatch struct {
	base      int64
	raftIndex uint64
	term      uint64
}

// NewPartitionLog is the state machine of the partition replicated by
// Raft group group, whose entries are in store.
func NewPartitionLog(store *pebblestore.Store, group uint64) *PartitionLog {
	return &PartitionLog{store: store, group: group}
}

// Apply implements GroupStateMachine: the result is the batch's base
// offset.
func (l *PartitionLog) Apply(e Entry) (uint64, error) {
	n, err := CheckBatch(e.Data)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base := l.mu.next
	l.mu.batches = append(l.mu.batches, indexedBatch{base: base, raftIndex: e.Index, term: e.Term})
	l.mu.next += n
	return uint64(base), nil
}

// HighWatermark is the next offset: every offset below it is committed
// (on a majority, durably) and readable.
func (l *PartitionLog) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.next
}

// Read returns the batch holding offset, as a Kafka fetch returns it:
// base offset and partition leader epoch set. The bytes are a copy.
func (l *PartitionLog) Read(offset int64) ([]byte, error) {
	l.mu.RLock()
	i := sort.Search(len(l.mu.batches), func(i int) bool { return l.mu.batches[i].base > offset }) - 1
	var at indexedBatch
	found := offset >= 0 && offset < l.mu.next && i >= 0
	if found {
		at = l.mu.batches[i]
	}
	l.mu.RUnlock()
	if !found {
		return nil, fmt.Errorf("%w: %d (the log ends at %d)", ErrOffsetOutOfRange, offset, l.HighWatermark())
	}
	v, err := l.store.Get(pebblestore.RaftEntryKey(l.group, at.raftIndex))
	if err != nil {
		return nil, fmt.Errorf("cluster: raft group %d: read the entry %d of offset %d: %w", l.group, at.raftIndex, offset, err)
	}
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil || len(e.GetData()) < 16+batchHeaderSize {
		return nil, fmt.Errorf("cluster: raft group %d: decode the entry %d of offset %d: %w", l.group, at.raftIndex, offset, pebblestore.ErrCorruption)
	}
	b := e.GetData()[16:] // the envelope, then the batch; Unmarshal copied it
	binary.BigEndian.PutUint64(b, uint64(at.base))
	binary.BigEndian.PutUint32(b[batchEpochAt:], uint32(min(at.term, math.MaxInt32)))
	return b, nil
}
