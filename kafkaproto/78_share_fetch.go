package kafkaproto

// ShareFetch: v1-v2
//
// Behavior:
//   - KIP-932's fetch for share groups (groups/share_fetch.go): the share
//     session (epoch 0 opens, then each request carries the next epoch,
//     -1 closes; INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND),
//     the acknowledgements piggy-backed on the request applied first and
//     made durable (fsync) before the answer, then up to max_records
//     records acquired across the session's partitions, each for the
//     acquisition lock's duration (AcquisitionLockTimeoutMs).
//   - Records are the stored batches that hold the acquired offsets, byte
//     for byte; AcquiredRecords lists the offsets the member holds, in
//     runs of one delivery count (new records also cut at batch_size,
//     below). Clients deliver only those (Kafka's
//     ShareCompletedFetch does the same).
//   - With nothing to acquire the request waits up to max_wait_ms (at
//     most 30 s) for new records, released ones or expired locks.
//   - Every partition acknowledged in the request is in the answer with
//     its AcknowledgeErrorCode (INVALID_RECORD_STATE for a record the
//     member does not hold, INVALID_REQUEST for malformed batches).
//   - In a cluster (cluster.go) a partition another broker leads is
//     NOT_LEADER_OR_FOLLOWER (its acknowledgements not applied), as
//     Kafka's share-partition leader answers; a broker that does not
//     coordinate the group serves its partitions without knowing its
//     members (groups.ShareSessionRequest.MembersElsewhere).
//   - READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//     (TOPIC_AUTHORIZATION_FAILED per partition), as KafkaApis.
//   - Epoch 0 with acknowledgements: INVALID_REQUEST, as Kafka. On a native
//     queue's topic the records are leased from the queue (groups/
//     share_queue.go: competing with its HTTP receivers, its DLQ for
//     REJECT); an event store's topic: INVALID_REQUEST per partition.
//
// Version notes:
//   - v2 (KIP-1206, KIP-1222): share_acquire_mode: batch_optimized (0,
//     the default, and v1's behavior) takes max_records as a soft limit and
//     acquires a new batch once begun to its end, as Kafka 4.2 does (max
//     5 over batches of 4 acquires 8); record_limit (1) stops at
//     max_records exactly. Records released back to the window and a
//     native queue's messages are acquired one by one in both modes.
//     is_renew_ack (acknowledgements only, no records).
//   - v1+ batch_size: in batch_optimized mode the new records of a
//     partition are listed as AcquiredRecords ranges of whole stored
//     batches, a range closed before the batch that starts batch_size or
//     more offsets after its first, as Kafka 4.2's
//     SharePartition.createBatches (TestShareBatchSize against both
//     brokers); record_limit lists one range. Records back in the window
//     are listed as runs of one delivery count.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.ShareFetch, 1, 2, (*Server).handleShareFetch) }

// sharePollInterval is how often a waiting ShareFetch looks again for
// released records and expired locks (new records wake it at once).
const sharePollInterval = 100 * time.Millisecond

