package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/vibemq/broker/pebblestore"
)

// Durable consumers (NATIVE-QUEUE.md §4 "Tail"): a named checkpoint per
// store, the position the consumer reads next. Only a commit moves it;
// reads never do. One row per consumer (0x47, keys.go), written in a
// batch of its own under Store.consumerMu and answered after its fsync.

// Consumer limits.
const (
	// MaxConsumerNameChars bounds a consumer name, in characters.
	MaxConsumerNameChars = 128
	// MaxConsumersPerStore bounds the consumers of one store.
	MaxConsumersPerStore = 10000
)

// ConsumerInfo describes a durable consumer.
type ConsumerInfo struct {
	Name string
	// Start is the start the consumer was created with, normalized
	// ("first", "last", "new", "pos:N", "time:RFC3339", "delta:D").
	Start string
	// Position is the checkpoint: the position the consumer reads next.
	Position  int64
	CreatedMs int64
	UpdatedMs int64
}

// ValidateConsumerName checks a consumer name: 1-128 characters of UTF-8
// without control characters, and not . or .. (a path segment that
// routers and clients resolve away).
func ValidateConsumerName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the consumer name is empty", ErrInvalidConsumerName)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %q is not allowed (a path segment . or .. cannot name a resource)", ErrInvalidConsumerName, name)
	}
	if n := utf8.RuneCountInString(name); n > MaxConsumerNameChars {
		return fmt.Errorf("%w: the consumer name is %d characters, the limit is %d", ErrInvalidConsumerName, n, MaxConsumerNameChars)
	}
	if err := checkText(name); err != "" {
		return fmt.Errorf("%w: the consumer name %s", ErrInvalidConsumerName, err)
	}
	return nil
}

// consumerRow is the value of a 0x47 row:
//
//	v1 u8 | position u64 | created_ms i64 | updated_ms i64 | start
type consumerRow struct {
	Position  int64
	CreatedMs int64
	UpdatedMs int64
	Start     string
}

func (c consumerRow) encode() []byte {
	out := make([]byte, 0, 25+len(c.Start))
	out = append(out, rowVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(c.Position))
	out = binary.BigEndian.AppendUint64(out, uint64(c.CreatedMs))
	out = binary.BigEndian.AppendUint64(out, uint64(c.UpdatedMs))
	return append(out, c.Start...)
}

func decodeConsumerRow(v []byte, key []byte) (consumerRow, error) {
	if len(v) < 25 || v[0] != rowVersion {
		return consumerRow{}, fmt.Errorf("%w: consumer row %x is malformed (%d bytes)", pebblestore.ErrCorruption, key, len(v))
	}
	c := consumerRow{
		Position:  int64(binary.BigEndian.Uint64(v[1:])),
		CreatedMs: int64(binary.BigEndian.Uint64(v[9:])),
		UpdatedMs: int64(binary.BigEndian.Uint64(v[17:])),
		Start:     string(v[25:]),
	}
	if c.Position < 0 {
		return consumerRow{}, fmt.Errorf("%w: consumer row %x has position %d", pebblestore.ErrCorruption, key, c.Position)
	}
	return c, nil
}

func (c consumerRow) info(name string) ConsumerInfo {
	return ConsumerInfo{Name: name, Start: c.Start, Position: c.Position, CreatedMs: c.CreatedMs, UpdatedMs: c.UpdatedMs}
}

