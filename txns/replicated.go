package txns

// Replicated __transaction_state (issue 13 part 3; Kafka's
// TransactionStateManager loading and unloading its partitions). In a
// cluster placed with transaction-state-log-replication-factor above 1,
// each partition of __transaction_state is a Raft group whose log is the
// partition log, and the coordinator of its transactional IDs is its
// current leader. Then:
//
//   - the log is the truth: every write of a transaction's row (the
//     value store.go puts in Pebble otherwise) is a record keyed by the
//     transactional ID, proposed to the partition's StateLog under c.mu
//     (so the log's order is the lock's) and waited for until committed
//     on a majority and applied; an expired ID is a tombstone. No
//     pebblestore.TxnKey row is written;
//   - every partition and group of a transaction is remote for its
//     completion: the markers all go through Config.Markers
//     (WriteTxnMarkers), and the Complete row is one more record;
//   - a partition is served only once loaded (Load): the broker that
//     gains its leadership reads its log from the start, keeps the latest
//     row of each transactional ID, resumes the delivery of every
//     transaction in a Prepare state, and leaves the open ones to Tick's
//     timeout (or to the next InitProducerId, which fences them); Serves
//     answers ErrCoordinatorLoadInProgress meanwhile;
//   - losing the leadership unloads the partition (UnloadPartition): its
//     transactional IDs are forgotten here and their deliveries stopped.
//     A write whose proposal fails (leadership lost, timeout) fails its
//     request with ErrNotCoordinator: it is never reported done (the
//     change stays in memory until the unload that follows, as the group
//     coordinator's does).
//
// Invariant: a transactional ID's row is in memory here only while this
// broker leads its partition, in the term it was loaded in.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Errors of a replicated __transaction_state.
var (
	// ErrNotCoordinator: this broker does not lead the transactional
	// ID's partition of __transaction_state (now), or a write did not
	// commit; the client finds the coordinator again.
	ErrNotCoordinator = errors.New("txns: this broker is not the transaction coordinator of this transactional id (now); find the coordinator again")
	// ErrCoordinatorLoadInProgress: the partition is being loaded here;
	// retry shortly.
	ErrCoordinatorLoadInProgress = errors.New("txns: the transaction coordinator is loading this transactional id's partition; retry shortly")
)

// StateLog is a replicated partition of __transaction_state as its Raft
// leader on this broker serves it (cmd/broker implements it over
// cluster.Host).
type StateLog interface {
	// Append proposes one record batch and returns the wait for its base
	// offset, known once the batch is committed on a majority and
	// applied here. An error means it is not known to be committed
	// (leadership lost, timeout); it wraps ErrNotCoordinator. Batches
	// appended one after the other reach the log in that order.
	Append(batch []byte) func() (int64, error)
	// ReadRange appends to dst the batches from the one holding offset
	// on, up to maxBytes (the first one whole).
	ReadRange(offset int64, maxBytes int, dst []byte) ([]byte, error)
	// HighWatermark is the applied end of the log.
	HighWatermark() int64
	// LogStart is the first offset still readable.
	LogStart() int64
}

// statePartition is a replicated partition of __transaction_state this
// broker leads: loading until Load has read its log. ctx ends the
// deliveries of its transactions (cancelled at unload).
type statePartition struct {
	log     StateLog
	epoch   uint64
	loading bool
	ctx     context.Context
	cancel  context.CancelFunc
}

// UseReplicatedLog switches the coordinator to replicated
// __transaction_state partitions: from now on a transactional ID is
// served only once its partition (partitionOf) is loaded here.
// Transactional IDs recovered from the local rows at Open (an RF 1
// leftover) are forgotten and their deliveries stopped. Without
// Config.Markers (every partition of a transaction is remote) the switch
// is made but no partition is ever loaded: every transactional ID is
// answered ErrNotCoordinator, and the error says why. Idempotent.
func (c *Coordinator) UseReplicatedLog(partitionOf func(id string) int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated != nil {
		return nil
	}
	var err error
	if c.cfg.Markers == nil {
		err = errors.New("txns: a replicated __transaction_state needs the marker sender (every partition of a transaction is remote): this broker coordinates no transactional id; give it a PLAINTEXT first listener like the other brokers")
	}
	c.mu.replicated = map[int32]*statePartition{}
	c.mu.partitionOf = partitionOf
	if len(c.mu.txns) > 0 {
		c.log.Warn().Int("transactional_ids", len(c.mu.txns)).Msg("__transaction_state is replicated: the transactional ids of this broker's local rows are not served")
	}
	c.mu.txns = map[string]*txn{}
	c.mu.byPID = map[int64]*txn{}
	return err
}

