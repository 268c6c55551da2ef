// Package txns is the transaction coordinator (KIP-98): it maps
// transactional IDs to producer IDs and epochs, fences zombies, tracks the
// partitions and consumer groups of each open transaction, and ends a
// transaction by writing COMMIT or ABORT markers to every partition of it
// and, on commit, the consumer offsets staged by TxnOffsetCommit.
//
// State lives in the shared store, one row per transactional ID
// (pebblestore.TxnKey), so it survives restarts; in a cluster with a
// replicated __transaction_state, in the partition's Raft log instead
// (replicated.go), so it survives its coordinator.
//
// # Ending a transaction
//
// EndTxn (or an abort by InitProducerId or a timeout) moves the
// transaction to PrepareCommit or PrepareAbort in memory, so that other
// requests on it get CONCURRENT_TRANSACTIONS. How it completes depends on
// where its partitions are.
//
// Local (every partition written here: a single node, or in a cluster the
// RF 1 partitions this broker holds and groups it coordinates with RF 1
// offsets): one write completes it. The markers on every partition, on
// commit the staged offsets (records in __consumer_offsets with their
// index rows, through Config.CommitOffsets), and the row in
// CompleteCommit or CompleteAbort all go into one Pebble batch
// (topics.Manager.AppendAtomic), synced before EndTxn answers. Invariant:
// after any crash, a row in CompleteCommit/CompleteAbort means every
// marker and offset of the transaction is in the store, and a row in
// Ongoing means none is: the transaction is still open, a retried EndTxn
// ends it and otherwise its timeout aborts it. Because that write is
// atomic, the decision needs no durable record of its own; that saves one
// fsync per transaction. A row in a Prepare state without remote
// partitions (written by brokers before the two-phase path) is completed
// at Open by the same one write. After a crash a local transaction's
// output is never readable without the offsets of its input, nor the
// reverse.
//
// Remote (Config.Markers names some partition as not written here: an RF
// 1 partition on another broker, any partition of a replicated topic, the
// __consumer_offsets partition of a group coordinated elsewhere or with
// replicated offsets), Kafka's order (KIP-98, TransactionCoordinator): (1)
// the row in PrepareCommit/PrepareAbort, holding the remote partitions, is
// made durable and EndTxn answers; (2) a WriteTxnMarkers is sent to the
// leader of every remote partition (Config.Markers), again with backoff
// until each answered or failed for good; (3) one batch writes the
// markers of the local partitions, on commit the staged offsets, and the
// Complete row. Invariant: a row in a Prepare state means the decision is
// taken and its remote markers may be partly delivered, none of its local
// ones written; Open resumes delivery for every such row, so a remote
// partition may get its marker twice (the second ends nothing there,
// WriteTxnMarkers answers NONE). A row in a Complete state means every
// local marker and offset is in the store and every remote marker was
// answered.
//
// Like every domain package it takes the time as an argument; Tick(now),
// driven by retention, aborts transactions open past their timeout.
package txns

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Errors, each mapped to one Kafka error code by kafkaproto.
var (
	ErrInvalidTransactionTimeout = errors.New("txns: invalid transaction timeout")
	ErrConcurrentTransactions    = errors.New("txns: the transaction is completing")
	ErrProducerFenced            = errors.New("txns: producer fenced by a newer epoch")
	ErrInvalidProducerEpoch      = errors.New("txns: invalid producer epoch")
	ErrInvalidProducerIDMapping  = errors.New("txns: producer id does not match the transactional id")
	ErrInvalidTxnState           = errors.New("txns: invalid transaction state")
	ErrInvalidRequest            = errors.New("txns: invalid request")
	// ErrStorage: the store failed. Its failure is wrapped with %v, not
	// %w (an EndTxn's failure may carry groups sentinels that
	// kafkaproto's table would answer first), so pebblestore.Classify
	// knows it by this sentinel (errors.Is(err, pebblestore.ErrStorage))
	// and by its text.
	ErrStorage = pebblestore.StorageSentinel("txns: storage error")
)

// State is a transaction's state, as Kafka's TransactionState.
type State int8

// Transaction states.
const (
	StateEmpty State = iota
	StateOngoing
	StatePrepareCommit
	StatePrepareAbort
	StateCompleteCommit
	StateCompleteAbort
)

