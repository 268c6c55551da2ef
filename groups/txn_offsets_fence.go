package groups

// Coordinator-epoch fencing of the markers that end pending transactional
// offsets (KIP-98; apache/kafka ProducerAppendInfo.appendEndTxnMarker:
// the producer epoch is checked first, then the coordinator epoch). In
// Kafka __consumer_offsets is a partition log like any other, so a
// marker's coordinator epoch is kept in that partition's producer state
// and a lower one is refused with TRANSACTION_COORDINATOR_FENCED: a
// deposed transaction coordinator's late COMMIT must not commit the
// pending offsets of the producer's next transaction (same producer
// epoch) started through the new coordinator. Here each partition of
// __consumer_offsets keeps, per producer ID, the coordinator epoch of the
// last marker applied to it (-1 before any):
//
//   - a marker with a lower one is refused (ErrTransactionCoordinatorFenced)
//     and changes nothing; equal or higher passes;
//   - a marker with a higher one records it, in the same write as its
//     outcome, or in a write of its own when it ends nothing (so a late
//     marker of the old coordinator is fenced whichever arrived first).
//     An epoch of 0 or below is not recorded over none: coordinators
//     send no negative epoch, and with RF 1 every epoch is 0, so
//     single-node and RF 1 brokers write nothing more than before.
//
// Storage (durable, read back at Open or at a partition's load):
//
//	local:      0x27 partition u32 | producer u64 -> version u8 (1) | coordinatorEpoch i32
//	replicated: key   recTxnCoordinatorEpoch i16 | partition i32 | producer i64
//	            value version i16 (0) | coordinatorEpoch i32
//
// A store or log written before has neither: every producer reads as -1,
// which any marker passes. On a replicated __consumer_offsets the leader
// decides under c.mu against the state its load rebuilt from the log (the
// latest value of each key) plus its own appends in log order, and the
// record carries the decision, so a load on any replica rebuilds the same
// epochs; a fenced marker appends nothing. The rows and records are kept
// for good (a producer's entry is a few bytes; Kafka expires producer
// state, we do not yet).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// ErrTransactionCoordinatorFenced: a marker whose coordinator epoch is
// lower than that of the last marker applied for its producer on the
// partition of __consumer_offsets (a deposed coordinator's); nothing was
// written. Kafka TRANSACTION_COORDINATOR_FENCED.
var ErrTransactionCoordinatorFenced = errors.New("groups: transaction coordinator fenced: a newer transaction coordinator already wrote a marker for this producer on this partition of __consumer_offsets; the newer coordinator completes the transaction")

// TxnMarker is a transaction marker for a partition of __consumer_offsets
// (WriteTxnMarkers).
type TxnMarker struct {
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
}

// recTxnCoordinatorEpoch is the key type of a producer's coordinator epoch
// record on a replicated __consumer_offsets (after recTxnPendingOffset).
// Part of the log format.
const recTxnCoordinatorEpoch int16 = 0x7F02

const (
	txnCoordEpochRowVersion    byte  = 1
	txnCoordEpochRecordVersion int16 = 0
)

func txnCoordEpochRowKey(p int32, producerID int64) []byte {
	k := binary.BigEndian.AppendUint32([]byte{pebblestore.PrefixGroupTxnCoordEpoch}, uint32(p))
	return binary.BigEndian.AppendUint64(k, uint64(producerID))
}

func txnCoordEpochRecordKey(p int32, producerID int64) []byte {
	k := kbin.AppendInt16(nil, recTxnCoordinatorEpoch)
	k = kbin.AppendInt32(k, p)
	return kbin.AppendInt64(k, producerID)
}

// coordEpochWrite is the raise of a producer's coordinator epoch on a
// partition that a marker brings (nil: none).
type coordEpochWrite struct {
	partition   int32
	producerID  int64
	epoch, prev int32
}

// ops is the row (and, replicated, the record) of w; none for nil.
func (w *coordEpochWrite) ops() []rowOp {
	if w == nil {
		return nil
	}
	row := append([]byte{txnCoordEpochRowVersion}, binary.BigEndian.AppendUint32(nil, uint32(w.epoch))...)
	rec := kbin.AppendInt32(kbin.AppendInt16(nil, txnCoordEpochRecordVersion), w.epoch)
	return []rowOp{{key: txnCoordEpochRowKey(w.partition, w.producerID), value: row,
		rec: &topics.Record{Key: txnCoordEpochRecordKey(w.partition, w.producerID), Value: rec}}}
}

// txnCoordEpochLocked is the coordinator epoch of producerID's last marker
// on partition p, -1 when none. REQUIRES: c.mu held.
func (c *Coordinator) txnCoordEpochLocked(p int32, producerID int64) int32 {
	if e, ok := c.mu.txnCoordEpochs[p][producerID]; ok {
		return e
	}
	return -1
}

// setTxnCoordEpochLocked records e in memory. REQUIRES: c.mu held.
func (c *Coordinator) setTxnCoordEpochLocked(p int32, producerID int64, e int32) {
	if c.mu.txnCoordEpochs == nil {
		c.mu.txnCoordEpochs = map[int32]map[int64]int32{}
	}
	if c.mu.txnCoordEpochs[p] == nil {
		c.mu.txnCoordEpochs[p] = map[int64]int32{}
	}
	c.mu.txnCoordEpochs[p][producerID] = e
}

