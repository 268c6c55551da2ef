package groups

// Share sessions, acknowledgements and acquisition: what ShareFetch (78)
// and ShareAcknowledge (79) do, KIP-932 "Share sessions" and "In-flight
// records".
//
// A member opens a session with epoch 0 (a session it had is replaced and
// its records released), then sends 1, 2, ...: each request must carry
// the epoch the previous one left (else INVALID_SHARE_SESSION_EPOCH;
// without a session, SHARE_SESSION_NOT_FOUND). Epoch -1 applies the
// request's acknowledgements and closes the session, releasing what the
// member still holds. Acknowledgements are refused on epoch 0
// (INVALID_REQUEST), as Kafka's ShareFetch does.

import (
	"errors"
	"fmt"
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// SharePartitionID names a partition by topic ID.
type SharePartitionID struct {
	TopicID   [16]byte
	Partition int32
}

// ShareAcks are the acknowledgement batches of one partition.
type ShareAcks struct {
	SharePartitionID
	Batches []AckBatch
}

// ShareSessionRequest is the session part of a ShareFetch or a
// ShareAcknowledge: the epoch, the partitions the request adds to (Added)
// or removes from (Forgotten) the session, and its acknowledgements.
type ShareSessionRequest struct {
	Group, MemberID string
	Epoch           int32
	Added           []SharePartitionID
	Forgotten       []SharePartitionID
	Acks            []ShareAcks
	// MembersElsewhere: another broker coordinates the group (a cluster)
	// and this one leads the partitions, so the member is not checked
	// against this broker's membership (Kafka's share-partition leader
	// does not either: KIP-932's ShareFetch goes to the partition
	// leaders, ShareGroupHeartbeat to the coordinator). The group is
	// created here on its first session; its share-partitions live here.
	MembersElsewhere bool
}

// ShareSessionResult is the outcome: one error (nil when applied) per
// acknowledged partition, the session's partitions (to fetch from), and
// wait, which makes the acknowledgements durable.
type ShareSessionResult struct {
	AckErrors  map[SharePartitionID]error
	Partitions []SharePartitionID
	Wait       func() error
	// Opened names the session an epoch-0 request opened (else 0), for
	// CloseShareSession when its connection closes.
	Opened uint64
}

// ShareSession checks the session epoch, updates the session, and applies
// the acknowledgements. Errors: ErrShareSessionNotFound,
// ErrInvalidShareSessionEpoch, ErrUnknownMemberID, ErrInvalidRequest.
// Per-partition acknowledgement errors: ErrInvalidRecordState,
// ErrInvalidRequest, ErrUnknownTopicID, or a storage error.
func (c *Coordinator) ShareSession(req ShareSessionRequest, now time.Time) (ShareSessionResult, error) {
	res := ShareSessionResult{Wait: func() error { return nil }}
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[req.Group]
	key := shareSessionKey{req.Group, req.MemberID}
	sess := s.sessions[key]
	var releaseW *shareWrite
	created := false // the group's row is to be written (MembersElsewhere)
	switch {
	case req.Epoch == 0:
		if len(req.Acks) > 0 {
			return res, fmt.Errorf("%w: a share session opens (epoch 0) without acknowledgements", ErrInvalidRequest)
		}
		if req.MembersElsewhere && g == nil {
			g, created = c.createShareGroupLocked(req.Group), true
		}
		if g == nil || (g.members[req.MemberID] == nil && !req.MembersElsewhere) {
			return res, fmt.Errorf("%w: member %s is not in share group %s; send ShareGroupHeartbeat first", ErrUnknownMemberID, req.MemberID, req.Group)
		}
		if sess != nil {
			releaseW = c.releaseShareMemberLocked(g, req.MemberID, now)
		}
		s.nextID++
		sess = &shareSession{id: s.nextID, parts: map[shareTP]bool{}}
		s.sessions[key] = sess
		res.Opened = sess.id
	case sess == nil:
		return res, fmt.Errorf("%w: member %s of share group %s has no share session; open one with epoch 0", ErrShareSessionNotFound, req.MemberID, req.Group)
	case req.Epoch != -1 && req.Epoch != sess.epoch:
		return res, fmt.Errorf("%w: the share session expects epoch %d, not %d", ErrInvalidShareSessionEpoch, sess.epoch, req.Epoch)
	}
	for _, p := range req.Added {
		sess.parts[shareTP(p)] = true
	}
	for _, p := range req.Forgotten {
		delete(sess.parts, shareTP(p))
	}
	res.AckErrors = map[SharePartitionID]error{}
	var queueWaits []func() error
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		if created {
			b.Set(shareGroupKey(req.Group), nil)
		}
		queueWaits = c.applyAcksLocked(b, g, req, res.AckErrors, now)
	})
	w = w.withQueues(queueWaits)
	if req.Epoch == -1 {
		delete(s.sessions, key)
		if g != nil {
			w2 := c.releaseShareMemberLocked(g, req.MemberID, now)
			res.Wait = func() error { return errors.Join(w.wait(), w2.wait()) }
			return res, nil
		}
	} else {
		sess.epoch = nextShareEpoch(req.Epoch)
		for tp := range sess.parts {
			res.Partitions = append(res.Partitions, SharePartitionID(tp))
		}
	}
	res.Wait = func() error { return errors.Join(releaseW.wait(), w.wait()) }
	if err := w.errOrNil(); err != nil {
		for id := range res.AckErrors {
			res.AckErrors[id] = err
		}
	}
	return res, nil
}