func (s State) String() string {
	switch s {
	case StateEmpty:
		return "Empty"
	case StateOngoing:
		return "Ongoing"
	case StatePrepareCommit:
		return "PrepareCommit"
	case StatePrepareAbort:
		return "PrepareAbort"
	case StateCompleteCommit:
		return "CompleteCommit"
	case StateCompleteAbort:
		return "CompleteAbort"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

func (s State) completing() bool { return s == StatePrepareCommit || s == StatePrepareAbort }

// Offset is one consumer offset staged by TxnOffsetCommit.
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// Config configures a Coordinator.
type Config struct {
	Logger zerolog.Logger
	// MaxTimeout bounds transaction.timeout.ms (Kafka
	// transaction.max.timeout.ms); default 15 minutes.
	MaxTimeout time.Duration
	// CommitOffsets writes the offsets a committing transaction staged, by
	// group, in the same write as the transaction's markers and outcome
	// row: it must pass markers, its own appends and extra to one
	// topics.Manager.AppendAtomic call, and return once that write is
	// durable (and the offsets visible), or with the error that stopped
	// it. It must not call back into the Coordinator. nil drops staged
	// offsets. (cmd/broker wires it to groups.Coordinator.CommitTransaction.)
	CommitOffsets func(offsets map[string][]Offset, markers []*topics.Append, extra func(b *pebblestore.Batch), now time.Time) error
	// IDExpiration is how long a transactional ID without an open
	// transaction is remembered after its last use (Kafka
	// transactional.id.expiration.ms); default 7 days.
	IDExpiration time.Duration
	// Markers ends the partitions of a transaction this broker does not
	// write itself (a cluster); nil: every partition is local (a single
	// node). cmd/broker implements it over the cluster's metadata.
	Markers MarkerSender
	// MarkerBackoff is the first wait before sending markers again
	// (doubling up to 32 times it); default 100 ms.
	MarkerBackoff time.Duration
	// Clock is the time of a completion that runs after EndTxn answered
	// (remote markers delivered); default time.Now.
	Clock func() time.Time
}

// MarkerSender decides which partitions of a transaction are remote and
// delivers their markers (WriteTxnMarkers v1, KIP-98). Its methods must not
// call back into the Coordinator.
type MarkerSender interface {
	// LocalPartition reports whether partition p of topic is written by
	// this broker's own batch: an RF 1 partition it holds, or a topic the
	// cluster's metadata does not have.
	LocalPartition(topic string, p int32) bool
	// GroupMarker is the __consumer_offsets partition whose leader must
	// get the marker for group, and true, unless the group is local
	// (C4's rule: this broker coordinates it and its offsets topic has
	// replication factor 1); false for a local group, whose staged
	// offsets are written in the completing batch.
	GroupMarker(group string) (TopicPartition, bool)
	// Send delivers m to the current leader of each of parts and returns
	// those to send again (a retriable failure: no leader, a network
	// error, NOT_LEADER_OR_FOLLOWER...). A final failure is logged by Send
	// and not returned. fenced reports that a partition refused m with
	// TRANSACTION_COORDINATOR_FENCED: a newer coordinator owns the
	// producer, and this one must stop delivering the transaction. It
	// returns early, with what is left, once ctx is done.
	Send(ctx context.Context, m RemoteMarker, parts []TopicPartition) (retry []TopicPartition, fenced bool)
}

// RemoteMarker is the marker of one transaction for its remote partitions.
type RemoteMarker struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// CoordinatorEpoch is the leader epoch (Raft term) of the
	// transactional ID's replicated __transaction_state partition when
	// the delivery started, 0 otherwise (one coordinator).
	CoordinatorEpoch int32
}

// maxBackoffFactor bounds the marker backoff: MarkerBackoff times this.
const maxBackoffFactor = 32

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	if c.MaxTimeout < 0 {
		return fmt.Errorf("txns: the maximum transaction timeout %v is negative; use a positive duration or 0 for the default of 15 minutes", c.MaxTimeout)
	}
	if c.IDExpiration < 0 {
		return fmt.Errorf("txns: the transactional ID expiration %v is negative; use a positive duration or 0 for the default of 7 days", c.IDExpiration)
	}
	return nil
}

