package groups

// The second backing of a share-partition (issue 10 part 3): a native
// queue's topic. A share-partition of a plain topic is the window row of
// share_partition.go; one of a queue's topic is the queue's own delivery
// state, reached through ShareQueues (queues.Engine behind an adapter in
// cmd/broker, since groups does not import queues):
//
//	acquire        = a lease owned by the member (queue state row's owner)
//	ACCEPT         = ack
//	RELEASE        = requeue at once (no backoff), or the DLQ at max_receives
//	REJECT and GAP = the DLQ, reason rejected
//	RENEW          = extend by the lock duration
//	lock expiry    = lease expiry, by the queue's tick (expiry_backoff_ms,
//	                 max_expiries, max_receives apply)
//
// Every share group on a queue's topic consumes the queue's one delivery
// state (its built-in group): two share groups and the native receivers of
// one queue compete for its messages, none gets a copy (SQS semantics, the
// queue's meaning). What is acquirable is what a native receive would
// lease: ready messages (delay), highest priority first, within
// max_inflight. The delivery count is the queue's receive count and the
// limit is the queue's max_receives (share.delivery.count.limit does not
// apply): a message's fate does not depend on which side received it. The
// lock is the group's share.record.lock.duration.ms, as ShareFetch
// announces it. Leases are durable in the queue's write path (fsync before
// ShareFetch and ShareAcknowledge answer); the owner is in the state row, so
// after a restart the member still acknowledges what it holds and nobody
// else gets it before its lock expires.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vibemq/broker/topics"
)

// ShareQueues is the native queue engine as share groups use it. Errors:
// ErrInvalidRecordState (an offset not held by the owner), ErrUnknownTopicID
// (the queue is gone), ErrInvalidRequest, or a storage error.
type ShareQueues interface {
	// Acquire leases up to req.MaxRecords ready messages of queue to
	// req.Owner. The leases are applied when it returns; wait makes them
	// durable.
	Acquire(queue string, req QueueAcquire, now time.Time) (leases []QueueLease, wait func() error, err error)
	// Settle applies req.Acks all or nothing.
	Settle(queue string, req QueueSettle, now time.Time) (wait func() error, err error)
	// Release releases every message owner holds in queue.
	Release(queue, owner string, now time.Time) (wait func() error, err error)
	// Pending describes each partition of queue: the first offset still
	// in it, how many messages are (available or leased), and how many
	// are leased.
	Pending(queue string) ([]QueuePending, error)
}

// QueuePending is one partition of a queue as share-group views show it.
type QueuePending struct {
	Partition              int32
	Start, Pending, Leased int64
}

// QueueAcquire asks a queue for leases.
type QueueAcquire struct {
	Owner      string
	Partitions []int32
	MaxRecords int
	MaxBytes   int
	Lock       time.Duration
}

// QueueLease is one acquired message: its record's offset in the queue's
// topic and its delivery count.
type QueueLease struct {
	Partition     int32
	Offset        int64
	DeliveryCount int16
}

// QueueAck acknowledges one offset (AckAccept, AckRelease, AckReject,
// AckGap, AckRenew).
type QueueAck struct {
	Partition int32
	Offset    int64
	Type      int8
}

// QueueSettle is a member's acknowledgements of one partition.
type QueueSettle struct {
	Owner string
	Acks  []QueueAck
	// Lock is the new lock of a RENEW; Reason the dead-letter detail of a
	// REJECT or GAP.
	Lock   time.Duration
	Reason string
}

// shareQueueAckMax bounds the offsets one partition's acknowledgements may
// name on a queue (a queue's default max_inflight): the batches are
// expanded offset by offset.
const shareQueueAckMax = 100000

// shareOwner names a member as a queue lease's owner.
func shareOwner(group, member string) string { return group + "\x00" + member }

// shareQueueTopic reports whether t's share-partitions are the queue
// backing's.
func (c *Coordinator) shareQueueTopic(t *topics.Topic) bool {
	return c.cfg.ShareQueues != nil && t.Owner() == topics.OwnerQueue
}

// queueAcquire is what one ShareFetch acquires from queues: for member
// of g, up to left records (what the plain partitions left), maxBytes per
// queue, locked for lock.
type queueAcquire struct {
	g              *shareGroup
	member         string
	left, maxBytes int
	lock           time.Duration
	now            time.Time
}