// getConsumer reads a consumer's row; found is false when it does not
// exist. A read that a write depends on holds st.consumerMu.
func (st *Store) getConsumer(name string) (row consumerRow, found bool, err error) {
	key := consumerKey(st.id, name)
	v, err := st.svc.store.Get(key)
	if errors.Is(err, pebblestore.ErrNotFound) {
		return consumerRow{}, false, nil
	}
	if err != nil {
		return consumerRow{}, false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	row, err = decodeConsumerRow(v, key)
	return row, err == nil, err
}

// checkLiveLocked returns ErrStoreNotFound once the store was deleted.
// REQUIRES: st.consumerMu, so that DeleteStore's barrier orders it.
func (st *Store) checkLiveLocked() error {
	if st.Deleted() {
		return fmt.Errorf("%w: %q was deleted", ErrStoreNotFound, st.name)
	}
	return nil
}

// syncBarrier returns once every batch applied before it is durable.
func (st *Store) syncBarrier() error {
	b := st.svc.store.NewBatch()
	b.LogData(nil)
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// writeConsumerLocked applies row under consumerMu and returns the batch to
// Wait on after unlocking, so that concurrent commits share fsyncs.
// REQUIRES: st.consumerMu.
func (st *Store) writeConsumerLocked(name string, row consumerRow) (*pebblestore.Batch, error) {
	b := st.svc.store.NewBatch()
	b.Set(consumerKey(st.id, name), row.encode())
	if err := b.Apply(); err != nil {
		b.Close()
		return nil, fmt.Errorf("%w: writing consumer %q of store %s: %w", ErrStorage, name, st.name, err)
	}
	return b, nil
}

// CreateConsumer creates the consumer name whose checkpoint is position,
// resolved by the caller from start (kept to recognize a repeated create),
// at time now. An existing consumer with the same start is returned with
// created false and its checkpoint unchanged; one with another start is
// ErrConsumerExists. position must be within [0, next position]
// (ErrOutOfRange). The consumer is durable when CreateConsumer returns.
func (st *Store) CreateConsumer(name, start string, position int64, now time.Time) (info ConsumerInfo, created bool, err error) {
	nowMs := now.UnixMilli()
	if err := ValidateConsumerName(name); err != nil {
		return ConsumerInfo{}, false, err
	}
	st.consumerMu.Lock()
	locked := true
	defer func() {
		if locked {
			st.consumerMu.Unlock()
		}
	}()
	if err := st.checkLiveLocked(); err != nil {
		return ConsumerInfo{}, false, err
	}
	row, found, err := st.getConsumer(name)
	if err != nil {
		return ConsumerInfo{}, false, err
	}
	if found {
		if row.Start != start {
			return row.info(name), false, fmt.Errorf("%w: consumer %q of store %s was created with start %s, not %s; delete it to start it elsewhere, or commit a position",
				ErrConsumerExists, name, st.name, row.Start, start)
		}
		// The creating batch may be applied and not yet synced.
		st.consumerMu.Unlock()
		locked = false
		if err := st.syncBarrier(); err != nil {
			return ConsumerInfo{}, false, err
		}
		return row.info(name), false, nil
	}
	if next := st.NextPosition(); position < 0 || position > next {
		return ConsumerInfo{}, false, fmt.Errorf("%w: start position %d is outside [0, %d]", ErrOutOfRange, position, next)
	}
	if st.consumers >= MaxConsumersPerStore {
		return ConsumerInfo{}, false, fmt.Errorf("%w: store %s has %d consumers, the limit", ErrTooManyConsumers, st.name, st.consumers)
	}
	row = consumerRow{Position: position, CreatedMs: nowMs, UpdatedMs: nowMs, Start: start}
	b, err := st.writeConsumerLocked(name, row)
	if err != nil {
		return ConsumerInfo{}, false, err
	}
	st.consumers++
	st.consumerMu.Unlock()
	locked = false
	if err := b.Wait(); err != nil {
		return ConsumerInfo{}, false, fmt.Errorf("%w: creating consumer %q: %w", ErrStorage, name, err)
	}
	st.svc.log.Debug().Str("store", st.name).Str("consumer", name).Int64("position", position).Msg("consumer created")
	return row.info(name), true, nil
}

// Consumer describes the consumer name (ErrConsumerNotFound when absent).
func (st *Store) Consumer(name string) (ConsumerInfo, error) {
	if err := ValidateConsumerName(name); err != nil {
		return ConsumerInfo{}, err
	}
	row, found, err := st.getConsumer(name)
	if err != nil {
		return ConsumerInfo{}, err
	}
	if !found {
		return ConsumerInfo{}, fmt.Errorf("%w: store %s has no consumer %q", ErrConsumerNotFound, st.name, name)
	}
	return row.info(name), nil
}

// Consumers lists the store's consumers by name (at most
// MaxConsumersPerStore).
func (st *Store) Consumers() ([]ConsumerInfo, error) {
	p := storeTablePrefix(pebblestore.PrefixEventConsumer, st.id)
	it, err := st.svc.store.NewIter(p, pebblestore.PrefixEnd(p))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()
	var out []ConsumerInfo
	for ok := it.First(); ok && len(out) < MaxConsumersPerStore; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		row, err := decodeConsumerRow(v, it.Key())
		if err != nil {
			return nil, err
		}
		out = append(out, row.info(string(it.Key()[len(p):])))
	}
	return out, nil
}

// CommitConsumer sets the consumer's checkpoint to position, the next
// position it will read: within [0, next position] (ErrOutOfRange).
// A position below the checkpoint is ErrCheckpointRegression unless force;
// the same position changes nothing. Check and apply happen under one
// lock, so of concurrent commits the checkpoint keeps the highest accepted
// one. The checkpoint is durable when CommitConsumer returns.
func (st *Store) CommitConsumer(name string, position int64, force bool, now time.Time) (ConsumerInfo, error) {
	nowMs := now.UnixMilli()
	if err := ValidateConsumerName(name); err != nil {
		return ConsumerInfo{}, err
	}
	if next := st.NextPosition(); position < 0 || position > next {
		return ConsumerInfo{}, fmt.Errorf("%w: position %d is outside [0, %d] (the store's next position)", ErrOutOfRange, position, next)
	}
	st.consumerMu.Lock()
	locked := true
	defer func() {
		if locked {
			st.consumerMu.Unlock()
		}
	}()
	if err := st.checkLiveLocked(); err != nil {
		return ConsumerInfo{}, err
	}
	row, found, err := st.getConsumer(name)
	if err != nil {
		return ConsumerInfo{}, err
	}
	if !found {
		return ConsumerInfo{}, fmt.Errorf("%w: store %s has no consumer %q", ErrConsumerNotFound, st.name, name)
	}
	if position < row.Position && !force {
		return row.info(name), &CheckpointRegressionError{Consumer: name, Position: position, Current: row.Position}
	}
	if position == row.Position {
		// Nothing to write, but the commit that wrote it may not be synced.
		st.consumerMu.Unlock()
		locked = false
		if err := st.syncBarrier(); err != nil {
			return ConsumerInfo{}, err
		}
		return row.info(name), nil
	}
	row.Position, row.UpdatedMs = position, max(nowMs, row.UpdatedMs)
	b, err := st.writeConsumerLocked(name, row)
	if err != nil {
		return ConsumerInfo{}, err
	}
	st.consumerMu.Unlock()
	locked = false
	if err := b.Wait(); err != nil {
		return ConsumerInfo{}, fmt.Errorf("%w: committing consumer %q: %w", ErrStorage, name, err)
	}
	return row.info(name), nil
}

// DeleteConsumer deletes the consumer name (ErrConsumerNotFound when
// absent); the deletion is durable when it returns.
func (st *Store) DeleteConsumer(name string) error {
	if err := ValidateConsumerName(name); err != nil {
		return err
	}
	st.consumerMu.Lock()
	if err := st.checkLiveLocked(); err != nil {
		st.consumerMu.Unlock()
		return err
	}
	_, found, err := st.getConsumer(name)
	if err != nil || !found {
		st.consumerMu.Unlock()
		if err == nil {
			err = fmt.Errorf("%w: store %s has no consumer %q", ErrConsumerNotFound, st.name, name)
		}
		return err
	}
	b := st.svc.store.NewBatch()
	b.Delete(consumerKey(st.id, name))
	if err := b.Apply(); err != nil {
		b.Close()
		st.consumerMu.Unlock()
		return fmt.Errorf("%w: deleting consumer %q: %w", ErrStorage, name, err)
	}
	st.consumers--
	st.consumerMu.Unlock()
	if err := b.Wait(); err != nil {
		return fmt.Errorf("%w: deleting consumer %q: %w", ErrStorage, name, err)
	}
	return nil
}

// countConsumers counts the store's consumer rows (at open).
func (st *Store) countConsumers() (int, error) {
	p := storeTablePrefix(pebblestore.PrefixEventConsumer, st.id)
	it, err := st.svc.store.NewIter(p, pebblestore.PrefixEnd(p))
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Close()
}

// CheckpointRegressionError is a commit below the consumer's checkpoint
// without force.
type CheckpointRegressionError struct {
	Consumer string
	Position int64 // the refused position
	Current  int64 // the checkpoint
}

func (e *CheckpointRegressionError) Error() string {
	return fmt.Sprintf("events: checkpoint regression: consumer %q is at position %d; committing %d would move it back (force it to rewind)", e.Consumer, e.Current, e.Position)
}

// Is makes errors.Is(err, ErrCheckpointRegression) true.
func (e *CheckpointRegressionError) Is(target error) bool { return target == ErrCheckpointRegression }