func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// applyAcksLocked applies each partition's acknowledgements and records
// its outcome; it returns the waits of the queue partitions' writes.
// REQUIRES: share.mu held.
func (c *Coordinator) applyAcksLocked(b *pebblestore.Batch, g *shareGroup, req ShareSessionRequest, errs map[SharePartitionID]error, now time.Time) []func() error {
	lim := c.shareLimitsLocked(req.Group)
	var waits []func() error
	for _, a := range req.Acks {
		tp := shareTP(a.SharePartitionID)
		if t, ok := c.tm.TopicByID(a.TopicID); ok && c.shareQueueTopic(t) {
			wait, err := c.settleQueueLocked(t.Name, &req, a, lim, now)
			if err == nil {
				waits = append(waits, wait)
			}
			errs[a.SharePartitionID] = err
			continue
		}
		var sp *sharePartition
		if g != nil {
			sp = g.parts[tp]
		}
		switch {
		case sp == nil:
			if _, ok := c.tm.TopicByID(a.TopicID); !ok {
				errs[a.SharePartitionID] = ErrUnknownTopicID
			} else {
				errs[a.SharePartitionID] = fmt.Errorf("%w: nothing of this partition was acquired by this group", ErrInvalidRecordState)
			}
		default:
			err := sp.acknowledge(req.MemberID, a.Batches, lim, now)
			switch {
			case errors.Is(err, errInvalidAck):
				err = fmt.Errorf("%w: %v", ErrInvalidRequest, err)
			case errors.Is(err, errInvalidRecordState):
				err = fmt.Errorf("%w: %v", ErrInvalidRecordState, err)
			case err == nil:
				b.Set(sharePartitionKey(tp, g.name), sp.encodeRow())
			}
			errs[a.SharePartitionID] = err
		}
	}
	return waits
}

// CloseShareSession closes the session id of member, if it is still
// open, and releases the records the member holds: its connection closed
// (Kafka releases them when the connection of a share session closes).
func (c *Coordinator) CloseShareSession(group, member string, id uint64, now time.Time) {
	s := &c.share
	s.mu.Lock()
	key := shareSessionKey{group, member}
	sess := s.sessions[key]
	g := s.groups[group]
	if sess == nil || sess.id != id || g == nil {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, key)
	w := c.releaseShareMemberLocked(g, member, now)
	s.mu.Unlock()
	if err := w.wait(); err != nil {
		c.log.Warn().Err(err).Str("group", group).Msg("releasing the records of a closed share session was not stored")
	}
}

