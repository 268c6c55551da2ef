// Package queues is the native work queue and dead-letter queue engine: a
// queue is a topic (its messages are records appended through
// topics.Manager.Append, so durability and group commit are the log's)
// plus delivery state kept in Pebble rows beside the log: a state row per
// live message, a ready index (priority, due time, offset) and a lease
// index (deadline, offset). The same engine is meant to serve Kafka share
// groups (KIP-932) later.
//
// Every function takes the time as an argument (Unix milliseconds); the
// background work (lease expiry, dead-lettering, TTLs, redrive) is Tick,
// called by retention/. Every mutation is applied to the store under the
// queue's mutex and made durable (synced, group-committed) after the mutex
// is released, before the call returns.
//
// Lock order: Engine.catalogMu, then queue.mu of several queues in
// ascending queue ID, then topics' partition locks (inside Append), then
// Engine.mu (a leaf). No mutex is held across a Pebble sync.
package queues

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Config configures an Engine.
type Config struct {
	// Logger receives queue lifecycle events (never one line per message).
	Logger zerolog.Logger
	// Seed seeds the backoff jitter; 0 picks a random seed.
	Seed uint64
}

// Engine owns every native queue.
type Engine struct {
	cfg        Config
	store      *pebblestore.Store
	tm         *topics.Manager
	log        zerolog.Logger
	receiptKey []byte
	// receiptMACs holds HMAC-SHA256 states keyed with receiptKey (set
	// once at Open), reset before each use: a receipt costs no new HMAC
	// (receiptMAC).
	receiptMACs sync.Pool
	closed      atomic.Bool

	// tickMu serializes Tick (and so redrive steps).
	tickMu sync.Mutex
	// catalogMu serializes catalog changes: create, update, delete, redrive
	// task creation.
	catalogMu sync.Mutex

	mu struct {
		sync.RWMutex
		byName   map[string]*queue
		byID     map[uint32]*queue
		nextID   uint32
		tasks    map[uint64]*task
		nextTask uint64
	}

	rndMu sync.Mutex
	rnd   *mrand.Rand
}

// queueRecord is the catalog row of a queue (pebblestore 0x31), JSON.
type queueRecord struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"` // queue | dlq
	TopicID    string     `json:"topic_id"`
	Attributes Attributes `json:"attributes"`
	// DeadLetterQueue is the resolved DLQ name ("" for none).
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
	// DeadLetterFor names the queue an automatic DLQ was created for.
	DeadLetterFor string `json:"dead_letter_for,omitempty"`
	CreatedMs     int64  `json:"created_ms"`
}

// queue is one queue's in-memory state. Everything below mu is guarded by it.
type queue struct {
	id uint32
	e  *Engine

	mu        sync.Mutex
	rec       queueRecord
	topic     *topics.Topic
	deleted   bool
	bands     [PriorityLevelsMax]readyBand
	leases    map[msgKey]leaseInfo
	leaseHeap leaseHeap
	available int64 // state rows in stateAvailable
	inflight  int64 // state rows in stateInflight
	retained  int64 // state rows in stateAcked
	totals    Totals
	waiters   map[chan struct{}]struct{}
	// memos: receive memos by request id (memo.go).
	memos map[string]receiveMemo
	rr    uint32
	// expiryFrom: every expiry key below it has been swept.
	expiryFrom int64
	// sweepAt: the next time the dedup and retained tables are swept.
	sweepAt int64
	// unclaimedAt: the next time the unclaimed sweep runs; unclaimedFrom:
	// per priority band, every ready key before it has been examined by it;
	// unclaimedClock: the now of its last run (a step back resets the
	// cursors).
	unclaimedAt    int64
	unclaimedFrom  [PriorityLevelsMax]readyEntry
	unclaimedClock int64
	rates          rateWindow
}

type leaseInfo struct {
	epoch    uint32
	deadline int64
	owner    string // the Kafka share-group member holding it (share.go), "" for a native receiver
}

// Totals count transitions since the broker started.
type Totals struct {
	Sent         int64
	Received     int64
	Acked        int64
	Nacked       int64
	Reaped       int64
	Expired      int64
	DeadLettered map[string]int64
	Discarded    int64
	Redriven     int64
}

