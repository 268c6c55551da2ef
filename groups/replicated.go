package groups

// Replicated __consumer_offsets (issue 13 part 3; Kafka's
// GroupMetadataManager loading and unloading its partitions). In a
// cluster placed with offsets-topic-replication-factor above 1, each
// partition of __consumer_offsets is a Raft group whose log is the
// partition log, and the coordinator of its groups is its current leader.
// Then:
//
//   - the log is the truth: appendLocked proposes the records' batch to
//     the partition's OffsetsLog and its persist waits until the batch is
//     committed on a majority and applied; no Pebble index row is written
//     (store.go's rows are the single-node and RF 1 restart path);
//   - a partition is served only once loaded (LoadPartition): the broker
//     that gains its leadership reads its log from the start and rebuilds
//     the partition's groups (offsets, classic GroupMetadata, KIP-848
//     records, tombstones: the latest value of each key wins, as a
//     compacted log's reader sees it); Serves answers
//     ErrCoordinatorLoadInProgress meanwhile;
//   - losing the leadership unloads the partition (UnloadPartition): its
//     groups are forgotten here, waiting JoinGroup/SyncGroup calls are
//     answered ErrNotCoordinator and members rejoin on the new
//     coordinator, as Kafka's onResignation does. An append whose
//     proposal fails (leadership lost, timeout) fails its request with
//     ErrNotCoordinator: it is never reported committed.
//
// Pending transactional offsets are records of the log too
// (txn_offsets_log.go). CommitTransaction (offsets staged in the
// transaction coordinator, written with its markers in the local
// partition's Pebble batch) is refused in this mode: TxnOffsetCommit
// never stages there when the offsets are replicated.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// OffsetsLog is a replicated partition of __consumer_offsets as its Raft
// leader on this broker serves it (cmd/broker implements it over
// cluster.Host).
type OffsetsLog interface {
	// Append proposes one record batch and returns the wait for its base
	// offset, known once the batch is committed on a majority and applied
	// here. An error means it is not known to be committed (leadership
	// lost, timeout); it wraps ErrNotCoordinator. Batches appended one
	// after the other reach the log in that order.
	Append(batch []byte) func() (int64, error)
	// ReadRange appends to dst the batches from the one holding offset
	// on, up to maxBytes (the first one whole).
	ReadRange(offset int64, maxBytes int, dst []byte) ([]byte, error)
	// HighWatermark is the applied end of the log.
	HighWatermark() int64
	// LogStart is the first offset still readable (DeleteRecords or
	// retention may have moved it; a load starts there).
	LogStart() int64
}

// ErrTxnOffsetsReplicated refuses CommitTransaction (offsets staged in
// the transaction coordinator, written to the local partition) when
// __consumer_offsets is replicated: TxnOffsetCommit keeps a transaction's
// offsets pending in the partition's log there instead, so only offsets
// staged before the replication factor was raised can reach it.
var ErrTxnOffsetsReplicated = errors.New("groups: offsets staged in the transaction coordinator cannot be written to a replicated __consumer_offsets (they were staged before offsets-topic-replication-factor was raised); abort the transaction and commit its offsets again")

// offsetsPartition is a replicated partition of __consumer_offsets this
// broker leads: loading until LoadPartition has read its log.
type offsetsPartition struct {
	log     OffsetsLog
	epoch   uint64
	loading bool
}

// UseReplicatedOffsets switches the coordinator to replicated
// __consumer_offsets partitions: from now on a group is served only once
// its partition is loaded here. Groups recovered from the local index at
// Open (an RF 1 leftover) are forgotten. Idempotent.
func (c *Coordinator) UseReplicatedOffsets() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated != nil {
		return
	}
	c.mu.replicated = map[int32]*offsetsPartition{}
	if len(c.mu.groups) > 0 {
		c.log.Warn().Int("groups", len(c.mu.groups)).Msg("__consumer_offsets is replicated: the groups of this broker's local partitions are not served")
	}
	c.mu.groups = map[string]*group{}
	c.mu.txnProducers = map[int64]map[string]bool{}
}

// ReplicatedOffsets reports whether __consumer_offsets is replicated.
func (c *Coordinator) ReplicatedOffsets() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.replicated != nil
}

// Serves reports whether this coordinator serves group now: nil, or
// ErrNotCoordinator (its partition is not led here) or
// ErrCoordinatorLoadInProgress (being loaded). Always nil unless the
// offsets are replicated.
func (c *Coordinator) Serves(group string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated == nil {
		return nil
	}
	part := c.mu.replicated[c.PartitionFor(group)]
	switch {
	case part == nil:
		return ErrNotCoordinator
	case part.loading:
		return ErrCoordinatorLoadInProgress
	}
	return nil
}

