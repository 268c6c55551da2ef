package txns

import (
	"encoding/json"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
)

// A transactional ID's row (pebblestore.TxnKey) holds the JSON of txn:
// producer ID and epoch, state, timeout, start and update times (Unix ms),
// partitions by topic name, groups, and the offsets staged per group.

// write is an applied row write to wait on; err is set when the apply failed.
type write struct {
	b   *pebblestore.Batch
	err error
}

// writeLocked applies t's row to the store (visible, not yet durable) and
// returns the write to wait on.
//
// REQUIRES: c.mu held.
func (c *Coordinator) writeLocked(t *txn) *write {
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

// wait waits for w to be durable.
func (c *Coordinator) wait(w *write) error {
	if w == nil {
		return nil
	}
	if w.err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, w.err)
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