// Open loads the queue catalog, rebuilds each queue's counters and leases
// from its state rows, and loads redrive tasks. now is the broker's clock.
func Open(store *pebblestore.Store, tm *topics.Manager, cfg Config, now time.Time) (*Engine, error) {
	nowMs := now.UnixMilli()
	e := &Engine{cfg: cfg, store: store, tm: tm, log: cfg.Logger.With().Str("component", "queues").Logger()}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	e.rnd = mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e.mu.byName = map[string]*queue{}
	e.mu.byID = map[uint32]*queue{}
	e.mu.tasks = map[uint64]*task{}
	e.mu.nextID = 1
	e.mu.nextTask = 1

	key, err := store.Get(singletonKey("receipt-key"))
	switch {
	case errors.Is(err, pebblestore.ErrNotFound):
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		b := store.NewBatch()
		b.Set(singletonKey("receipt-key"), key)
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("queues: saving the receipt key: %w", err)
		}
	case err != nil:
		return nil, err
	case len(key) != 32:
		return nil, fmt.Errorf("%w: queue receipt key has %d bytes", pebblestore.ErrCorruption, len(key))
	}
	e.receiptKey = key
	if v, err := store.Get(singletonKey("next-queue-id")); err == nil {
		e.mu.nextID = decodeU32(v)
	} else if !errors.Is(err, pebblestore.ErrNotFound) {
		return nil, err
	}
	if v, err := store.Get(singletonKey("next-task-id")); err == nil && len(v) == 8 {
		e.mu.nextTask = binary.BigEndian.Uint64(v)
	} else if err != nil && !errors.Is(err, pebblestore.ErrNotFound) {
		return nil, err
	}

	it, err := store.NewIter([]byte{pebblestore.PrefixQueue}, []byte{pebblestore.PrefixQueue + 1})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 5 {
			return nil, fmt.Errorf("%w: queue catalog key %x", pebblestore.ErrCorruption, k)
		}
		qid := binary.BigEndian.Uint32(k[1:])
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		var rec queueRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("%w: queue catalog row %d: %v", pebblestore.ErrCorruption, qid, err)
		}
		rec.Attributes.normalize() // rows written before dedup_conflict/dedup_scope existed
		t, ok := tm.Topic(rec.Name)
		if !ok || hex.EncodeToString(t.ID[:]) != rec.TopicID {
			e.log.Error().Str("queue", rec.Name).Msg("the topic of this queue is gone (deleted through Kafka?); the queue is not loaded")
			continue
		}
		// Topics created before owners were stored are marked now.
		if err := tm.SetOwner(rec.Name, topics.OwnerQueue); errors.Is(err, topics.ErrTopicOwned) {
			e.log.Error().Err(err).Str("queue", rec.Name).Msg("the topic of this queue belongs to another component; the queue is not loaded")
			continue
		} else if err != nil {
			return nil, fmt.Errorf("queues: marking the topic of queue %s as the queue's: %w", rec.Name, err)
		}
		q := e.newQueue(qid, rec, t, nowMs)
		if err := q.recover(nowMs); err != nil {
			return nil, err
		}
		if invariantsEnabled {
			q.mu.Lock()
			q.checkQueueLocked()
			q.mu.Unlock()
		}
		e.mu.byName[rec.Name] = q
		e.mu.byID[qid] = q
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if err := e.deleteOrphanTopics(); err != nil {
		return nil, err
	}
	if err := e.loadTasks(); err != nil {
		return nil, err
	}
	e.log.Info().Int("queues", len(e.mu.byName)).Int("tasks", len(e.mu.tasks)).Msg("queues recovered")
	return e, nil
}

// deleteOrphanTopics deletes the queue-owned topics that no queue has: a
// crash between a queue's two commits leaves one (create: the topic before
// the catalog rows; delete: the catalog rows before the topic). Kafka
// clients cannot delete an owned topic, so the engine finishes the job.
func (e *Engine) deleteOrphanTopics() error {
	for _, name := range e.tm.OwnedTopics(topics.OwnerQueue) {
		if _, ok := e.mu.byName[name]; ok {
			continue
		}
		if err := e.tm.DeleteOwnedTopic(name, topics.OwnerQueue); err != nil && !errors.Is(err, topics.ErrUnknownTopic) {
			return fmt.Errorf("queues: deleting topic %s, which no queue has: %w", name, err)
		}
		e.log.Warn().Str("topic", name).Msg("deleted a queue topic that no queue has (a queue create or delete was interrupted)")
	}
	return nil
}