// txn is one transactional ID's state; it is also the JSON of its row.
type txn struct {
	ID         string `json:"id"`
	ProducerID int64  `json:"producer_id"`
	Epoch      int16  `json:"epoch"`
	// LastEpoch is the epoch before a bump made by a timeout abort, which
	// no client was told about: its producer may still re-initialize with
	// it (KIP-360). -1 otherwise.
	LastEpoch  int16               `json:"last_epoch"`
	State      State               `json:"state"`
	TimeoutMs  int32               `json:"timeout_ms"`
	StartMs    int64               `json:"start_ms"`  // when it became Ongoing
	UpdateMs   int64               `json:"update_ms"` // last state change
	Partitions map[string][]int32  `json:"partitions,omitempty"`
	Groups     []string            `json:"groups,omitempty"`
	Offsets    map[string][]Offset `json:"offsets,omitempty"`
	// Remote are the partitions ended by markers sent to other brokers,
	// set with a Prepare state that completes in two phases.
	Remote []TopicPartition `json:"remote,omitempty"`
}

func (t *txn) hasPartition(topic string, partition int32) bool {
	for _, p := range t.Partitions[topic] {
		if p == partition {
			return true
		}
	}
	return false
}

// Coordinator is the transaction coordinator.
//
// mu guards every transaction. A state change is applied to the store
// under mu and synced after mu is released (pebblestore Apply, then Wait),
// so no mutex is held across a sync. The one exception is the outcome row
// of a transaction in a Prepare state: it is encoded under mu but written
// without it, in the atomic write that ends the transaction
// (completeLocal); meanwhile that write's goroutine (the request's, or the
// delivery goroutine of a transaction with remote partitions) is the
// row's only writer, as every other request on the transaction gets
// ErrConcurrentTransactions, and the row in memory changes only once the
// write is durable.
type Coordinator struct {
	cfg   Config
	log   zerolog.Logger
	store *pebblestore.Store
	tm    *topics.Manager

	// ctx ends the deliveries of remote markers (Close); wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		txns  map[string]*txn
		byPID map[int64]*txn
		// replicated: the partitions of a replicated __transaction_state
		// led here (replicated.go), nil otherwise; partitionOf maps a
		// transactional ID to its partition.
		replicated  map[int32]*statePartition
		partitionOf func(id string) int32
	}
}

