package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// Batch collects writes that become visible and durable together.
//
// The two-step commit (Apply, then Wait) lets a caller publish writes in a
// fixed order while the fsync that makes them durable is shared with every
// other writer in flight (group commit): Apply returns once the writes are in
// the memtable; Wait returns once they are in the synced WAL. Callers must
// not treat applied writes as acknowledged before Wait returns nil.
type Batch struct {
	s *Store
	// b is the Pebble batch; for NewBatchWithSize it is created at the
	// first write, sized max(size, pebbleInitSize of that write).
	b       *pebble.Batch
	size    int
	applied bool
	// deleted are the DeleteRange ranges, queued for Store.Reclaim once
	// the batch is durable.
	deleted [][2][]byte
}

// NewBatch starts an empty write batch.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// NewBatchWithSize starts an empty batch with room for about size bytes of
// keys and values, so that adding large values does not grow it repeatedly.
func (s *Store) NewBatchWithSize(size int) *Batch {
	return &Batch{s: s, size: size}
}

// pebbleInitSize is the buffer Pebble's Batch.init (pebble v2 batch.go)
// wants for a batch whose first record has a key and a value of these
// sizes: the record with room for two varints and the batch header,
// rounded up to a power of two, at least 1 KiB. A smaller buffer given to
// pebble.DB.NewBatchWithSize is thrown away there and a new one allocated:
// a 1 MB produce request's batch (a hint of 1 MB plus its rows, the first
// record nearly all of it) was allocated twice, at the hint and at 1 MiB.
func pebbleInitSize(keyLen, valueLen int) int {
	need := keyLen + valueLen + 2*binary.MaxVarintLen64 + batchrepr.HeaderLen
	n := 1 << 10
	for n < need {
		n *= 2
	}
	return n
}

// maxRetainedBatchBytes is the largest batch buffer Pebble's batch pool
// keeps for reuse when a batch sized by NewBatchWithSize is released
// (Pebble's default is 1 MiB). A produce request with 1 MB batches for 8
// partitions fills an 8 MB batch; above the default every one of them
// allocated its buffer anew (1 byte allocated per byte produced). Like any
// sync.Pool content, a kept buffer is dropped within two GC cycles when
// unused.
const maxRetainedBatchBytes = 16 << 20

// pb returns the Pebble batch, creating it for a first record of keyLen
// and valueLen bytes.
func (b *Batch) pb(keyLen, valueLen int) *pebble.Batch {
	if b.b == nil {
		b.b = b.s.db.NewBatchWithSize(max(b.size, pebbleInitSize(keyLen, valueLen)), pebble.WithMaxRetainedSizeBytes(maxRetainedBatchBytes))
	}
	return b.b
}

// Set writes key=value. The bytes are copied.
func (b *Batch) Set(key, value []byte) { _ = b.pb(len(key), len(value)).Set(key, value, nil) }

// Delete removes key.
func (b *Batch) Delete(key []byte) { _ = b.pb(len(key), 0).Delete(key, nil) }

// DeleteRange removes every key in [start, end). Once the batch is durable
// the range is queued for compaction (Store.Reclaim), so that the space
// comes back within seconds rather than when Pebble's own compactions
// reach the range.
func (b *Batch) DeleteRange(start, end []byte) {
	_ = b.pb(len(start), len(end)).DeleteRange(start, end, nil)
	b.deleted = append(b.deleted, [2][]byte{bytes.Clone(start), bytes.Clone(end)})
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b == nil || b.b.Empty() }

// Len is the encoded size of the batch in bytes.
func (b *Batch) Len() int { return b.pb(0, 0).Len() }

// Apply makes the batch visible to readers, in the order Apply is called.
// The batch is not yet durable; call Wait.
func (b *Batch) Apply() error {
	if b.s.closed.Load() {
		return ErrClosed
	}
	b.pb(0, 0)
	b.applied = true
	if b.s.writeOpt.Sync {
		b.s.unsynced.Add(1) // before the writes are visible: SyncBarrier
		if err := b.s.db.ApplyNoSyncWait(b.b, b.s.writeOpt); err != nil {
			b.s.unsynced.Add(-1)
			b.applied = false
			return storageFailure(fmt.Errorf("pebblestore: apply: %w", err))
		}
		return nil
	}
	if err := b.s.db.Apply(b.b, b.s.writeOpt); err != nil {
		b.applied = false
		return storageFailure(fmt.Errorf("pebblestore: apply: %w", err))
	}
	return nil
}