func (s *Server) handleShareFetch(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	if req.GroupID == nil || req.MemberID == nil || *req.GroupID == "" || *req.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{resp: resp}, nil
	}
	if !r.allowedGroup(auth.OpRead, *req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{resp: resp}, nil
	}
	sr := groups.ShareSessionRequest{Group: *req.GroupID, MemberID: *req.MemberID, Epoch: req.ShareSessionEpoch,
		MembersElsewhere: s.notGroupCoordinator(*req.GroupID)}
	n := 0
	var denied []groups.ShareFetched // refused partitions: not READ, not led here
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			id := groups.SharePartitionID{TopicID: t.TopicID, Partition: p.Partition}
			if err := s.shareRefused(r, t.TopicID, p.Partition); err != nil {
				denied = append(denied, groups.ShareFetched{SharePartitionID: id, Err: err})
				continue
			}
			sr.Added = append(sr.Added, id)
			if len(p.AcknowledgementBatches) > 0 {
				a := groups.ShareAcks{SharePartitionID: id}
				for _, b := range p.AcknowledgementBatches {
					a.Batches = append(a.Batches, groups.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
					n++
				}
				sr.Acks = append(sr.Acks, a)
			}
		}
	}
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			sr.Forgotten = append(sr.Forgotten, groups.SharePartitionID{TopicID: t.TopicID, Partition: p})
		}
	}
	if len(sr.Added)+len(sr.Forgotten)+n > s.cfg.MaxPartitionsPerRequest {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return reply{resp: resp}, nil
	}
	res, err := s.cfg.Groups.ShareSession(sr, s.now())
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return reply{resp: resp}, nil
	}
	if res.Opened != 0 {
		if r.c.shareSessions == nil {
			r.c.shareSessions = map[shareSessionRef]uint64{}
		}
		r.c.shareSessions[shareSessionRef{sr.Group, sr.MemberID}] = res.Opened
	}
	resp.AcquisitionLockTimeoutMillis = int32(s.cfg.Groups.ShareRecordLockDuration(sr.Group).Milliseconds())
	fetch := req.ShareSessionEpoch != -1 && !req.IsRenewAck && len(res.Partitions) > 0
	// The records read are charged to the request memory budget until
	// written, not shrunk to it (fetch_memory.go).
	charge := &fetchCharge{mem: s.memory}
	finish := func() {
		if werr := res.Wait(); werr != nil {
			for id := range res.AckErrors {
				res.AckErrors[id] = werr
			}
		}
		var fetched []groups.ShareFetched
		if fetch {
			fetched = s.shareAcquire(r.c, req, sr, res.Partitions)
		}
		fetched = append(fetched, denied...)
		s.fillShareFetch(resp, res.AckErrors, fetched, req.MaxBytes)
		charge.charge(shareRecordBytes(resp))
	}
	return reply{resp: resp, finish: finish, done: charge.release}, nil
}

// shareAcquire acquires records, waiting up to the request's max wait for
// some to become available.
func (s *Server) shareAcquire(c *conn, req *kmsg.ShareFetchRequest, sr groups.ShareSessionRequest, parts []groups.SharePartitionID) []groups.ShareFetched {
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > maxFetchResponseBytes {
		maxBytes = maxFetchResponseBytes
	}
	maxWait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	wake := make(chan struct{}, 1)
	var logs []*topics.Partition
	for _, p := range parts {
		if t, ok := s.topics.TopicByID(p.TopicID); ok {
			if lp, ok := t.Partition(p.Partition); ok {
				lp.AddWaiter(wake)
				logs = append(logs, lp)
			}
		}
	}
	defer func() {
		for _, lp := range logs {
			lp.RemoveWaiter(wake)
		}
	}()
	deadline := time.Now().Add(maxWait)
	for {
		fetched, wait := s.cfg.Groups.ShareAcquire(groups.ShareAcquireRequest{Group: sr.Group, MemberID: sr.MemberID, Partitions: parts,
			MaxRecords: maxRecords, MaxBytes: maxBytes, WholeBatches: req.ShareAcquireMode == 0, BatchSize: int(max(req.BatchSize, 0)),
			MembersElsewhere: sr.MembersElsewhere}, s.now())
		werr := wait()
		got := false
		for i := range fetched {
			if werr != nil && len(fetched[i].Acquired) > 0 {
				fetched[i].Acquired, fetched[i].Err = nil, werr
			}
			got = got || len(fetched[i].Acquired) > 0 || fetched[i].Err != nil
		}
		left := time.Until(deadline)
		if got || left <= 0 {
			return fetched
		}
		t := time.NewTimer(min(left, sharePollInterval))
		select {
		case <-wake:
		case <-t.C:
		case <-s.closing:
			left = 0
		case <-c.readDone:
			left = 0
		}
		t.Stop()
		if left <= 0 {
			return fetched
		}
	}
}