// Close makes every later call fail with shutting_down and wakes pollers.
func (e *Engine) Close() {
	if !e.closed.CompareAndSwap(false, true) {
		return
	}
	for _, q := range e.allQueues() {
		q.mu.Lock()
		q.wakeLocked()
		q.mu.Unlock()
	}
}

func (e *Engine) newQueue(qid uint32, rec queueRecord, t *topics.Topic, now int64) *queue {
	q := &queue{id: qid, e: e, rec: rec, topic: t, leases: map[msgKey]leaseInfo{}, waiters: map[chan struct{}]struct{}{},
		memos: map[string]receiveMemo{}}
	q.totals.DeadLettered = map[string]int64{}
	q.sweepAt = now
	for i := range q.bands {
		q.bands[i].init()
	}
	return q
}

// recover rebuilds counters and leases from the state rows.
func (q *queue) recover(now int64) error {
	lower := tablePrefix(pebblestore.PrefixQueueState, q.id)
	it, err := q.e.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		st, err := decodeState(v)
		if err != nil {
			return fmt.Errorf("queue %s message %s: %w", q.rec.Name, fmtID(msgFromKeyTail(it.Key())), err)
		}
		switch st.State {
		case stateAvailable:
			q.available++
		case stateInflight:
			q.inflight++
			m := msgFromKeyTail(it.Key())
			q.leases[m] = leaseInfo{epoch: st.Deliveries, deadline: st.Deadline, owner: st.Owner}
			q.leaseHeap.push(leaseEntry{deadline: st.Deadline, m: m, epoch: st.Deliveries})
		case stateAcked:
			q.retained++
		}
	}
	for i := range q.bands {
		q.bands[i].reset(false)
	}
	if err := it.Close(); err != nil {
		return err
	}
	return q.loadMemos()
}

