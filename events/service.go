// Package events is the event store: named stores of streams with
// optimistic appends. A store is a one-partition topic of the same name
// whose offsets are the store's gap-free positions; a stream index maps
// (stream, revision) to positions (keys.go). Appends are checked and
// applied under the store's lock and made durable by the topics append
// path, so an acknowledged event survives a crash together with its index
// rows. Functions that depend on time take it as an argument.
package events

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Config configures a Service. Zero limits take the defaults.
type Config struct {
	Logger zerolog.Logger
	// MaxEventBytes bounds data + metadata of one event (default 1 MiB).
	MaxEventBytes int
	// MaxAppendEvents bounds the events of one append (default 1000).
	MaxAppendEvents int
	// MaxAppendBytes bounds data + metadata of one append (default 8 MiB).
	MaxAppendBytes int
}

// Validate checks the limits.
func (c *Config) Validate() error {
	if c.MaxEventBytes < 0 || c.MaxEventBytes > DefaultMaxAppendBytes {
		return fmt.Errorf("events: max event bytes must be between 1 and %d, got %d", DefaultMaxAppendBytes, c.MaxEventBytes)
	}
	if c.MaxAppendEvents < 0 || c.MaxAppendEvents > 100000 {
		return fmt.Errorf("events: max append events must be between 1 and 100000, got %d", c.MaxAppendEvents)
	}
	if c.MaxAppendBytes < 0 || c.MaxAppendBytes > 64<<20 {
		return fmt.Errorf("events: max append bytes must be between 1 and %d, got %d", 64<<20, c.MaxAppendBytes)
	}
	return nil
}

func (c *Config) applyDefaults() {
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.MaxAppendEvents == 0 {
		c.MaxAppendEvents = DefaultMaxAppendEvents
	}
	if c.MaxAppendBytes == 0 {
		c.MaxAppendBytes = DefaultMaxAppendBytes
	}
}

// Limits returns the effective limits.
func (s *Service) Limits() Config { return s.cfg }

// CheckSpace returns nil, or, while the data directory's disk is almost
// full (pebblestore.SpaceGuard), ErrStorage wrapping the
// *pebblestore.SpaceError: appends are refused then. Deletions are not.
func (s *Service) CheckSpace() error {
	if err := s.store.Space().Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// Service is the catalog of event stores.
//
// Lock order: Service.catalogMu before Service.mu before Store.consumerMu
// before Store.mu before the topics locks. catalogMu serializes creating and deleting stores and
// is held across their synced writes; only those two admin operations take
// it, so no append or read ever waits on a sync for it. mu guards the map
// and is never held across a sync.
type Service struct {
	cfg   Config
	store *pebblestore.Store
	tm    *topics.Manager
	log   zerolog.Logger

	catalogMu sync.Mutex
	// nextID is the next store ID. Guarded by catalogMu (Open runs alone).
	nextID uint32

	mu struct {
		sync.RWMutex
		byName map[string]*Store
	}
}

// storeRecord is the catalog row of one store (value of a 0x40 key).
type storeRecord struct {
	ID      uint32 `json:"id"`
	Name    string `json:"name"`
	TopicID string `json:"topic_id,omitempty"` // hex; empty while creating
	Created int64  `json:"created_ms"`
	// State is "creating" between the catalog row and the topic, then "ready".
	State string `json:"state"`
}

const (
	stateCreating = "creating"
	stateReady    = "ready"
)

// Open loads the store catalog and recovers each store's in-memory state.
// It runs after topics.Open. A store whose topic is gone (deleted by a
// Kafka client) is dropped with its index, with a warning; a store whose
// creation a crash interrupted is finished or undone.
func Open(store *pebblestore.Store, tm *topics.Manager, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.applyDefaults()
	s := &Service{cfg: cfg, store: store, tm: tm, log: cfg.Logger.With().Str("component", "events").Logger()}
	s.mu.byName = make(map[string]*Store)
	s.nextID = 1

	v, err := store.Get(nextStoreIDKey())
	switch {
	case errors.Is(err, pebblestore.ErrNotFound):
	case err != nil:
		return nil, err
	case len(v) != 4:
		return nil, fmt.Errorf("%w: event store id counter has %d bytes", pebblestore.ErrCorruption, len(v))
	default:
		s.nextID = binary.BigEndian.Uint32(v)
	}

	var records []storeRecord
	it, err := store.NewIter(storePrefix(), pebblestore.PrefixEnd(storePrefix()))
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.Value()
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		var rec storeRecord
		if err := json.Unmarshal(val, &rec); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("%w: event store catalog row %x: %v", pebblestore.ErrCorruption, it.Key(), err)
		}
		records = append(records, rec)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	for _, rec := range records {
		if rec.ID >= s.nextID {
			s.nextID = rec.ID + 1
		}
		st, err := s.recoverStore(rec)
		if err != nil {
			return nil, err
		}
		if st != nil {
			s.mu.byName[st.name] = st
		}
	}
	// A store-owned topic that no store has should not exist (creation
	// writes the catalog row first, deletion removes the topic first);
	// release it to Kafka clients rather than delete data on a guess.
	for _, name := range tm.OwnedTopics(topics.OwnerEventStore) {
		if _, ok := s.mu.byName[name]; ok {
			continue
		}
		s.log.Warn().Str("topic", name).Msg("an event store topic that no store has; it is now a plain topic")
		if err := tm.SetOwner(name, topics.OwnerNone); err != nil {
			return nil, fmt.Errorf("%w: releasing topic %s: %w", ErrStorage, name, err)
		}
	}
	return s, nil
}