// Replicated reports whether __transaction_state is replicated.
func (c *Coordinator) Replicated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.replicated != nil
}

// Serves reports whether this coordinator serves transactional ID id
// now: nil, ErrNotCoordinator or ErrCoordinatorLoadInProgress. Always
// nil unless the state is replicated.
func (c *Coordinator) Serves(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servesLocked(id)
}

// REQUIRES: c.mu held.
func (c *Coordinator) servesLocked(id string) error {
	if c.mu.replicated == nil {
		return nil
	}
	part := c.mu.replicated[c.mu.partitionOf(id)]
	switch {
	case part == nil:
		return ErrNotCoordinator
	case part.loading:
		return ErrCoordinatorLoadInProgress
	}
	return nil
}

// PartitionLoaded reports whether this coordinator serves partition p
// of a replicated __transaction_state now, loaded at epoch (the Raft term
// the caller sees it led in): the leader proposes nothing that rewrites
// the partition's log (compaction, its log start) while a load of it may
// be reading it, nor on the word of a load of an earlier term.
func (c *Coordinator) PartitionLoaded(p int32, epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	part := c.mu.replicated[p]
	return part != nil && !part.loading && part.epoch == epoch
}

// StartLoad marks partition p as gained at epoch (the leader's Raft
// term): its transactional IDs are answered ErrCoordinatorLoadInProgress
// until Load(p, epoch) completes. A previous epoch's state is unloaded
// first.
func (c *Coordinator) StartLoad(p int32, epoch uint64, log StateLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated == nil || c.cfg.Markers == nil {
		return
	}
	c.unloadLocked(p)
	ctx, cancel := context.WithCancel(c.ctx)
	c.mu.replicated[p] = &statePartition{log: log, epoch: epoch, loading: true, ctx: ctx, cancel: cancel}
}

// LoadResult is what Load read. Loaded is false when the partition was
// unloaded or gained again meanwhile (nothing was served).
type LoadResult struct {
	Records, IDs, Resumed int
	Loaded                bool
}

// Load reads partition p's log from its log start, keeps the latest row
// of each transactional ID, serves them and resumes the delivery of the
// transactions in a Prepare state, unless the partition was unloaded or
// gained again meanwhile. REQUIRES: StartLoad(p, epoch) and every entry
// committed before this leader's term applied (the caller waits for it).
func (c *Coordinator) Load(p int32, epoch uint64) (LoadResult, error) {
	c.mu.Lock()
	part := c.mu.replicated[p]
	c.mu.Unlock()
	if part == nil || part.epoch != epoch {
		return LoadResult{}, nil
	}
	latest, n, err := readStateLog(part.log)
	if err != nil {
		return LoadResult{}, fmt.Errorf("txns: loading partition %d of __transaction_state: %w", p, err)
	}
	loaded := make([]*txn, 0, len(latest))
	for id, v := range latest {
		if v == nil {
			continue
		}
		t, err := decodeTxn(v)
		if err != nil {
			return LoadResult{}, fmt.Errorf("txns: loading partition %d of __transaction_state: %w: the row of %q: %v", p, pebblestore.ErrCorruption, id, err)
		}
		loaded = append(loaded, t)
	}
	c.mu.Lock()
	if c.mu.replicated[p] != part {
		c.mu.Unlock()
		return LoadResult{}, nil
	}
	var resume []*txn
	for _, t := range loaded {
		c.mu.txns[t.ID] = t
		c.mu.byPID[t.ProducerID] = t
		if t.State.completing() {
			resume = append(resume, t)
		}
	}
	part.loading = false
	c.mu.Unlock()
	for _, t := range resume {
		c.log.Info().Str("transactional_id", t.ID).Stringer("state", t.State).Int("remote_partitions", len(t.Remote)).Msg("resuming the delivery of a transaction's markers after gaining its coordinator")
		c.startDelivery(t)
	}
	return LoadResult{Records: n, IDs: len(loaded), Resumed: len(resume), Loaded: true}, nil
}