// Open loads every transactional ID and completes the transactions that
// were completing at the last shutdown.
func Open(store *pebblestore.Store, tm *topics.Manager, cfg Config, now time.Time) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxTimeout == 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.IDExpiration == 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.MarkerBackoff <= 0 {
		cfg.MarkerBackoff = 100 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger.With().Str("component", "txns").Logger(), store: store, tm: tm}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.txns = make(map[string]*txn)
	c.mu.byPID = make(map[int64]*txn)
	if err := c.load(); err != nil {
		return nil, err
	}
	var completing []*txn
	for _, t := range c.mu.txns {
		if t.State.completing() {
			completing = append(completing, t)
		}
	}
	for _, t := range completing {
		if len(t.Remote) > 0 && cfg.Markers != nil {
			// Decided, its remote markers maybe partly delivered:
			// deliver them again (a second one ends nothing).
			c.log.Info().Str("transactional_id", t.ID).Stringer("state", t.State).Int("remote_partitions", len(t.Remote)).Msg("resuming the delivery of a transaction's markers")
			c.startDelivery(t)
			continue
		}
		// A single node now: every partition is local.
		t.Remote = nil
		if err := c.completeLocal(t, now); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close stops the deliveries of remote markers and waits for them; a
// transaction left in a Prepare state is resumed by the next Open.
func (c *Coordinator) Close() {
	c.cancel()
	c.wg.Wait()
}

// REQUIRES: c.mu held.
func (c *Coordinator) lookupLocked(id string, producerID int64, epoch int16) (*txn, error) {
	if err := c.servesLocked(id); err != nil {
		return nil, err
	}
	t := c.mu.txns[id]
	if t == nil || t.ProducerID != producerID {
		return nil, ErrInvalidProducerIDMapping
	}
	if epoch < t.Epoch {
		return nil, ErrProducerFenced
	}
	if epoch != t.Epoch {
		return nil, ErrInvalidProducerEpoch
	}
	if t.State.completing() {
		return nil, ErrConcurrentTransactions
	}
	return t, nil
}

// InitProducerID returns the producer ID and epoch of the transactional ID
// id, bumping the epoch (which fences any earlier producer with it). An
// ongoing transaction is aborted first. producerID and epoch are the
// caller's current ones (KIP-360, InitProducerId v3+) or -1.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, producerID int64, epoch int16, now time.Time) (int64, int16, error) {
	if id == "" {
		return -1, -1, ErrInvalidRequest
	}
	if timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds() {
		return -1, -1, fmt.Errorf("%w: %d ms is outside (0, %d]", ErrInvalidTransactionTimeout, timeoutMs, c.cfg.MaxTimeout.Milliseconds())
	}
	c.mu.Lock()
	if err := c.servesLocked(id); err != nil {
		c.mu.Unlock()
		return -1, -1, err
	}
	t := c.mu.txns[id]
	if t == nil {
		c.mu.Unlock()
		pid, err := c.tm.AllocateProducerID()
		if err != nil {
			return -1, -1, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		c.mu.Lock()
		if err := c.servesLocked(id); err != nil {
			c.mu.Unlock()
			return -1, -1, err
		}
		if t = c.mu.txns[id]; t == nil {
			t = &txn{ID: id, ProducerID: pid, LastEpoch: -1, TimeoutMs: timeoutMs, State: StateEmpty, UpdateMs: now.UnixMilli()}
			c.mu.txns[id] = t
			c.mu.byPID[pid] = t
			b := c.writeLocked(t)
			c.mu.Unlock()
			return pid, 0, c.wait(b)
		}
	}
	if t.State.completing() {
		c.mu.Unlock()
		return -1, -1, ErrConcurrentTransactions
	}
	if producerID >= 0 && (producerID != t.ProducerID || (epoch != t.Epoch && (t.LastEpoch < 0 || epoch != t.LastEpoch))) {
		c.mu.Unlock()
		return -1, -1, ErrProducerFenced
	}
	if t.State == StateOngoing {
		// Abort the open transaction with a bumped epoch: its producer is
		// fenced on the coordinator and, through the markers, on every
		// partition of the transaction.
		c.fenceEpochLocked(t)
		c.mu.Unlock()
		if err := c.endAborting(t, now); err != nil {
			return -1, -1, err
		}
		c.mu.Lock()
		if t.State.completing() {
			c.mu.Unlock()
			return -1, -1, ErrConcurrentTransactions
		}
	}
	c.bumpEpochLocked(t)
	t.LastEpoch = -1
	t.TimeoutMs = timeoutMs
	t.State = StateEmpty
	t.UpdateMs = now.UnixMilli()
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	pid, ep := t.ProducerID, t.Epoch
	b := c.writeLocked(t)
	c.mu.Unlock()
	return pid, ep, c.wait(b)
}

// bumpEpochLocked increments the epoch; when it would be exhausted the
// transactional ID moves to a fresh producer ID at epoch 0.
//
// REQUIRES: c.mu held.
func (c *Coordinator) bumpEpochLocked(t *txn) {
	if t.Epoch < math.MaxInt16-1 {
		t.Epoch++
		return
	}
	pid, err := c.tm.AllocateProducerID()
	if err != nil {
		// Stay on the exhausted epoch; the client will retry.
		c.log.Error().Err(err).Str("transactional_id", t.ID).Msg("cannot allocate a producer id for an exhausted epoch")
		return
	}
	delete(c.mu.byPID, t.ProducerID)
	t.ProducerID, t.Epoch = pid, 0
	c.mu.byPID[pid] = t
}

// fenceEpochLocked bumps the epoch for the abort of an open transaction.
// Unlike bumpEpochLocked it keeps the producer ID, using the last epoch
// (math.MaxInt16) if it must (Kafka prepareFenceProducerEpoch): the ABORT
// markers must carry the producer ID whose transaction the partitions hold
// open. The next InitProducerId then moves to a new producer ID.
//
// REQUIRES: c.mu held.
func (c *Coordinator) fenceEpochLocked(t *txn) {
	if t.Epoch < math.MaxInt16 {
		t.Epoch++
	}
}

// endAborting moves an Ongoing transaction to PrepareAbort (in memory) and
// completes it.
func (c *Coordinator) endAborting(t *txn, now time.Time) error {
	c.mu.Lock()
	if t.State != StateOngoing {
		c.mu.Unlock()
		return nil
	}
	t.State = StatePrepareAbort
	t.UpdateMs = now.UnixMilli()
	c.mu.Unlock()
	return c.complete(t, now)
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// AddPartitions adds partitions to the producer's transaction, starting it
// if none is open.
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, parts []TopicPartition, now time.Time) error {
	c.mu.Lock()
	t, err := c.lookupLocked(id, producerID, epoch)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	changed := t.State != StateOngoing
	c.beginLocked(t, now)
	for _, p := range parts {
		if !t.hasPartition(p.Topic, p.Partition) {
			if t.Partitions == nil {
				t.Partitions = make(map[string][]int32)
			}
			t.Partitions[p.Topic] = append(t.Partitions[p.Topic], p.Partition)
			changed = true
		}
	}
	var b *write
	if changed {
		b = c.writeLocked(t)
	}
	c.mu.Unlock()
	return c.wait(b)
}

// beginLocked starts a transaction if none is open.
//
// REQUIRES: c.mu held.
func (c *Coordinator) beginLocked(t *txn, now time.Time) {
	if t.State != StateOngoing {
		t.State = StateOngoing
		t.StartMs = now.UnixMilli()
		t.UpdateMs = now.UnixMilli()
		t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	}
}

// AddOffsets adds a consumer group to the producer's transaction.
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, group string, now time.Time) error {
	c.mu.Lock()
	t, err := c.lookupLocked(id, producerID, epoch)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.beginLocked(t, now)
	found := false
	for _, g := range t.Groups {
		found = found || g == group
	}
	if !found {
		t.Groups = append(t.Groups, group)
	}
	b := c.writeLocked(t)
	c.mu.Unlock()
	return c.wait(b)
}