// recoverStore rebuilds one store, or returns nil after dropping it.
func (s *Service) recoverStore(rec storeRecord) (*Store, error) {
	var topic *topics.Topic
	switch rec.State {
	case stateCreating:
		t, ok := s.tm.Topic(rec.Name)
		if !ok || t.NumPartitions() != 1 || t.Partitions()[0].HighWatermark() != 0 ||
			(t.Owner() != topics.OwnerNone && t.Owner() != topics.OwnerEventStore) {
			// The topic was never created, or it is someone else's.
			s.log.Warn().Str("store", rec.Name).Msg("dropping an event store whose creation was interrupted")
			return nil, s.dropRows(rec)
		}
		topic = t
		rec.TopicID = hex.EncodeToString(t.ID[:])
		rec.State = stateReady
		if err := s.writeRecord(rec, nil); err != nil {
			return nil, err
		}
	case stateReady:
		var id topics.TopicID
		raw, err := hex.DecodeString(rec.TopicID)
		if err != nil || len(raw) != len(id) {
			return nil, fmt.Errorf("%w: event store %s has topic id %q", pebblestore.ErrCorruption, rec.Name, rec.TopicID)
		}
		copy(id[:], raw)
		t, ok := s.tm.TopicByID(id)
		if !ok || t.NumPartitions() < 1 {
			s.log.Warn().Str("store", rec.Name).Msg("the topic of this event store was deleted; dropping the store's index")
			return nil, s.dropRows(rec)
		}
		topic = t
	default:
		return nil, fmt.Errorf("%w: event store %s has state %q", pebblestore.ErrCorruption, rec.Name, rec.State)
	}
	// Topics created before owners were stored are marked now.
	if err := s.tm.SetOwner(topic.Name, topics.OwnerEventStore); errors.Is(err, topics.ErrTopicOwned) {
		s.log.Error().Err(err).Str("store", rec.Name).Msg("the topic of this event store belongs to another component; the store is not loaded")
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%w: marking the topic of store %s as the store's: %w", ErrStorage, rec.Name, err)
	}
	st := newStore(s, rec, topic)
	if err := st.recover(); err != nil {
		return nil, fmt.Errorf("recovering event store %s: %w", rec.Name, err)
	}
	return st, nil
}