// fillShareFetch builds the answer's partitions: every acknowledged one,
// and every one with records or an error.
func (s *Server) fillShareFetch(resp *kmsg.ShareFetchResponse, ackErrs map[groups.SharePartitionID]error, fetched []groups.ShareFetched, maxBytes int32) {
	type at struct{ ti, pi int }
	index := map[groups.SharePartitionID]at{}
	topicIndex := map[[16]byte]int{}
	part := func(id groups.SharePartitionID) *kmsg.ShareFetchResponseTopicPartition {
		if a, ok := index[id]; ok {
			return &resp.Topics[a.ti].Partitions[a.pi]
		}
		ti, ok := topicIndex[id.TopicID]
		if !ok {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = id.TopicID
			resp.Topics = append(resp.Topics, t)
			ti = len(resp.Topics) - 1
			topicIndex[id.TopicID] = ti
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = id.Partition
		// Records is not nullable in ShareFetch (kafka-clients 4.2 fails
		// reading a null); kmsg writes a nil slice as null.
		p.Records = []byte{}
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
		index[id] = at{ti, len(resp.Topics[ti].Partitions) - 1}
		return &resp.Topics[ti].Partitions[len(resp.Topics[ti].Partitions)-1]
	}
	for id, err := range ackErrs {
		p := part(id)
		if err != nil {
			p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = errorCode(err), errorMessage(err)
		}
	}
	budget := int(maxBytes)
	if budget <= 0 || budget > maxFetchResponseBytes {
		budget = maxFetchResponseBytes
	}
	for _, f := range fetched {
		if f.Err == nil && len(f.Acquired) == 0 {
			continue
		}
		p := part(f.SharePartitionID)
		if f.Err != nil {
			p.ErrorCode, p.ErrorMessage = errorCode(f.Err), errorMessage(f.Err)
			continue
		}
		records, err := s.readAcquired(f.SharePartitionID, f.Acquired, budget)
		if err != nil {
			p.ErrorCode, p.ErrorMessage = errorCode(err), errorMessage(err)
		}
		budget -= len(records)
		if records != nil {
			p.Records = records
		}
		for _, a := range f.Acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.DeliveryCount
			p.AcquiredRecords = append(p.AcquiredRecords, ar)
		}
	}
}

// readAcquired returns the stored batches that hold the acquired offsets,
// each once, in offset order. The first batch is read whole even past
// budget, as a fetch does (KIP-74).
func (s *Server) readAcquired(id groups.SharePartitionID, ranges []groups.AcquiredRange, budget int) ([]byte, error) {
	t, ok := s.topics.TopicByID(id.TopicID)
	if !ok {
		return nil, topics.ErrUnknownTopic
	}
	lp, ok := t.Partition(id.Partition)
	if !ok {
		return nil, topics.ErrUnknownTopic
	}
	var out []byte
	covered := int64(-1) // last offset of the last batch appended
	for _, r := range ranges {
		off := max(r.First, covered+1)
		for off <= r.Last {
			// At most 1 MiB per read: the batches past the range are
			// read only to be dropped.
			data, _, err := lp.Read(off, min(max(budget-len(out), 0), 1<<20), len(out) == 0, nil)
			if err != nil || len(data) == 0 {
				return out, err
			}
			before := off
			for len(data) > 0 && off <= r.Last {
				h, err := topics.ParseBatchHeader(data)
				if err != nil {
					return out, err
				}
				size := int(h.BatchLength) + 12
				last := h.BaseOffset + int64(h.LastOffsetDelta)
				if last > covered {
					out = append(out, data[:size]...)
					covered = last
				}
				off = max(off, last+1)
				data = data[size:]
			}
			if off == before {
				return out, nil // nothing at or after off: the log was trimmed meanwhile
			}
		}
	}
	return out, nil
}

// shareSessionRef names a share session a connection opened.
type shareSessionRef struct{ group, member string }

// closeShareSessions closes the share sessions opened on the connection,
// releasing what their members hold (Kafka's share session cache does so
// on disconnect).
func (c *conn) closeShareSessions() {
	if c.s.cfg.Groups == nil {
		return
	}
	for ref, id := range c.shareSessions {
		c.s.cfg.Groups.CloseShareSession(ref.group, ref.member, id, c.s.now())
	}
}

// errTopicAuthorization answers a partition of a topic the principal may
// not READ (TOPIC_AUTHORIZATION_FAILED).
var errTopicAuthorization = errors.New("not authorized to read the topic")