// StageOffsets remembers offsets to commit for group when the producer's
// transaction commits (TxnOffsetCommit). The group must have been added
// with AddOffsets.
func (c *Coordinator) StageOffsets(id string, producerID int64, epoch int16, group string, offsets []Offset) error {
	c.mu.Lock()
	t, err := c.lookupLocked(id, producerID, epoch)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	found := false
	for _, g := range t.Groups {
		found = found || g == group
	}
	if t.State != StateOngoing || !found {
		c.mu.Unlock()
		return fmt.Errorf("%w: group %q is not part of the transaction", ErrInvalidTxnState, group)
	}
	if t.Offsets == nil {
		t.Offsets = make(map[string][]Offset)
	}
	staged := t.Offsets[group]
	for _, o := range offsets {
		replaced := false
		for i := range staged {
			if staged[i].Topic == o.Topic && staged[i].Partition == o.Partition {
				staged[i], replaced = o, true
			}
		}
		if !replaced {
			staged = append(staged, o)
		}
	}
	t.Offsets[group] = staged
	b := c.writeLocked(t)
	c.mu.Unlock()
	return c.wait(b)
}

// PendingOffset reports whether an open transaction has staged an offset
// for the group's partition (OffsetFetch require_stable).
func (c *Coordinator) PendingOffset(group, topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.mu.txns {
		if t.State != StateOngoing && !t.State.completing() {
			continue
		}
		for _, o := range t.Offsets[group] {
			if o.Topic == topic && o.Partition == partition {
				return true
			}
		}
	}
	return false
}

// EndTxn commits or aborts the producer's transaction. It returns once the
// markers on every partition of the transaction and, on commit, its staged
// offsets are durable (one write, see complete), or, when it has remote
// partitions, once its Prepare state is durable (the rest follows).
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit bool, now time.Time) error {
	c.mu.Lock()
	t := c.mu.txns[id]
	if t != nil && t.ProducerID == producerID && t.Epoch == epoch {
		// A retried EndTxn of a transaction that already ended the same
		// way succeeds (Kafka TransactionCoordinator.endTransaction).
		if (commit && t.State == StateCompleteCommit) || (!commit && t.State == StateCompleteAbort) {
			c.mu.Unlock()
			return nil
		}
	}
	t, err := c.lookupLocked(id, producerID, epoch)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if t.State != StateOngoing {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s, no transaction to end", ErrInvalidTxnState, t.State)
	}
	t.State = StatePrepareAbort
	if commit {
		t.State = StatePrepareCommit
	}
	t.UpdateMs = now.UnixMilli()
	c.mu.Unlock()
	return c.complete(t, now)
}