// PartitionLoaded reports whether this coordinator serves partition p
// of a replicated __consumer_offsets now, loaded at epoch (the Raft term
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
// term): its groups are answered ErrCoordinatorLoadInProgress until
// Load(p, epoch) completes. A previous epoch's state is unloaded first.
func (c *Coordinator) StartLoad(p int32, epoch uint64, log OffsetsLog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated == nil {
		return
	}
	c.unloadLocked(p)
	c.mu.replicated[p] = &offsetsPartition{log: log, epoch: epoch, loading: true}
}

// LoadResult is what Load read: the records of the partition's log and
// the groups they hold. Loaded is false when the partition was unloaded
// or gained again meanwhile (nothing was served).
type LoadResult struct {
	Records, Groups int
	Loaded          bool
}

// Load reads partition p's log from its log start and rebuilds its
// groups, then serves them, unless the partition was unloaded or gained
// again meanwhile. REQUIRES: StartLoad(p, epoch) and every entry committed
// before this leader's term applied (the caller waits for it).
func (c *Coordinator) Load(p int32, epoch uint64, now time.Time) (LoadResult, error) {
	c.mu.Lock()
	part := c.mu.replicated[p]
	c.mu.Unlock()
	if part == nil || part.epoch != epoch {
		return LoadResult{}, nil
	}
	recs, err := readOffsetsLog(part.log)
	if err != nil {
		return LoadResult{}, fmt.Errorf("groups: loading partition %d of %s: %w", p, OffsetsTopic, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated[p] != part {
		return LoadResult{}, nil
	}
	n, err := c.loadRecordsLocked(p, recs, now)
	if err != nil {
		return LoadResult{}, fmt.Errorf("groups: loading partition %d of %s: %w", p, OffsetsTopic, err)
	}
	part.loading = false
	return LoadResult{Records: len(recs), Groups: n, Loaded: true}, nil
}

// UnloadPartition forgets partition p's groups (this broker no longer
// leads it): waiting JoinGroup and SyncGroup calls are answered
// ErrNotCoordinator.
func (c *Coordinator) UnloadPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.replicated[p] != nil {
		c.log.Info().Int32("partition", p).Msg("offsets partition unloaded; its groups are coordinated elsewhere")
	}
	c.unloadLocked(p)
}

// unloadLocked drops partition p's state and groups. REQUIRES: c.mu held.
func (c *Coordinator) unloadLocked(p int32) {
	delete(c.mu.replicated, p)
	delete(c.mu.txnCoordEpochs, p)
	for name, g := range c.mu.groups {
		if g.partition != p {
			continue
		}
		for _, m := range g.members {
			g.completeJoin(m, JoinResult{Err: ErrNotCoordinator, Generation: -1})
			g.completeSync(m, SyncResult{Err: ErrNotCoordinator})
		}
		c.forgetTxnOffsetsLocked(g)
		delete(c.mu.groups, name)
	}
}

// appendReplicatedLocked is appendLocked on a replicated partition: the
// batch of recs and the records of ops (rowOp.rec) is proposed now (in
// c.mu's order, which is the log's) and the persist waits for its commit.
// The returned position orders the call's offset commits among this
// coordinator's (loaded offsets have -1). limit applies the offsets
// topic's max.message.bytes (not to a transaction's marker, which must
// not fail on size: it was decided already). REQUIRES: c.mu held.
func (c *Coordinator) appendReplicatedLocked(o *op, g *group, recs []topics.Record, ops []rowOp, limit bool) (*persist, int64, error) {
	part := c.mu.replicated[g.partition]
	if part == nil || part.loading {
		return nil, -1, fmt.Errorf("%w: this broker does not lead partition %d of %s now", ErrNotCoordinator, g.partition, OffsetsTopic)
	}
	recs = opRecords(recs, ops)
	raw, err := encodeRecords(recs, o.now)
	if err != nil {
		return nil, -1, err
	}
	if maxBytes, err := strconv.Atoi(c.offsetsTopic.Config("max.message.bytes")); limit && err == nil && len(raw) > maxBytes {
		return nil, -1, fmt.Errorf("%w: %d bytes, max.message.bytes of %s is %d", topics.ErrMessageTooLarge, len(raw), OffsetsTopic, maxBytes)
	}
	wait := part.log.Append(raw)
	g.rowWritten = true
	ps := &persist{waitFn: func() error { _, err := wait(); return err }}
	o.persists = append(o.persists, ps)
	c.metrics.recordsAppended.Add(float64(len(recs)))
	seq := c.mu.logSeq
	c.mu.logSeq += int64(len(recs))
	return ps, seq, nil
}

// logRecord is one record of __consumer_offsets: value nil is a
// tombstone.
type logRecord struct{ key, value []byte }

// readOffsetsLog reads every record of log up to its high watermark.
func readOffsetsLog(log OffsetsLog) ([]logRecord, error) {
	var out []logRecord
	end := log.HighWatermark()
	for next := log.LogStart(); next < end; {
		raw, err := log.ReadRange(next, 1<<20, nil)
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("no batch at offset %d below the high watermark %d", next, end)
		}
		for len(raw) > 0 {
			if len(raw) < 12 {
				return nil, fmt.Errorf("a truncated batch at offset %d", next)
			}
			size := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
			if size > len(raw) {
				return nil, fmt.Errorf("a truncated batch at offset %d", next)
			}
			h, recs, err := topics.DecodeRecords(raw[:size])
			if err != nil {
				return nil, fmt.Errorf("batch at offset %d: %w", next, err)
			}
			raw = raw[size:]
			next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			if h.IsControl() {
				continue
			}
			for _, r := range recs {
				out = append(out, logRecord{key: r.Key, value: r.Value})
			}
		}
	}
	return out, nil
}

