package events

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Store is one event store: the log of its topic's only partition plus the
// stream index.
//
// mu serializes appends from the expected-revision check until the batch
// is applied to Pebble; it is never held across the fsync wait, so
// concurrent appends share one fsync (group commit).
type Store struct {
	svc       *Service
	name      string
	id        uint32
	record    storeRecord
	topic     *topics.Topic
	partition *topics.Partition

	// consumerMu serializes the writes of durable consumers (consumer.go)
	// from their check until the batch is applied; never held across a
	// sync. Lock order: consumerMu before mu.
	consumerMu sync.Mutex
	// consumers counts the store's consumer rows. Guarded by consumerMu.
	consumers int

	mu struct {
		sync.Mutex
		nextStreamID uint64
		lastTS       int64 // timestamp of the last appended event, ms
		lastSecond   int64 // last second with a time index row, -1 none
		deleted      bool
	}
}

func newStore(s *Service, rec storeRecord, topic *topics.Topic) *Store {
	p, _ := topic.Partition(0)
	st := &Store{svc: s, name: rec.Name, id: rec.ID, record: rec, topic: topic, partition: p}
	st.mu.nextStreamID = 1
	st.mu.lastSecond = -1
	return st
}

// recover loads the next stream ID, the last time index second and the
// last event timestamp from the store. Its cost is a few seeks.
func (st *Store) recover() error {
	db := st.svc.store
	p := storeTablePrefix(pebblestore.PrefixEventStreamHead, st.id)
	it, err := db.NewIter(p, pebblestore.PrefixEnd(p))
	if err != nil {
		return err
	}
	if it.Last() {
		st.mu.nextStreamID = uint64(pebblestore.OffsetFromKey(it.Key())) + 1
	}
	if err := it.Close(); err != nil {
		return err
	}
	p = storeTablePrefix(pebblestore.PrefixEventTimeIndex, st.id)
	if it, err = db.NewIter(p, pebblestore.PrefixEnd(p)); err != nil {
		return err
	}
	if it.Last() {
		st.mu.lastSecond = pebblestore.OffsetFromKey(it.Key())
	}
	if err := it.Close(); err != nil {
		return err
	}
	if st.consumers, err = st.countConsumers(); err != nil {
		return err
	}
	hwm := st.partition.HighWatermark()
	if hwm > st.partition.LogStartOffset() {
		r := newReader(st)
		e, ok, err := r.eventAt(hwm - 1)
		if err != nil {
			return err
		}
		if ok {
			st.mu.lastTS = e.Timestamp
		}
	}
	return nil
}

// Name is the store's name (and its topic's).
func (st *Store) Name() string { return st.name }

// Info describes a store.
type Info struct {
	Name string
	// FirstPosition is the first readable position.
	FirstPosition int64
	// NextPosition is the position the next event gets: every position
	// below it is durable and readable.
	NextPosition int64
	// Streams is the number of streams ever written.
	Streams   int64
	CreatedMs int64
	TopicID   string
}

// Info returns the store's positions and counts.
func (st *Store) Info() Info {
	st.mu.Lock()
	streams := int64(st.mu.nextStreamID - 1)
	st.mu.Unlock()
	return Info{
		Name:          st.name,
		FirstPosition: st.partition.LogStartOffset(),
		NextPosition:  st.partition.HighWatermark(),
		Streams:       streams,
		CreatedMs:     st.record.Created,
		TopicID:       st.record.TopicID,
	}
}

// NextPosition is the position of the next event; positions below it are
// durable.
func (st *Store) NextPosition() int64 { return st.partition.HighWatermark() }

// FirstPosition is the first readable position.
func (st *Store) FirstPosition() int64 { return st.partition.LogStartOffset() }

// AddWaiter registers ch for a non-blocking send whenever new events become
// readable (or the store is deleted). ch should be buffered.
func (st *Store) AddWaiter(ch chan<- struct{}) { st.partition.AddWaiter(ch) }

// RemoveWaiter undoes AddWaiter.
func (st *Store) RemoveWaiter(ch chan<- struct{}) { st.partition.RemoveWaiter(ch) }

// Deleted reports whether the store (or its topic) was deleted.
func (st *Store) Deleted() bool {
	if st.partition.Deleted() {
		return true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.deleted
}

// lookupStream returns the stream's ID and head; found is false when the
// stream was never written.
func (st *Store) lookupStream(name string) (id uint64, head streamHead, found bool, err error) {
	db := st.svc.store
	key := streamCatalogKey(st.id, name)
	v, err := db.Get(key)
	if errors.Is(err, pebblestore.ErrNotFound) {
		return 0, streamHead{LastRevision: -1, LastPosition: -1}, false, nil
	}
	if err != nil {
		return 0, streamHead{}, false, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	raw, err := decodeU64(v, "stream catalog", key)
	if err != nil {
		return 0, streamHead{}, false, err
	}
	id = uint64(raw)
	hk := streamHeadKey(st.id, id)
	hv, err := db.Get(hk)
	if err != nil {
		return 0, streamHead{}, false, fmt.Errorf("%w: stream %q has a catalog row but no head: %v", pebblestore.ErrCorruption, name, err)
	}
	head, err = decodeStreamHead(hv, hk)
	if err != nil {
		return 0, streamHead{}, false, err
	}
	return id, head, true, nil
}