// complete ends a transaction in a Prepare state (in memory): in one
// local write when every partition is local (completeLocal), else in two
// phases (prepare, then deliver). See the package comment.
func (c *Coordinator) complete(t *txn, now time.Time) error {
	c.mu.Lock()
	remote := c.remoteLocked(t)
	c.mu.Unlock()
	if len(remote) == 0 {
		return c.completeLocal(t, now)
	}
	return c.prepare(t, remote, now)
}

// remoteLocked are t's partitions that Config.Markers does not write
// here, and the __consumer_offsets partitions of its remote groups;
// nil on a single node.
//
// REQUIRES: c.mu held.
func (c *Coordinator) remoteLocked(t *txn) []TopicPartition {
	if c.cfg.Markers == nil {
		return nil
	}
	var out []TopicPartition
	for _, name := range sortedTopics(t.Partitions) {
		for _, p := range t.Partitions[name] {
			if c.mu.replicated != nil || !c.cfg.Markers.LocalPartition(name, p) {
				out = append(out, TopicPartition{name, p})
			}
		}
	}
	for _, g := range t.Groups {
		if tp, remote := c.cfg.Markers.GroupMarker(g); remote && !slices.Contains(out, tp) {
			out = append(out, tp)
		}
	}
	return out
}

func sortedTopics(parts map[string][]int32) []string {
	names := make([]string, 0, len(parts))
	for name := range parts {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// prepare makes t's Prepare state durable with its remote partitions,
// then starts their delivery; it returns once the Prepare row is durable
// (EndTxn answers then). If that write fails the transaction stays in its
// Prepare state in memory (CONCURRENT_TRANSACTIONS) and the stored row
// says Ongoing: after a restart it is open again, as a failed local
// completion leaves it.
func (c *Coordinator) prepare(t *txn, remote []TopicPartition, now time.Time) error {
	c.mu.Lock()
	t.Remote = remote
	t.UpdateMs = now.UnixMilli()
	w := c.writeLocked(t)
	c.mu.Unlock()
	if err := c.wait(w); err != nil {
		if errors.Is(err, ErrNotCoordinator) {
			return fmt.Errorf("preparing to end transaction %q: %w", t.ID, err)
		}
		return fmt.Errorf("%w: preparing to end transaction %q: %v", ErrStorage, t.ID, err)
	}
	c.startDelivery(t)
	return nil
}

// startDelivery delivers t's remote markers, then completes it, on a
// goroutine of its own (stopped by Close).
func (c *Coordinator) startDelivery(t *txn) {
	c.mu.Lock()
	ctx, coordinatorEpoch := c.deliveryContextLocked(t)
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.deliver(ctx, t, coordinatorEpoch)
	}()
}

// deliver sends t's markers to its remote partitions until each is
// answered, then writes the local markers, offsets and Complete row,
// retrying with backoff; it gives up only when ctx is done (Close, or the
// unload of its replicated partition: the next coordinator resumes it).
func (c *Coordinator) deliver(ctx context.Context, t *txn, coordinatorEpoch int32) {
	c.mu.Lock()
	m := RemoteMarker{TransactionalID: t.ID, ProducerID: t.ProducerID, ProducerEpoch: t.Epoch, Commit: t.State == StatePrepareCommit, CoordinatorEpoch: coordinatorEpoch}
	pending := slices.Clone(t.Remote)
	c.mu.Unlock()
	backoff := c.cfg.MarkerBackoff
	for len(pending) > 0 {
		var fenced bool
		if pending, fenced = c.cfg.Markers.Send(ctx, m, pending); fenced {
			// As Kafka's TransactionMarkerRequestCompletionHandler on
			// TRANSACTION_COORDINATOR_FENCED: stop sending this
			// transaction's markers and do not complete it; the
			// coordinator of the newer epoch owns it (this one is
			// deposed, and its unload forgets the transaction).
			c.log.Info().Str("transactional_id", t.ID).Int32("coordinator_epoch", coordinatorEpoch).
				Msg("a partition fenced this coordinator's transaction markers (a newer coordinator owns the producer); the delivery stops")
			return
		}
		if len(pending) == 0 {
			break
		}
		if !c.sleep(ctx, &backoff) {
			return
		}
	}
	backoff = c.cfg.MarkerBackoff
	for {
		c.mu.Lock()
		forgotten := c.mu.txns[t.ID] != t
		c.mu.Unlock()
		if ctx.Err() != nil || forgotten {
			return
		}
		err := c.completeLocal(t, c.cfg.Clock())
		if err == nil {
			return
		}
		c.log.Error().Err(err).Str("transactional_id", t.ID).Msg("completing a transaction whose markers were delivered failed; retrying")
		if !c.sleep(ctx, &backoff) {
			return
		}
	}
}

// sleep waits *backoff, doubled for the next time up to its bound; false
// once ctx is done.
func (c *Coordinator) sleep(ctx context.Context, backoff *time.Duration) bool {
	timer := time.NewTimer(*backoff)
	defer timer.Stop()
	*backoff = min(*backoff*2, c.cfg.MarkerBackoff*maxBackoffFactor)
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// completeLocal ends a transaction in a Prepare state (in memory) with one
// atomic write: its markers on every partition but its remote ones
// (txn.Remote, already answered), on commit its staged offsets, and its
// row in the Complete state (see the package comment). Until that write is
// durable the transaction stays in its Prepare state in memory; if the
// write fails, nothing of it was applied and the stored row still says
// Ongoing (local) or Prepare (remote): after a restart the transaction is
// open again (ended by a retried EndTxn or by its timeout), or its
// delivery resumes.
func (c *Coordinator) completeLocal(t *txn, now time.Time) error {
	c.mu.Lock()
	commit := t.State == StatePrepareCommit
	pid, epoch := t.ProducerID, t.Epoch
	var markers []topics.Marker
	for _, name := range sortedTopics(t.Partitions) {
		tp, ok := c.tm.Topic(name)
		if !ok {
			continue // deleted since: nothing to mark
		}
		for _, i := range t.Partitions[name] {
			if len(t.Remote) > 0 && slices.Contains(t.Remote, TopicPartition{name, i}) {
				continue
			}
			if p, ok := tp.Partition(i); ok {
				markers = append(markers, topics.Marker{Partition: p, ProducerID: pid, ProducerEpoch: epoch, Commit: commit})
			}
		}
	}
	offsets := t.Offsets
	outcome := *t
	outcome.State = StateCompleteAbort
	if commit {
		outcome.State = StateCompleteCommit
	}
	outcome.UpdateMs = now.UnixMilli()
	outcome.Partitions, outcome.Groups, outcome.Offsets, outcome.Remote = nil, nil, nil, nil
	row := encodeTxn(&outcome)
	if c.mu.replicated != nil {
		// Every partition was remote (remoteLocked): the Complete row
		// is one more record of the log.
		w := c.appendLocked(t.ID, row)
		c.mu.Unlock()
		if len(markers) > 0 || len(offsets) > 0 {
			c.log.Warn().Str("transactional_id", t.ID).Msg("a transaction of a replicated __transaction_state had local partitions or staged offsets; they are not written here")
		}
		if err := c.wait(w); err != nil {
			return fmt.Errorf("ending transaction %q: %w", t.ID, err)
		}
		c.finishLocal(t, outcome)
		return nil
	}
	c.mu.Unlock()

	appends := topics.MarkerAppends(markers, now)
	extra := func(b *pebblestore.Batch) { b.Set(pebblestore.TxnKey(t.ID), row) }
	var err error
	if commit && len(offsets) > 0 && c.cfg.CommitOffsets != nil {
		err = c.cfg.CommitOffsets(offsets, appends, extra, now)
	} else {
		var pa *topics.PendingAppend
		if pa, err = c.tm.AppendAtomic(appends, extra, now); err == nil {
			err = pa.Wait()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: ending transaction %q: %v", ErrStorage, t.ID, err)
	}
	c.finishLocal(t, outcome)
	return nil
}

// finishLocal sets t in memory to its durable outcome.
func (c *Coordinator) finishLocal(t *txn, outcome txn) {
	c.mu.Lock()
	t.State, t.UpdateMs = outcome.State, outcome.UpdateMs
	t.Partitions, t.Groups, t.Offsets, t.Remote = nil, nil, nil, nil
	c.mu.Unlock()
}

// CheckProduce decides whether a transactional batch of (producerID,
// epoch) may be appended to topic/partition: the producer's transaction
// must be open and hold the partition.
func (c *Coordinator) CheckProduce(producerID int64, epoch int16, topic string, partition int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mu.byPID[producerID]
	if t == nil {
		return fmt.Errorf("%w: producer %d has no transactional id", ErrInvalidTxnState, producerID)
	}
	if epoch < t.Epoch {
		return ErrProducerFenced
	}
	if epoch != t.Epoch {
		return ErrInvalidProducerEpoch
	}
	if t.State != StateOngoing || !t.hasPartition(topic, partition) {
		return fmt.Errorf("%w: %s/%d is not part of an ongoing transaction of producer %d", ErrInvalidTxnState, topic, partition, producerID)
	}
	return nil
}

// Tick aborts the transactions open longer than their timeout, fencing
// their producers (Kafka abortTimedOutTransactions), and forgets the
// transactional IDs idle for longer than IDExpiration. It returns once the
// changes are durable.
func (c *Coordinator) Tick(now time.Time) {
	c.mu.Lock()
	var expired []*txn
	for _, t := range c.mu.txns {
		if t.State == StateOngoing && now.UnixMilli() > t.StartMs+int64(t.TimeoutMs) {
			last := t.Epoch
			c.fenceEpochLocked(t)
			t.LastEpoch = last
			expired = append(expired, t)
		}
	}
	// Forget transactional IDs unused for IDExpiration.
	var forget *write
	var tombstones []*write
	for id, t := range c.mu.txns {
		idle := t.State == StateEmpty || t.State == StateCompleteCommit || t.State == StateCompleteAbort
		if idle && now.UnixMilli()-t.UpdateMs > c.cfg.IDExpiration.Milliseconds() {
			if c.mu.replicated != nil {
				tombstones = append(tombstones, c.appendLocked(id, nil))
				delete(c.mu.txns, id)
				if c.mu.byPID[t.ProducerID] == t {
					delete(c.mu.byPID, t.ProducerID)
				}
				continue
			}
			if forget == nil {
				forget = &write{b: c.store.NewBatch()}
			}
			forget.b.Delete(pebblestore.TxnKey(id))
			delete(c.mu.txns, id)
			if c.mu.byPID[t.ProducerID] == t {
				delete(c.mu.byPID, t.ProducerID)
			}
		}
	}
	if forget != nil {
		if err := forget.b.Apply(); err != nil {
			forget.b.Close()
			forget.err = err
		}
	}
	c.mu.Unlock()
	if err := c.wait(forget); err != nil {
		c.log.Error().Err(err).Msg("forgetting expired transactional ids failed")
	}
	for _, w := range tombstones {
		if err := c.wait(w); err != nil {
			c.log.Error().Err(err).Msg("forgetting an expired transactional id failed")
		}
	}
	for _, t := range expired {
		c.log.Info().Str("transactional_id", t.ID).Msg("aborting a transaction open past its timeout")
		if err := c.endAborting(t, now); err != nil {
			c.log.Error().Err(err).Str("transactional_id", t.ID).Msg("aborting a timed-out transaction failed")
		}
	}
}

// Description is the state of one transactional ID (DescribeTransactions,
// ListTransactions).
type Description struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	State           State
	TimeoutMs       int32
	StartMs         int64 // -1 unless Ongoing or completing
	Partitions      []TopicPartition
	// Groups whose offsets the transaction commits (AddOffsetsToTxn).
	Groups []string
}

// Describe returns the state of the transactional ID, and whether it exists.
func (c *Coordinator) Describe(id string) (Description, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mu.txns[id]
	if t == nil {
		return Description{}, false
	}
	return describeLocked(t), true
}

// List returns every transactional ID, sorted.
func (c *Coordinator) List() []Description {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Description, 0, len(c.mu.txns))
	for _, t := range c.mu.txns {
		out = append(out, describeLocked(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

func describeLocked(t *txn) Description {
	d := Description{TransactionalID: t.ID, ProducerID: t.ProducerID, Epoch: t.Epoch, State: t.State, TimeoutMs: t.TimeoutMs, StartMs: -1}
	if t.State == StateOngoing || t.State.completing() {
		d.StartMs = t.StartMs
	}
	for name, parts := range t.Partitions {
		for _, p := range parts {
			d.Partitions = append(d.Partitions, TopicPartition{name, p})
		}
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		if d.Partitions[i].Topic != d.Partitions[j].Topic {
			return d.Partitions[i].Topic < d.Partitions[j].Topic
		}
		return d.Partitions[i].Partition < d.Partitions[j].Partition
	})
	d.Groups = slices.Clone(t.Groups)
	return d
}