// Wait blocks until an applied batch is durable, then releases it.
func (b *Batch) Wait() error {
	if !b.applied {
		b.Close()
		return nil
	}
	defer b.b.Close()
	if b.s.writeOpt.Sync {
		err := b.b.SyncWait()
		b.s.unsynced.Add(-1)
		if err != nil {
			return storageFailure(fmt.Errorf("pebblestore: sync: %w", err))
		}
	}
	b.s.reclaim.add(b.deleted)
	return nil
}

// SyncBarrier returns once every batch applied before the call is
// durable. A caller that answers from what it read, without writing (a
// refusal, an empty result), calls it before answering, so that its answer
// never rests on writes a crash can still take back: they are visible from
// Apply, durable only after Wait. Without batches in flight it costs
// nothing; otherwise it syncs the WAL (an empty log record, group-committed
// with the writes in flight), which covers every batch before it. With
// the store's syncs off (Options.NoSync) nothing is durable before a
// flush and it returns at once.
func (s *Store) SyncBarrier() error {
	if !s.writeOpt.Sync || s.unsynced.Load() == 0 {
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.db.LogData(nil, s.writeOpt); err != nil {
		return storageFailure(fmt.Errorf("pebblestore: sync barrier: %w", err))
	}
	return nil
}

// Commit is Apply followed by Wait.
func (b *Batch) Commit() error {
	if err := b.Apply(); err != nil {
		if b.b != nil {
			b.b.Close()
		}
		return err
	}
	return b.Wait()
}

// Close releases a batch that was never applied.
func (b *Batch) Close() {
	if !b.applied && b.b != nil {
		b.b.Close()
	}
}

// Iter iterates keys in [lower, upper) of a consistent view.
type Iter struct {
	it     *pebble.Iterator
	closed bool
}

// NewIter opens an iterator over [lower, upper). upper may be nil.
func (s *Store) NewIter(lower, upper []byte) (*Iter, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, storageFailure(fmt.Errorf("pebblestore: new iterator: %w", err))
	}
	return &Iter{it: it}, nil
}

// First moves to the first key; false when there is none.
func (i *Iter) First() bool { return i.it.First() }

// Last moves to the last key; false when there is none.
func (i *Iter) Last() bool { return i.it.Last() }

// Next moves to the next key.
func (i *Iter) Next() bool { return i.it.Next() }

// Prev moves to the previous key.
func (i *Iter) Prev() bool { return i.it.Prev() }

// SeekGE moves to the first key >= key.
func (i *Iter) SeekGE(key []byte) bool { return i.it.SeekGE(key) }

// SeekLT moves to the last key < key.
func (i *Iter) SeekLT(key []byte) bool { return i.it.SeekLT(key) }

// Valid reports whether the iterator is at a key.
func (i *Iter) Valid() bool { return i.it.Valid() }

// Key is the current key; valid until the iterator moves.
func (i *Iter) Key() []byte { return i.it.Key() }

// Value is the current value; valid until the iterator moves.
func (i *Iter) Value() ([]byte, error) {
	v, err := i.it.ValueAndErr()
	return v, storageFailure(err)
}

// SetBounds changes the iterator's bounds; it must be positioned again.
func (i *Iter) SetBounds(lower, upper []byte) { i.it.SetBounds(lower, upper) }

// Close releases the iterator and returns any error it met. Closing twice
// is a no-op: Pebble pools iterators, so a second Close on the Pebble
// iterator would close another reader's iterator.
func (i *Iter) Close() error {
	if i.closed {
		return nil
	}
	i.closed = true
	return storageFailure(i.it.Close())
}

// LogData adds a WAL-only record that changes no key. A batch holding only
// LogData still goes through the commit pipeline, so Wait on it is a
// durability barrier for everything applied before it.
func (b *Batch) LogData(data []byte) { _ = b.pb(0, len(data)).LogData(data, nil) }