// loadRecordsLocked rebuilds the groups of partition p from its records
// in log order: the latest value of each key wins, a tombstone removes
// it. It returns the number of groups. REQUIRES: c.mu held; p's groups
// are not in memory.
//
// Invariant (what makes compaction safe, DESIGN.md "Compaction of the
// coordinator partitions"): the result depends only on the latest record
// of each key and their order in the log, which is what a compaction of
// the log keeps (a tombstone removed after delete.retention.ms leaves its
// key absent, as the tombstone did). So the keys are applied in the order
// of their latest record, not of their first one, which compaction
// drops.
func (c *Coordinator) loadRecordsLocked(p int32, recs []logRecord, now time.Time) (int, error) {
	latest := map[string][]byte{}
	var order []string
	for i := len(recs) - 1; i >= 0; i-- {
		k := string(recs[i].key)
		if _, seen := latest[k]; !seen {
			order = append(order, k)
			latest[k] = recs[i].value
		}
	}
	slices.Reverse(order)
	byName := map[string]*group{}
	get := func(name string) *group {
		g := byName[name]
		if g == nil {
			g = newGroup(name, c.mu.nextGroupID, p)
			c.mu.nextGroupID++
			g.rowWritten = true
			byName[name] = g
		}
		return g
	}
	for _, k := range order {
		value := latest[k]
		if value == nil {
			continue
		}
		if err := c.loadRecordLocked(get, []byte(k), value); err != nil {
			return 0, err
		}
	}
	for name, g := range byName {
		for _, m := range g.members {
			m.heartbeatDeadline = now.Add(m.sessionTimeout)
		}
		if g.cg != nil {
			c.finishConsumerRecovery(g, now)
		}
		c.mu.groups[name] = g
		for pid, tp := range g.txnOffsets {
			c.setTxnPendingLocked(g, pid, tp)
		}
	}
	return len(byName), nil
}

// loadRecordLocked applies the latest value of one key to its group.
// Records of other kinds (share groups, future types) are skipped.
// REQUIRES: c.mu held.
func (c *Coordinator) loadRecordLocked(get func(string) *group, key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("a record key of %d bytes", len(key))
	}
	switch typ := int16(binary.BigEndian.Uint16(key)); typ {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("offset commit key: %w", err)
		}
		t, ok := c.tm.Topic(k.Topic)
		if !ok {
			return nil // a deleted topic's offsets: not served, as recoverLocked drops them
		}
		e := &offsetEntry{topicID: t.ID, logOffset: -1}
		if err := decodeOffsetCommitValue(value, e); err != nil {
			return fmt.Errorf("group %q offset of %s/%d: %w", k.Group, k.Topic, k.Partition, err)
		}
		get(k.Group).offsets[topicPartition{k.Topic, k.Partition}] = e
	case groupMetadataKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("group metadata key: %w", err)
		}
		g := get(k.Group)
		g.lastMetadata = append([]byte(nil), value...)
		if err := restoreGroupMetadata(g, g.lastMetadata); err != nil {
			return fmt.Errorf("group %q metadata: %w", k.Group, err)
		}
	case recTxnPendingOffset:
		return loadTxnPendingRecord(get, key, value)
	case recTxnCoordinatorEpoch:
		return c.loadTxnCoordEpochRecordLocked(key, value)
	case recConsumerGroupMetadata, recConsumerMemberMetadata, recConsumerTargetMetadata, recConsumerTargetMember, recConsumerCurrentAssignment:
		kr := kbin.Reader{Src: key[2:]}
		name := kr.String()
		if !kr.Ok() {
			return fmt.Errorf("consumer group record key %x is truncated", key)
		}
		g := get(name)
		if g.cg == nil {
			g.cg = newConsumerGroup()
		}
		if err := restoreConsumerRecord(g.cg, key, value); err != nil {
			return fmt.Errorf("consumer group %q: %w", name, err)
		}
	}
	return nil
}