// UnloadPartition forgets partition p's transactional IDs (this broker no
// longer leads it) and stops their deliveries; the next leader resumes
// them.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated[p] != nil {
		c.log.Info().Int32("partition", p).Msg("transaction state partition unloaded; its transactional ids are coordinated elsewhere")
	}
	c.unloadLocked(p)
}

// REQUIRES: c.mu held.
func (c *Coordinator) unloadLocked(p int32) {
	if part := c.mu.replicated[p]; part != nil {
		part.cancel()
	}
	delete(c.mu.replicated, p)
	for id, t := range c.mu.txns {
		if c.mu.partitionOf(id) != p {
			continue
		}
		delete(c.mu.txns, id)
		if c.mu.byPID[t.ProducerID] == t {
			delete(c.mu.byPID, t.ProducerID)
		}
	}
}

// partitionLocked is the loaded partition of id, nil when it is not
// served here (or the state is not replicated).
//
// REQUIRES: c.mu held.
func (c *Coordinator) partitionLocked(id string) *statePartition {
	if c.mu.replicated == nil {
		return nil
	}
	part := c.mu.replicated[c.mu.partitionOf(id)]
	if part == nil || part.loading {
		return nil
	}
	return part
}

// appendLocked proposes id's row (value nil: a tombstone) to its
// partition's log and returns the write to wait on.
//
// REQUIRES: c.mu held; the state is replicated.
func (c *Coordinator) appendLocked(id string, value []byte) *write {
	part := c.partitionLocked(id)
	if part == nil {
		return &write{err: fmt.Errorf("%w: partition %d of __transaction_state is not led here now", ErrNotCoordinator, c.mu.partitionOf(id))}
	}
	ms := c.cfg.Clock().UnixMilli()
	h := topics.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: ms, MaxTimestamp: ms, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	raw, err := topics.EncodeBatch(h, []topics.Record{{Key: []byte(id), Value: value}})
	if err != nil {
		return &write{err: err}
	}
	return &write{wait: part.log.Append(raw)}
}

// readStateLog reads every record of log up to its high watermark and
// returns the latest value of each key (nil: a tombstone) and the number
// of records read.
func readStateLog(log StateLog) (map[string][]byte, int, error) {
	latest := map[string][]byte{}
	n := 0
	end := log.HighWatermark()
	for next := log.LogStart(); next < end; {
		raw, err := log.ReadRange(next, 1<<20, nil)
		if err != nil {
			return nil, 0, err
		}
		if len(raw) == 0 {
			return nil, 0, fmt.Errorf("no batch at offset %d below the high watermark %d", next, end)
		}
		for len(raw) > 0 {
			if len(raw) < 12 {
				return nil, 0, fmt.Errorf("a truncated batch at offset %d", next)
			}
			size := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
			if size > len(raw) {
				return nil, 0, fmt.Errorf("a truncated batch at offset %d", next)
			}
			h, recs, err := topics.DecodeRecords(raw[:size])
			if err != nil {
				return nil, 0, fmt.Errorf("batch at offset %d: %w", next, err)
			}
			raw = raw[size:]
			next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			if h.IsControl() {
				continue
			}
			for _, r := range recs {
				latest[string(r.Key)] = r.Value
				n++
			}
		}
	}
	return latest, n, nil
}

// deliveryContextLocked is the context that ends t's delivery: its partition's
// (unloaded; already done when it was unloaded meanwhile) when
// replicated, else the coordinator's (Close), and the
// coordinator epoch its markers carry (the partition's leader epoch).
//
// REQUIRES: c.mu held.
func (c *Coordinator) deliveryContextLocked(t *txn) (context.Context, int32) {
	if c.mu.replicated == nil {
		return c.ctx, 0
	}
	if part := c.partitionLocked(t.ID); part != nil {
		return part.ctx, int32(min(part.epoch, 1<<31-1))
	}
	// Unloaded meanwhile: the partition's next leader delivers it.
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	return ctx, 0
}