func (s *Service) writeRecord(rec storeRecord, extra func(b *pebblestore.Batch)) error {
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	b := s.store.NewBatch()
	b.Set(storeKey(rec.Name), val)
	if extra != nil {
		extra(b)
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// dropRows deletes a store's catalog row and every index row.
func (s *Service) dropRows(rec storeRecord) error {
	b := s.store.NewBatch()
	b.Delete(storeKey(rec.Name))
	for _, prefix := range storeTables {
		p := storeTablePrefix(prefix, rec.ID)
		b.DeleteRange(p, pebblestore.PrefixEnd(p))
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// Store returns the store with the given name.
func (s *Service) Store(name string) (*Store, error) {
	s.mu.RLock()
	st, ok := s.mu.byName[name]
	s.mu.RUnlock()
	if !ok || st.partition.Deleted() {
		return nil, fmt.Errorf("%w: %q", ErrStoreNotFound, name)
	}
	return st, nil
}

// Stores returns every store, sorted by name.
func (s *Service) Stores() []*Store {
	s.mu.RLock()
	out := make([]*Store, 0, len(s.mu.byName))
	for _, st := range s.mu.byName {
		if !st.partition.Deleted() {
			out = append(out, st)
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// topicConfigs are the configs of a store's topic: kept forever (retention
// must never trim events out from under the stream index) and large enough
// for the largest append.
func (s *Service) topicConfigs() map[string]string {
	return map[string]string{
		"retention.ms":      "-1",
		"retention.bytes":   "-1",
		"cleanup.policy":    "delete",
		"max.message.bytes": strconv.Itoa(s.cfg.MaxAppendBytes + s.cfg.MaxAppendEvents*(MaxTypeBytes+MaxEventIDBytes+MaxStreamBytes+128) + 1024),
	}
}

// CreateStore creates the store name (and its topic) at time now, or
// returns the existing one with created false. It returns
// ErrInvalidStoreName, ErrReservedName, or ErrTopicExists when a topic that
// is not a store has the name.
func (s *Service) CreateStore(name string, now time.Time) (st *Store, created bool, err error) {
	nowMs := now.UnixMilli()
	if err := ValidateStoreName(name); err != nil {
		return nil, false, err
	}
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	s.mu.RLock()
	old, ok := s.mu.byName[name]
	s.mu.RUnlock()
	if ok && !old.partition.Deleted() {
		return old, false, nil
	} else if ok {
		// Its topic was deleted by a Kafka client: retire the store.
		s.mu.Lock()
		delete(s.mu.byName, name)
		s.mu.Unlock()
		if err := s.dropRows(old.record); err != nil {
			return nil, false, err
		}
	}
	if _, ok := s.tm.Topic(name); ok {
		return nil, false, fmt.Errorf("%w: %q is a topic; choose another store name", ErrTopicExists, name)
	}
	rec := storeRecord{ID: s.nextID, Name: name, Created: nowMs, State: stateCreating}
	next := binary.BigEndian.AppendUint32(nil, rec.ID+1)
	if err := s.writeRecord(rec, func(b *pebblestore.Batch) { b.Set(nextStoreIDKey(), next) }); err != nil {
		return nil, false, err
	}
	s.nextID++
	topic, err := s.tm.CreateOwnedTopic(name, 1, s.topicConfigs(), topics.OwnerEventStore)
	if err != nil {
		_ = s.dropRows(rec)
		if errors.Is(err, topics.ErrTopicExists) {
			return nil, false, fmt.Errorf("%w: %q is a topic; choose another store name", ErrTopicExists, name)
		}
		return nil, false, fmt.Errorf("%w: creating the topic of store %s: %w", ErrStorage, name, err)
	}
	rec.TopicID = hex.EncodeToString(topic.ID[:])
	rec.State = stateReady
	if err := s.writeRecord(rec, nil); err != nil {
		// The "creating" row stays; recovery finishes the job at next boot.
		return nil, false, err
	}
	st = newStore(s, rec, topic)
	if err := st.recover(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	s.mu.byName[name] = st
	s.mu.Unlock()
	s.log.Info().Str("store", name).Uint32("store_id", rec.ID).Msg("event store created")
	return st, true, nil
}

// DeleteStore deletes a store, its topic and its index.
func (s *Service) DeleteStore(name string) error {
	s.catalogMu.Lock()
	defer s.catalogMu.Unlock()
	s.mu.Lock()
	st, ok := s.mu.byName[name]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrStoreNotFound, name)
	}
	st.mu.Lock()
	st.mu.deleted = true
	st.mu.Unlock()
	delete(s.mu.byName, name)
	s.mu.Unlock()
	// A consumer write that saw the store live has been applied once
	// consumerMu is free: the range deletion below covers it, and later
	// ones see the store deleted.
	st.consumerMu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	st.consumerMu.Unlock()
	if !st.partition.Deleted() {
		if err := s.tm.DeleteOwnedTopic(name, topics.OwnerEventStore); err != nil && !errors.Is(err, topics.ErrUnknownTopic) {
			return fmt.Errorf("%w: deleting the topic of store %s: %w", ErrStorage, name, err)
		}
	}
	if err := s.dropRows(st.record); err != nil {
		return err
	}
	s.log.Info().Str("store", name).Msg("event store deleted")
	return nil
}

// Stats sums the stores: how many, how many events (offset span), how many
// streams.
type Stats struct {
	Stores  int
	Events  int64
	Streams int64
}

// Stats returns the totals over every store.
func (s *Service) Stats() Stats {
	var out Stats
	for _, st := range s.Stores() {
		info := st.Info()
		out.Stores++
		out.Events += info.NextPosition - info.FirstPosition
		out.Streams += info.Streams
	}
	return out
}
