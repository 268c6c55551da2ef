package txns

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// A transactional ID's row (pebblestore.TxnKey) holds the JSON of txn:
// producer ID and epoch, state, timeout, start and update times (Unix ms),
// partitions by topic name, groups, the offsets staged per group, and, in a
// Prepare state completing in two phases, the remote partitions (whose
// markers the delivery sends; Topic and Partition).

// write is an applied row write to wait on (b), or a proposed one (wait,
// replicated.go); err is set when the apply or proposal failed.
type write struct {
	b    *pebblestore.Batch
	wait func() (int64, error)
	err  error
}

// writeLocked applies t's row to the store (visible, not yet durable) and
// returns the write to wait on.
//
// REQUIRES: c.mu held.
func (c *Coordinator) writeLocked(t *txn) *write {
	if c.mu.replicated != nil {
		return c.appendLocked(t.ID, encodeTxn(t))
	}
	b := c.store.NewBatch()
	b.Set(pebblestore.TxnKey(t.ID), encodeTxn(t))
	if err := b.Apply(); err != nil {
		b.Close()
		c.log.Error().Err(err).Str("transactional_id", t.ID).Msg("writing transaction state failed")
		return &write{err: err}
	}
	return &write{b: b}
}

// encodeTxn is the value of t's row.
func encodeTxn(t *txn) []byte {
	v, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("txns: encoding transaction %q: %v", t.ID, err))
	}
	return v
}

// decodeTxn is the transaction of a row's value (local or a record of a
// replicated partition).
func decodeTxn(v []byte) (*txn, error) {
	t := &txn{}
	if err := json.Unmarshal(v, t); err != nil {
		return nil, err
	}
	return t, nil
}

// wait waits for w to be durable.
func (c *Coordinator) wait(w *write) error {
	if w == nil {
		return nil
	}
	if w.err != nil {
		if errors.Is(w.err, ErrNotCoordinator) {
			return w.err
		}
		return fmt.Errorf("%w: %v", ErrStorage, w.err)
	}
	if w.wait != nil {
		_, err := w.wait()
		return err
	}
	if err := w.b.Wait(); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

func (c *Coordinator) load() error {
	prefix := []byte{pebblestore.PrefixTxn}
	it, err := c.store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		t := &txn{}
		if err := json.Unmarshal(v, t); err != nil {
			return fmt.Errorf("%w: transaction row %q: %v", pebblestore.ErrCorruption, it.Key()[1:], err)
		}
		c.mu.txns[t.ID] = t
		c.mu.byPID[t.ProducerID] = t
	}
	return nil
}