// acquireQueuesLocked acquires from the queue partitions of out (those
// with a queue), one call per queue, up to qa.left records, in the order
// the queues first appear. It returns the wait for their durability.
// REQUIRES: share.mu held.
func (c *Coordinator) acquireQueuesLocked(qa *queueAcquire, out []ShareFetched) func() error {
	g, member, left := qa.g, qa.member, &qa.left
	var waits []func() error
	done := map[string]bool{}
	for i := range out {
		q := out[i].queue
		if q == "" || out[i].Err != nil || done[q] || *left <= 0 {
			continue
		}
		done[q] = true
		idx := map[int32]int{}
		var parts []int32
		for j := range out {
			if out[j].queue == q && out[j].Err == nil {
				idx[out[j].Partition] = j
				parts = append(parts, out[j].Partition)
			}
		}
		leases, wait, err := c.cfg.ShareQueues.Acquire(q, QueueAcquire{Owner: shareOwner(g.name, member), Partitions: parts,
			MaxRecords: *left, MaxBytes: qa.maxBytes, Lock: qa.lock}, qa.now)
		if err != nil {
			for _, j := range idx {
				out[j].Err = err
			}
			continue
		}
		waits = append(waits, wait)
		*left -= len(leases)
		// Clients read the records in offset order: the ranges of each
		// partition ascend (priority decided which messages were taken).
		slices.SortFunc(leases, func(a, b QueueLease) int {
			if a.Partition != b.Partition {
				return int(a.Partition - b.Partition)
			}
			return int(min(max(a.Offset-b.Offset, -1), 1))
		})
		for _, l := range leases {
			j, ok := idx[l.Partition]
			if !ok {
				continue // not asked for: never delivered, its lock expires
			}
			out[j].Acquired = appendAcquired(out[j].Acquired, l.Offset, l.DeliveryCount)
		}
	}
	return joinWaits(waits)
}

// appendAcquired adds offset off to runs, extending the last run when it
// continues it with the same delivery count.
func appendAcquired(runs []AcquiredRange, off int64, count int16) []AcquiredRange {
	if n := len(runs); n > 0 && runs[n-1].Last == off-1 && runs[n-1].DeliveryCount == count {
		runs[n-1].Last = off
		return runs
	}
	return append(runs, AcquiredRange{First: off, Last: off, DeliveryCount: count})
}

func joinWaits(waits []func() error) func() error {
	return func() error {
		var errs []error
		for _, w := range waits {
			if err := w(); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// queueAcks expands a partition's acknowledgement batches, checked as
// sharePartition.acknowledge checks them (errInvalidAck).
func queueAcks(part int32, batches []AckBatch) ([]QueueAck, error) {
	prev, n := int64(-1), int64(0)
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || len(b.Types) == 0 || (len(b.Types) != 1 && int64(len(b.Types)) != b.Last-b.First+1) {
			return nil, errInvalidAck
		}
		prev = b.Last
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew {
				return nil, errInvalidAck
			}
		}
		if n += b.Last - b.First + 1; n > shareQueueAckMax {
			return nil, fmt.Errorf("%w: the batches name more than %d offsets of one queue partition", errInvalidRecordState, shareQueueAckMax)
		}
	}
	acks := make([]QueueAck, 0, n)
	for _, b := range batches {
		for off := b.First; off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			acks = append(acks, QueueAck{Partition: part, Offset: off, Type: t})
		}
	}
	return acks, nil
}

// settleQueueLocked applies one partition's acknowledgements to a queue.
// It returns the wait for their durability. REQUIRES: share.mu held.
func (c *Coordinator) settleQueueLocked(queue string, req *ShareSessionRequest, a ShareAcks, lim shareLimits, now time.Time) (func() error, error) {
	group, member := req.Group, req.MemberID
	acks, err := queueAcks(a.Partition, a.Batches)
	switch {
	case errors.Is(err, errInvalidAck):
		return nil, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalidRecordState, err)
	}
	return c.cfg.ShareQueues.Settle(queue, QueueSettle{Owner: shareOwner(group, member), Acks: acks, Lock: lim.lock,
		Reason: fmt.Sprintf("rejected by member %s of Kafka share group %s", member, group)}, now)
}

// releaseQueuesLocked releases what member holds in the queues g fetched
// from since the broker started (after a restart, what a member held
// before comes back when its lock expires). REQUIRES: share.mu held.
func (c *Coordinator) releaseQueuesLocked(g *shareGroup, member string, now time.Time) []func() error {
	var waits []func() error
	for _, q := range g.queues {
		wait, err := c.cfg.ShareQueues.Release(q, shareOwner(g.name, member), now)
		if err != nil {
			if !errors.Is(err, ErrUnknownTopicID) {
				c.log.Warn().Err(err).Str("group", g.name).Str("queue", q).Msg("releasing a share member's queue leases failed; they come back when their lock expires")
			}
			continue
		}
		waits = append(waits, wait)
	}
	return waits
}

// describeShareQueues describes the partitions of the queues a group
// fetched from: the start offset is the first message still in the queue,
// the lag the messages available or leased (by anyone: the queue's one
// delivery state). A queue that is gone is left out.
func (c *Coordinator) describeShareQueues(queues map[[16]byte]string) []SharePartitionView {
	var out []SharePartitionView
	for id, q := range queues {
		ps, err := c.cfg.ShareQueues.Pending(q)
		if err != nil {
			if !errors.Is(err, ErrUnknownTopicID) {
				c.log.Warn().Err(err).Str("queue", q).Msg("describing a queue for a share group failed")
			}
			continue
		}
		for _, p := range ps {
			out = append(out, SharePartitionView{TopicID: id, Topic: q, Partition: p.Partition, StartOffset: p.Start,
				InFlight: int(p.Pending), Acquired: int(p.Leased), Available: p.Pending - p.Leased, Lag: p.Pending})
		}
	}
	return out
}