// ShareFetched is what one partition gave a ShareFetch.
type ShareFetched struct {
	SharePartitionID
	Acquired []AcquiredRange
	Err      error
	queue    string // the queue whose topic this is (share_queue.go), else ""
}

// ShareAcquireRequest asks for records for a member of a share group.
type ShareAcquireRequest struct {
	Group, MemberID string
	Partitions      []SharePartitionID
	// MaxRecords bounds the records acquired over all partitions;
	// MaxBytes the new batches read per partition.
	MaxRecords, MaxBytes int
	// WholeBatches is ShareFetch's batch_optimized acquire mode
	// (KIP-1206, the default, and v1's only behavior): MaxRecords is a
	// soft limit, and a new batch once begun is acquired whole, as Kafka's
	// SharePartition does. Otherwise (record_limit) acquisition stops at
	// MaxRecords exactly. A native queue's messages are acquired one by
	// one either way.
	WholeBatches bool
	// BatchSize is ShareFetch's batch_size (v1+): in WholeBatches mode
	// the new records of a partition are listed as ranges of whole stored
	// batches of about BatchSize records (Kafka 4.2's
	// SharePartition.createBatches); 0 lists them as one range.
	BatchSize int
	// MembersElsewhere: as in ShareSessionRequest, the member is not
	// checked against this broker's membership (its session is).
	MembersElsewhere bool
}

// ShareAcquire acquires up to MaxRecords records for the member over the
// partitions, in order. wait makes the acquisitions durable (their
// delivery counts and locks).
func (c *Coordinator) ShareAcquire(req ShareAcquireRequest, now time.Time) ([]ShareFetched, func() error) {
	group, member, parts, maxRecords, maxBytes := req.Group, req.MemberID, req.Partitions, req.MaxRecords, req.MaxBytes
	out := make([]ShareFetched, len(parts))
	ends, committed := c.sharePrepare(group, parts, out, now)
	spans := make([][]BatchSpan, len(parts))
	for i, p := range parts {
		if out[i].Err == nil && ends[i] >= 0 {
			spans[i], out[i].Err = c.readSpans(shareTP(p), ends[i], maxBytes, committed)
		}
	}
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := c.shareLimitsLocked(group)
	lim.wholeBatches, lim.batchSize = req.WholeBatches, req.BatchSize
	g := s.groups[group]
	if g == nil || (g.members[member] == nil && !req.MembersElsewhere) || s.sessions[shareSessionKey{group, member}] == nil {
		return out, func() error { return nil }
	}
	left := maxRecords
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		for i, p := range parts {
			sp := g.parts[shareTP(p)]
			if out[i].Err != nil || out[i].queue != "" || sp == nil || left <= 0 {
				continue
			}
			got, changed := sp.acquire(member, left, spans[i], lim, now)
			for _, r := range got {
				left -= int(r.Last - r.First + 1)
			}
			out[i].Acquired = got
			if changed {
				b.Set(sharePartitionKey(shareTP(p), group), sp.encodeRow())
			}
		}
	})
	qa := &queueAcquire{g: g, member: member, left: left, maxBytes: maxBytes, lock: lim.lock, now: now}
	w = w.withQueues([]func() error{c.acquireQueuesLocked(qa, out)})
	return out, w.wait
}