func (e *Engine) allQueues() []*queue {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*queue, 0, len(e.mu.byID))
	for _, q := range e.mu.byID {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (e *Engine) queueByName(name string) (*queue, *Error) {
	if e.closed.Load() {
		return nil, errf(CodeShuttingDown, "the broker is shutting down")
	}
	e.mu.RLock()
	q, ok := e.mu.byName[name]
	e.mu.RUnlock()
	if !ok {
		if err := ValidateName(name); err != nil {
			return nil, err
		}
		return nil, errf(CodeQueueNotFound, "queue %q does not exist", name)
	}
	return q, nil
}

// lockQueues locks distinct queues in ascending ID order and returns the
// unlock function. A nil queue is skipped.
func lockQueues(qs ...*queue) func() {
	var uniq []*queue
	for _, q := range qs {
		if q == nil {
			continue
		}
		dup := false
		for _, u := range uniq {
			if u == q {
				dup = true
			}
		}
		if !dup {
			uniq = append(uniq, q)
		}
	}
	sort.Slice(uniq, func(i, j int) bool { return uniq[i].id < uniq[j].id })
	for _, q := range uniq {
		q.mu.Lock()
	}
	return func() {
		for i := len(uniq) - 1; i >= 0; i-- {
			uniq[i].mu.Unlock()
		}
	}
}

// deadLetterQueue returns q's DLQ, or nil for none.
// REQUIRES: q.mu held (rec is read).
func (e *Engine) deadLetterQueueLocked(q *queue) *queue {
	name := q.rec.DeadLetterQueue
	if name == "" {
		return nil
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.mu.byName[name]
}

// QueueInfo describes a queue.
type QueueInfo struct {
	Name            string
	Kind            string
	Topic           string
	TopicID         string
	Attributes      Attributes
	DeadLetterQueue string
	DeadLetterFor   string
	CreatedAt       int64
	Available       int64
	Inflight        int64
}

// REQUIRES: q.mu held.
func (q *queue) infoLocked() QueueInfo {
	return QueueInfo{
		Name: q.rec.Name, Kind: q.rec.Kind, Topic: q.rec.Name, TopicID: q.rec.TopicID,
		Attributes: q.rec.Attributes, DeadLetterQueue: q.rec.DeadLetterQueue, DeadLetterFor: q.rec.DeadLetterFor,
		CreatedAt: q.rec.CreatedMs, Available: q.available, Inflight: q.inflight,
	}
}

// CreateQueue creates a queue (and its automatic DLQ). Creating an
// existing queue with the same attributes succeeds with created=false; with
// other attributes it fails with queue_exists and the differing fields.
func (e *Engine) CreateQueue(name string, patch *AttributesPatch, now time.Time) (QueueInfo, bool, error) {
	nowMs := now.UnixMilli()
	if e.closed.Load() {
		return QueueInfo{}, false, errf(CodeShuttingDown, "the broker is shutting down")
	}
	if err := ValidateName(name); err != nil {
		return QueueInfo{}, false, err
	}
	attrs := patch.apply(DefaultAttributes())
	if err := attrs.validate(); err != nil {
		return QueueInfo{}, false, err
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	if q, _ := e.queueByName(name); q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		if d := q.rec.Attributes.diff(attrs); len(d) > 0 {
			return QueueInfo{}, false, &Error{Code: CodeQueueExists,
				Message: fmt.Sprintf("queue %q exists with other attributes (%s)", name, strings.Join(d, ", ")),
				Details: map[string]any{"diff": d}}
		}
		return q.infoLocked(), false, nil
	}
	if _, ok := e.tm.Topic(name); ok {
		return QueueInfo{}, false, errf(CodeTopicExists, "a topic named %q exists already; a queue needs a topic of its own", name)
	}
	dlqName, createDLQ, err := e.resolveDeadLetter(name, attrs)
	if err != nil {
		return QueueInfo{}, false, err
	}
	if createDLQ {
		if _, err := e.createLocked(queueRecord{Name: dlqName, Kind: "dlq", Attributes: dlqAttributes(attrs), DeadLetterFor: name, CreatedMs: nowMs}); err != nil {
			return QueueInfo{}, false, err
		}
	}
	q, err := e.createLocked(queueRecord{Name: name, Kind: "queue", Attributes: attrs, DeadLetterQueue: dlqName, CreatedMs: nowMs})
	if err != nil {
		return QueueInfo{}, false, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.infoLocked(), true, nil
}

// resolveDeadLetter checks the dead_letter attribute of queue name and
// returns the DLQ name and whether it must be created.
// REQUIRES: catalogMu held.
func (e *Engine) resolveDeadLetter(name string, attrs Attributes) (string, bool, error) {
	switch attrs.DeadLetter {
	case "none":
		return "", false, nil
	case "auto":
		dlq := name + ".dlq"
		if len(dlq) > NameMax {
			return "", false, withField(errf(CodeInvalidName, "the automatic DLQ name %q is longer than %d characters; shorten the queue name or set dead_letter", dlq, NameMax), "dead_letter")
		}
		if q, _ := e.queueByName(dlq); q != nil {
			return dlq, false, nil // reuse (e.g. kept after its source was deleted)
		}
		if _, ok := e.tm.Topic(dlq); ok {
			return "", false, errf(CodeTopicExists, "a topic named %q exists already; the automatic DLQ needs it; set dead_letter", dlq)
		}
		return dlq, true, nil
	}
	target := attrs.DeadLetter
	if target == name {
		return "", false, withField(errf(CodeDeadLetterCycle, "queue %q cannot be its own dead-letter queue", name), "dead_letter")
	}
	tq, _ := e.queueByName(target)
	if tq == nil {
		return "", false, withField(errf(CodeDeadLetterNotFound, "dead-letter queue %q does not exist; create it first or use auto", target), "dead_letter")
	}
	// Follow the chain of the target's DLQs: it must not lead back here.
	seen := map[string]bool{name: true}
	for cur := tq; cur != nil; {
		cur.mu.Lock()
		next := cur.rec.DeadLetterQueue
		cur.mu.Unlock()
		if next == "" {
			break
		}
		if seen[next] {
			return "", false, withField(errf(CodeDeadLetterCycle, "dead-letter queue %q leads back to %q", target, next), "dead_letter")
		}
		seen[next] = true
		cur, _ = e.queueByName(next)
	}
	return target, false, nil
}

// createLocked creates the topic and the catalog rows of one queue. rec is
// the queue's catalog row but its TopicID, which the new topic gives.
// REQUIRES: catalogMu held.
func (e *Engine) createLocked(rec queueRecord) (*queue, error) {
	name, attrs, now := rec.Name, rec.Attributes, rec.CreatedMs
	retention := "-1"
	if attrs.RetentionMs > 0 {
		retention = strconv.FormatInt(attrs.RetentionMs, 10)
	}
	t, err := e.tm.CreateOwnedTopic(name, attrs.Partitions, map[string]string{
		"max.message.bytes": strconv.Itoa(queueTopicMessageBytes),
		"retention.ms":      retention,
	}, topics.OwnerQueue)
	if err != nil {
		if errors.Is(err, topics.ErrTopicExists) {
			return nil, errf(CodeTopicExists, "a topic named %q exists already", name)
		}
		return nil, errStorage(err)
	}
	rec.TopicID = hex.EncodeToString(t.ID[:])
	e.mu.Lock()
	qid := e.mu.nextID
	e.mu.nextID++
	e.mu.Unlock()
	b := e.store.NewBatch()
	val, _ := json.Marshal(rec)
	b.Set(queueNameKey(name), u32Bytes(qid))
	b.Set(queueKey(qid), val)
	b.Set(singletonKey("next-queue-id"), u32Bytes(qid+1))
	if err := b.Commit(); err != nil {
		_ = e.tm.DeleteOwnedTopic(name, topics.OwnerQueue)
		return nil, errStorage(err)
	}
	q := e.newQueue(qid, rec, t, now)
	for i := range q.bands {
		q.bands[i].reset(true)
	}
	e.mu.Lock()
	e.mu.byName[name] = q
	e.mu.byID[qid] = q
	e.mu.Unlock()
	e.log.Info().Str("queue", name).Str("kind", rec.Kind).Uint32("id", qid).Msg("queue created")
	return q, nil
}

// UpdateQueue changes attributes. partitions and fifo cannot change.
// Changes apply to new leases and to leases when they end.
func (e *Engine) UpdateQueue(name string, patch *AttributesPatch, now time.Time) (QueueInfo, error) {
	nowMs := now.UnixMilli()
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return QueueInfo{}, qerr
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	q.mu.Lock()
	cur := q.rec
	q.mu.Unlock()
	attrs := patch.apply(cur.Attributes)
	if attrs.Partitions != cur.Attributes.Partitions {
		return QueueInfo{}, withField(errf(CodeImmutableField, "partitions cannot change (the queue has %d)", cur.Attributes.Partitions), "partitions")
	}
	if attrs.FIFO != cur.Attributes.FIFO {
		return QueueInfo{}, withField(errf(CodeImmutableField, "fifo cannot change"), "fifo")
	}
	if err := attrs.validate(); err != nil {
		return QueueInfo{}, err
	}
	rec := cur
	rec.Attributes = attrs
	if attrs.DeadLetter != cur.Attributes.DeadLetter {
		if cur.Kind == "dlq" && attrs.DeadLetter == "auto" {
			return QueueInfo{}, withField(errf(CodeInvalidEnum, "a dead-letter queue cannot have an automatic dead-letter queue"), "dead_letter")
		}
		dlq, create, err := e.resolveDeadLetter(name, attrs)
		if err != nil {
			return QueueInfo{}, err
		}
		if create {
			if _, err := e.createLocked(queueRecord{Name: dlq, Kind: "dlq", Attributes: dlqAttributes(attrs), DeadLetterFor: name, CreatedMs: nowMs}); err != nil {
				return QueueInfo{}, err
			}
		}
		rec.DeadLetterQueue = dlq
	}
	if err := e.writeRecord(q, rec); err != nil {
		return QueueInfo{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.infoLocked(), nil
}

// writeRecord stores rec as q's catalog row and installs it.
func (e *Engine) writeRecord(q *queue, rec queueRecord) error {
	val, _ := json.Marshal(rec)
	b := e.store.NewBatch()
	b.Set(queueKey(q.id), val)
	if err := b.Commit(); err != nil {
		return errStorage(err)
	}
	q.mu.Lock()
	q.rec = rec
	q.mu.Unlock()
	return nil
}

// DeleteQueue deletes a queue, its delivery state and its topic. A
// non-empty queue needs force; so does a queue that is another queue's
// DLQ (force sets their dead_letter to none). An automatic DLQ is deleted
// with its source when it is empty, and kept otherwise.
func (e *Engine) DeleteQueue(name string, force bool, now time.Time) error {
	q, qerr := e.queueByName(name)
	if qerr != nil {
		return qerr
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	var users []*queue
	for _, o := range e.allQueues() {
		if o == q {
			continue
		}
		o.mu.Lock()
		if o.rec.DeadLetterQueue == name {
			users = append(users, o)
		}
		o.mu.Unlock()
	}
	if len(users) > 0 && !force {
		return errf(CodeQueueInUse, "queue %q is the dead-letter queue of %q; delete that first or pass force", name, users[0].rec.Name)
	}
	q.mu.Lock()
	live := q.available + q.inflight
	q.mu.Unlock()
	if live > 0 && !force {
		return &Error{Code: CodeQueueNotEmpty, Message: fmt.Sprintf("queue %q holds %d messages; purge it or pass force", name, live),
			Details: map[string]any{"messages": live}}
	}
	for _, u := range users {
		u.mu.Lock()
		rec := u.rec
		u.mu.Unlock()
		rec.DeadLetterQueue = ""
		rec.Attributes.DeadLetter = "none"
		if err := e.writeRecord(u, rec); err != nil {
			return err
		}
		e.log.Warn().Str("queue", rec.Name).Str("deleted_dlq", name).Msg("dead_letter set to none: its dead-letter queue was deleted with force")
	}
	if err := e.deleteLocked(q); err != nil {
		return err
	}
	// The automatic DLQ goes with its source when it is empty.
	if dlq, _ := e.queueByName(name + ".dlq"); dlq != nil {
		dlq.mu.Lock()
		auto := dlq.rec.DeadLetterFor == name
		empty := dlq.available+dlq.inflight == 0
		dlq.mu.Unlock()
		if auto && empty {
			return e.deleteLocked(dlq)
		}
		if auto {
			e.log.Info().Str("queue", name).Str("dlq", dlq.rec.Name).Msg("the dead-letter queue is not empty and is kept")
		}
	}
	return nil
}

// REQUIRES: catalogMu held.
func (e *Engine) deleteLocked(q *queue) error {
	q.mu.Lock()
	b := e.store.NewBatch()
	b.Delete(queueNameKey(q.rec.Name))
	b.Delete(queueKey(q.id))
	for _, p := range perQueueTables {
		start := tablePrefix(p, q.id)
		b.DeleteRange(start, pebblestore.PrefixEnd(start))
	}
	if err := b.Apply(); err != nil {
		q.mu.Unlock()
		b.Close()
		return errStorage(err)
	}
	q.deleted = true
	name := q.rec.Name
	q.wakeLocked()
	q.mu.Unlock()
	if err := b.Wait(); err != nil {
		return errStorage(err)
	}
	e.mu.Lock()
	delete(e.mu.byName, name)
	delete(e.mu.byID, q.id)
	for _, t := range e.mu.tasks {
		if t.rec.DLQ == name && t.rec.State == taskRunning {
			t.deleted = true
		}
	}
	e.mu.Unlock()
	if err := e.tm.DeleteOwnedTopic(name, topics.OwnerQueue); err != nil && !errors.Is(err, topics.ErrUnknownTopic) {
		e.log.Error().Err(err).Str("queue", name).Msg("deleting the queue's topic failed; the next start deletes it")
	}
	e.log.Info().Str("queue", name).Msg("queue deleted")
	return nil
}

// ListQueues returns queues sorted by name: those starting with prefix,
// after the name after, at most limit (1..1000, default 100). next is the
// name to pass as after for the next page, "" at the end.
func (e *Engine) ListQueues(prefix, after string, limit int) ([]QueueInfo, string, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 1000 {
		return nil, "", rangeErr("limit", 1, 1000)
	}
	var names []string
	e.mu.RLock()
	for n := range e.mu.byName {
		if strings.HasPrefix(n, prefix) && n > after {
			names = append(names, n)
		}
	}
	e.mu.RUnlock()
	sort.Strings(names)
	next := ""
	if len(names) > limit {
		names = names[:limit]
		next = names[limit-1]
	}
	out := make([]QueueInfo, 0, len(names))
	for _, n := range names {
		if q, _ := e.queueByName(n); q != nil {
			q.mu.Lock()
			out = append(out, q.infoLocked())
			q.mu.Unlock()
		}
	}
	return out, next, nil
}

// GetQueue describes one queue.
func (e *Engine) GetQueue(name string) (QueueInfo, error) {
	q, err := e.queueByName(name)
	if err != nil {
		return QueueInfo{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return QueueInfo{}, errf(CodeQueueNotFound, "queue %q does not exist", name)
	}
	return q.infoLocked(), nil
}