// fenceTxnMarkerLocked checks m's coordinator epoch: the write that
// records it (nil when it is not higher, or 0 or below over none), or
// ErrTransactionCoordinatorFenced. REQUIRES: c.mu held.
func (c *Coordinator) fenceTxnMarkerLocked(m TxnMarker) (*coordEpochWrite, error) {
	cur := c.txnCoordEpochLocked(m.Partition, m.ProducerID)
	switch {
	case m.CoordinatorEpoch < cur:
		return nil, fmt.Errorf("%w (marker's coordinator epoch %d, last %d)", ErrTransactionCoordinatorFenced, m.CoordinatorEpoch, cur)
	case m.CoordinatorEpoch == cur, m.CoordinatorEpoch <= 0:
		return nil, nil
	}
	return &coordEpochWrite{partition: m.Partition, producerID: m.ProducerID, epoch: m.CoordinatorEpoch, prev: cur}, nil
}

// noteCoordEpochLocked records w in memory once its write is applied or
// proposed. REQUIRES: c.mu held.
func (c *Coordinator) noteCoordEpochLocked(w *coordEpochWrite) {
	if w != nil {
		c.setTxnCoordEpochLocked(w.partition, w.producerID, w.epoch)
	}
}

// undoCoordEpochLocked puts the previous epoch back after w's replicated
// write failed (not known committed), unless it changed since.
// REQUIRES: c.mu held.
func (c *Coordinator) undoCoordEpochLocked(w *coordEpochWrite) {
	if w == nil || c.txnCoordEpochLocked(w.partition, w.producerID) != w.epoch {
		return
	}
	if w.prev < 0 {
		delete(c.mu.txnCoordEpochs[w.partition], w.producerID)
		return
	}
	c.setTxnCoordEpochLocked(w.partition, w.producerID, w.prev)
}

// writeCoordEpochLocked writes w alone (a marker that ends nothing). It
// releases c.mu. REQUIRES: c.mu held; w not nil.
func (c *Coordinator) writeCoordEpochLocked(w *coordEpochWrite, now time.Time) func() error {
	defer c.mu.Unlock()
	if c.mu.replicated != nil {
		// appendReplicatedLocked needs a group only for its partition.
		ps, _, err := c.appendReplicatedLocked(&op{now: now}, &group{partition: w.partition}, nil, w.ops(), false)
		if err != nil {
			return func() error { return commitAppendError(err) }
		}
		c.noteCoordEpochLocked(w)
		return func() error {
			err := ps.wait()
			if err == nil {
				return nil
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.undoCoordEpochLocked(w)
			return commitAppendError(err)
		}
	}
	b := c.store.NewBatch()
	for _, r := range w.ops() {
		b.Set(r.key, r.value)
	}
	if err := b.Apply(); err != nil {
		b.Close()
		return func() error { return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err) }
	}
	c.noteCoordEpochLocked(w)
	return func() error {
		if err := b.Wait(); err != nil {
			return fmt.Errorf("%w: %v", ErrTxnOffsetsStorage, err)
		}
		return nil
	}
}

// recoverTxnCoordEpochsLocked reads the 0x27 rows back (Open).
// REQUIRES: c.mu held.
func (c *Coordinator) recoverTxnCoordEpochsLocked() error {
	lower := []byte{pebblestore.PrefixGroupTxnCoordEpoch}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.Value()
		if err != nil {
			return err
		}
		p, pid, e, err := decodeTxnCoordEpochRow(it.Key(), val)
		if err != nil {
			return err
		}
		c.setTxnCoordEpochLocked(p, pid, e)
	}
	return nil
}

// decodeTxnCoordEpochRow reads a 0x27 row: partition, producer, epoch,
// or an error wrapping pebblestore.ErrCorruption.
func decodeTxnCoordEpochRow(key, val []byte) (int32, int64, int32, error) {
	switch {
	case len(key) != 13:
		return 0, 0, 0, fmt.Errorf("%w: coordinator epoch key %x has the wrong length", pebblestore.ErrCorruption, key)
	case len(val) < 1 || val[0] != txnCoordEpochRowVersion:
		return 0, 0, 0, fmt.Errorf("%w: coordinator epoch row %x: unknown version (a newer broker wrote it?)", pebblestore.ErrCorruption, key)
	case len(val) != 5:
		return 0, 0, 0, fmt.Errorf("%w: coordinator epoch row %x: %d bytes, want 5", pebblestore.ErrCorruption, key, len(val))
	}
	return int32(binary.BigEndian.Uint32(key[1:5])), int64(binary.BigEndian.Uint64(key[5:])), int32(binary.BigEndian.Uint32(val[1:])), nil
}

// loadTxnCoordEpochRecordLocked applies the latest value of a coordinator
// epoch record (Load). REQUIRES: c.mu held.
func (c *Coordinator) loadTxnCoordEpochRecordLocked(key, value []byte) error {
	if len(key) < 2 || int16(binary.BigEndian.Uint16(key)) != recTxnCoordinatorEpoch {
		return fmt.Errorf("coordinator epoch record key %x is malformed", key)
	}
	kr := kbin.Reader{Src: key[2:]}
	p, pid := kr.Int32(), kr.Int64()
	if !kr.Ok() || len(kr.Src) != 0 {
		return fmt.Errorf("coordinator epoch record key %x is malformed", key)
	}
	vr := kbin.Reader{Src: value}
	if v := vr.Int16(); !vr.Ok() || v != txnCoordEpochRecordVersion {
		return fmt.Errorf("coordinator epoch record of producer %d: value %x has an unknown version (a newer broker wrote it)", pid, value)
	}
	e := vr.Int32()
	if !vr.Ok() || len(vr.Src) != 0 {
		return fmt.Errorf("coordinator epoch record of producer %d: value of %d bytes, want 6", pid, len(value))
	}
	c.setTxnCoordEpochLocked(p, pid, e)
	return nil
}