// sharePrepare creates the share-partitions a group fetches for the first
// time (start offset by share.auto.offset.reset, shareInitialStartLocked),
// moves start offsets past records
// the log no longer holds, and returns each partition's end offset when
// new records are stored after it (-1 otherwise), and whether the group
// reads committed records only (share.isolation.level read_committed:
// then "stored" means below the last stable offset).
func (c *Coordinator) sharePrepare(group string, parts []SharePartitionID, out []ShareFetched, now time.Time) ([]int64, bool) {
	ends := make([]int64, len(parts))
	s := &c.share
	s.mu.Lock()
	defer s.mu.Unlock()
	committed := c.shareReadCommittedLocked(group)
	g := s.groups[group]
	for i, p := range parts {
		out[i].SharePartitionID = p
		ends[i] = -1
		t, lp, ok := c.sharePartitionLog(shareTP(p))
		if !ok || g == nil {
			out[i].Err = ErrUnknownTopicID
			continue
		}
		if c.shareQueueTopic(t) {
			out[i].queue = t.Name
			if g.queues == nil {
				g.queues = map[[16]byte]string{}
			}
			g.queues[t.ID] = t.Name
			continue
		}
		if t.Owner() != topics.OwnerNone {
			out[i].Err = fmt.Errorf("%w: topic %s is managed by the broker (%s); share groups read plain topics and native queues only", ErrInvalidRequest, t.Name, t.Owner())
			continue
		}
		sp := g.parts[shareTP(p)]
		if sp == nil {
			sp = &sharePartition{start: c.shareInitialStartLocked(group, lp, now)}
			g.parts[shareTP(p)] = sp
		}
		sp.startAt(lp.LogStartOffset())
		stored := lp.HighWatermark()
		if committed {
			stored = lp.LastStableOffset()
		}
		if sp.end() < stored && len(sp.window) < c.cfg.ShareMaxRecordLocks {
			ends[i] = sp.end()
		}
	}
	return ends, committed
}

// shareSpanReadBytes bounds one read of batch boundaries.
const shareSpanReadBytes = 1 << 20

// readSpans reads the batch boundaries stored from offset on, up to about
// maxBytes. committed (share.isolation.level read_committed, KIP-932)
// reads below the last stable offset only and marks the batches of
// aborted transactions like control batches: archived, never delivered,
// as Kafka's share fetch does with the aborted transactions of its read.
func (c *Coordinator) readSpans(tp shareTP, offset int64, maxBytes int, committed bool) ([]BatchSpan, error) {
	_, lp, ok := c.sharePartitionLog(tp)
	if !ok {
		return nil, ErrUnknownTopicID
	}
	// Spans are only headers: read about what one acquisition can use,
	// not the request's whole budget (at least one batch).
	read := lp.Read
	if committed {
		read = lp.ReadCommitted
	}
	data, res, err := read(offset, min(maxBytes, shareSpanReadBytes), true, nil)
	if err != nil {
		if errors.Is(err, topics.ErrOffsetOutOfRange) {
			return nil, nil
		}
		return nil, err
	}
	var spans []BatchSpan
	for len(data) > 0 {
		h, err := topics.ParseBatchHeader(data)
		if err != nil {
			return spans, nil
		}
		aborted := committed && h.IsTransactional() && inAbortedTxn(res.Aborted, h.ProducerID, h.BaseOffset)
		spans = append(spans, BatchSpan{Base: h.BaseOffset, Last: h.BaseOffset + int64(h.LastOffsetDelta), Control: h.IsControl() || aborted})
		data = data[int(h.BatchLength)+12:]
	}
	return spans, nil
}

// shareInitialStartLocked is the start offset of a share-partition that
// group fetches for the first time, by its share.auto.offset.reset: the
// high watermark for latest, the log start for earliest, and for
// by_duration:D the first offset whose timestamp is at least now - D (the
// high watermark when no record is that recent), as Kafka's
// SharePartition initializes it (KIP-932, "by_duration" of KIP-1106).
// REQUIRES: share.mu held.
func (c *Coordinator) shareInitialStartLocked(group string, lp *topics.Partition, now time.Time) int64 {
	reset := c.shareResetLocked(group)
	if reset == "earliest" {
		return lp.LogStartOffset()
	}
	if d, ok, _ := parseShareByDuration(reset); ok {
		if off, _, err := lp.OffsetForTimestamp(now.Add(-d).UnixMilli()); err == nil && off >= 0 {
			return max(off, lp.LogStartOffset())
		}
	}
	return lp.HighWatermark()
}

// inAbortedTxn says whether a transactional batch of producer at base
// belongs to one of the aborted transactions: the producer's, begun at or
// before base and ended by its marker after it.
func inAbortedTxn(aborted []topics.AbortedTxn, producer, base int64) bool {
	for _, a := range aborted {
		if a.ProducerID == producer && a.FirstOffset <= base && base < a.LastOffset {
			return true
		}
	}
	return false
}
