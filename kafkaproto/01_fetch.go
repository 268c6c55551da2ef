package kafkaproto

// Fetch: v0-v16
//
// Behavior:
//   - Batches are returned as stored, byte for byte, never re-encoded. Only
//     durable offsets (below the high watermark) are returned.
//   - Limits: the response holds at most max_bytes (capped by the broker at
//     maxFetchResponseBytes) and each partition at most its
//     partition_max_bytes, except that the first batch of the first
//     partition with data is returned whole even when larger (KIP-74).
//   - A fetch inside a gap (compaction) returns the next batch.
//   - min_bytes / max_wait_ms: when fewer than min_bytes are available the
//     request waits on the partitions' high watermarks, up to max_wait_ms,
//     and answers as soon as enough arrives or an error appears.
//   - Incremental fetch sessions (KIP-227): see fetch_sessions.go. A session
//     holds at most max-partitions-per-request partitions; an incremental
//     request that would grow it past that evicts it and is answered
//     FETCH_SESSION_ID_NOT_FOUND (the client starts a new session).
//   - current_leader_epoch (v9+, KIP-320): the only epoch is 0; a larger one
//     gets UNKNOWN_LEADER_EPOCH, a smaller non-negative one FENCED_LEADER_EPOCH.
//   - read_committed (isolation level 1, KIP-98): batches stop at the last
//     stable offset (the first offset of the oldest open transaction), and
//     the aborted transactions overlapping the returned batches are listed
//     so that the client drops their records. read_uncommitted reads to the
//     high watermark and lists none.
//
// Version notes:
//   - v13 names topics by ID (KIP-516): unknown IDs get UNKNOWN_TOPIC_ID.
//   - v12 adds tagged fields; diverging epochs are never reported.
//   - v4 is the first with record batches. v0-v3 answer a message set
//     converted down from the stored batches (topics.DownconvertBatches:
//     magic 0 for v0-v1, magic 1 for v2-v3; no headers, no control
//     batches, records below the fetch offset left out), as Kafka did until
//     4.0 removed these versions (KIP-896). They have no isolation level:
//     they read uncommitted. The conversion's output, not the stored bytes,
//     counts against max_bytes.
//   - Memory (fetch_memory.go): a response is charged to the broker-wide
//     request memory budget (queued-max-request-bytes) from its read until
//     it is written or dropped. A max_bytes above what is free is shrunk to
//     it (KIP-74: a response may be smaller than asked, and still carries
//     its first batch whole, charged past the budget); a fetch never waits
//     for memory.
//   - consumer_byte_rate (KIP-13, quotas.go): a fetch asks for at most what
//     the quota allows in its window; over the quota it returns no records,
//     with throttle_time_ms (v1+), and mutes the connection (KIP-219;
//     before v8 the answer is also held back for the throttle time).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.Fetch, 0, 16, (*Server).handleFetch) }

// maxFetchResponseBytes caps one fetch response whatever the client asks.
const maxFetchResponseBytes = 64 << 20

// maxFetchWait caps max_wait_ms.
const maxFetchWait = 30 * time.Second

type fetchItem struct {
	key         sessionKey
	p           *topics.Partition
	rl          ReplicatedLog // a replicated partition's log (replicated.go), p nil
	offset      int64
	maxBytes    int32
	leaderEpoch int32
	errCode     int16
	sp          *sessionPartition // set when the fetch uses a session

	// Results of the last read.
	records []byte
	res     topics.ReadResult
	readErr int16
}

func (s *Server) handleFetch(r *request) (reply, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)

	items, sess, incremental, errCode := s.planFetch(r, req)
	if errCode != 0 {
		resp.ErrorCode = errCode
		return reply{resp: resp}, nil
	}
	if sess != nil {
		resp.SessionID = sess.id
	}
	plan := fetchPlan{items: items, sess: sess, incremental: incremental, charge: &fetchCharge{mem: s.memory}}
	if s.cfg.Quotas.Enabled(auth.QuotaKindFetch) {
		plan.quota = r.c.quotaSensor(auth.QuotaKindFetch, r.clientID)
		if mv := plan.quota.MaxValueInWindow(); plan.quota != nil && req.Version >= 3 && mv < float64(req.MaxBytes) {
			// Never more than the quota allows in its window
			// (KafkaApis: getMaxValueInQuotaWindow); KIP-74 still
			// returns a first batch whole.
			req.MaxBytes = int32(max(mv, 1))
		}
	}
	finish := func() { s.runFetch(r.c, req, resp, plan) }
	release := func() {
		for _, it := range items {
			putBuffer(it.records)
			it.records = nil
		}
	}
	size := func() int {
		n := 256
		for _, it := range items {
			n += len(it.records) + 64 + len(it.key.topic)
		}
		return n
	}
	return reply{resp: resp, finish: finish, release: release, size: size, done: plan.charge.release}, nil
}

// planFetch resolves the session and lists the partitions to read.
func (s *Server) planFetch(r *request, req *kmsg.FetchRequest) (items []*fetchItem, sess *fetchSession, incremental bool, errCode int16) {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > s.cfg.MaxPartitionsPerRequest {
		return nil, nil, false, kerr.PolicyViolation.Code
	}
	now := s.now()
	switch {
	case req.Version < 7:
	case req.SessionID == 0 && req.SessionEpoch == sessionEpochFinal:
	case req.SessionEpoch == sessionEpochFinal:
		s.sessions.remove(req.SessionID)
	case req.SessionEpoch == sessionEpochInitial:
		if req.SessionID != 0 {
			s.sessions.remove(req.SessionID)
		}
		sess = s.sessions.create(now)
	case req.SessionID == 0:
		return nil, nil, false, kerr.InvalidFetchSessionEpoch.Code
	default:
		sess = s.sessions.get(req.SessionID)
		if sess == nil {
			return nil, nil, false, kerr.FetchSessionIDNotFound.Code
		}
		incremental = true
	}

	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if incremental {
			if req.SessionEpoch != sess.nextEpoch {
				return nil, nil, false, kerr.InvalidFetchSessionEpoch.Code
			}
			sess.bumpEpoch()
		}
		sess.lastUsed = now
		for _, ft := range req.ForgottenTopics {
			for _, p := range ft.Partitions {
				sess.forget(s.fetchKey(req.Version, ft.Topic, ft.TopicID, p))
			}
		}
		// Incremental requests add partitions to the session; without a
		// bound a client could grow one session forever, 100000 partitions
		// (of any names) per request. A session may hold what one full
		// request may name; past that it is evicted and the client starts
		// a new one with a full request.
		added := 0
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if _, ok := sess.index[s.fetchKey(req.Version, rt.Topic, rt.TopicID, rp.Partition)]; !ok {
					added++
				}
			}
		}
		if len(sess.parts)+added > s.cfg.MaxPartitionsPerRequest {
			s.sessions.remove(sess.id)
			return nil, nil, false, kerr.FetchSessionIDNotFound.Code
		}
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := s.fetchKey(req.Version, rt.Topic, rt.TopicID, rp.Partition)
			if sess != nil {
				sess.upsert(k, rp.FetchOffset, rp.PartitionMaxBytes)
				continue
			}
			items = append(items, &fetchItem{key: k, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch})
		}
	}
	if sess != nil {
		epochs := make(map[sessionKey]int32)
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				epochs[s.fetchKey(req.Version, rt.Topic, rt.TopicID, rp.Partition)] = rp.CurrentLeaderEpoch
			}
		}
		for _, sp := range sess.parts {
			le, ok := epochs[sp.key]
			if !ok {
				le = -1
			}
			items = append(items, &fetchItem{key: sp.key, offset: sp.fetchOffset, maxBytes: sp.maxBytes, leaderEpoch: le, sp: sp})
		}
	}
	for _, it := range items {
		s.resolveFetchItem(r, req.Version, it)
	}
	return items, sess, incremental, 0
}

// fetchKey names a partition by topic ID from v13, by name before.
func (s *Server) fetchKey(version int16, topic string, id [16]byte, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{topicID: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// resolveFetchItem finds the partition, after the READ check on its topic
// (Kafka: by ID, an unknown ID answers UNKNOWN_TOPIC_ID before any check;
// by name, an unauthorized topic is TOPIC_AUTHORIZATION_FAILED whether or
// not it exists).
func (s *Server) resolveFetchItem(r *request, version int16, it *fetchItem) {
	var t *topics.Topic
	var ok bool
	if version >= 13 {
		t, ok = s.topics.TopicByID(it.key.topicID)
		if !ok {
			it.errCode = kerr.UnknownTopicID.Code
			return
		}
		if !r.allowedTopic(auth.OpRead, t.Name) {
			it.errCode = kerr.TopicAuthorizationFailed.Code
			return
		}
	} else {
		if !r.allowedTopic(auth.OpRead, it.key.topic) {
			it.errCode = kerr.TopicAuthorizationFailed.Code
			return
		}
		t, ok = s.topics.Topic(it.key.topic)
		if !ok {
			it.errCode = kerr.UnknownTopicOrPartition.Code
			return
		}
	}
	p, ok := t.Partition(it.key.partition)
	if !ok {
		it.errCode = kerr.UnknownTopicOrPartition.Code
		return
	}
	if rl := s.replicatedLog(t.Name, it.key.partition); rl != nil {
		resolveReplicated(it, rl)
		return
	}
	if s.cfg.Cluster != nil && !s.leads(t.Name, it.key.partition) {
		it.errCode = kerr.NotLeaderForPartition.Code
		return
	}
	switch {
	case it.leaderEpoch > 0:
		it.errCode = kerr.UnknownLeaderEpoch.Code
		return
	case it.leaderEpoch < -1:
		it.errCode = kerr.FencedLeaderEpoch.Code
		return
	}
	it.p = p
}

// runFetch reads, waits for min_bytes if needed, and fills resp.
// fetchPlan is what planFetch resolved: the partitions to read, the fetch
// session (nil without one) and whether the request is incremental.
type fetchPlan struct {
	items       []*fetchItem
	sess        *fetchSession
	incremental bool
	// quota is the client's consumer_byte_rate sensor, nil without one.
	quota *auth.QuotaSensor
	// charge is the response's share of the request memory budget.
	charge *fetchCharge
}

func (s *Server) runFetch(c *conn, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, plan fetchPlan) {
	items, sess, incremental := plan.items, plan.sess, plan.incremental
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if maxWait > maxFetchWait {
		maxWait = maxFetchWait
	}
	minBytes := int(req.MinBytes)
	var wake chan struct{}
	// A fetch that names no partition (and has none in its session) has
	// nothing to wait for: Kafka answers it at once.
	if maxWait > 0 && minBytes > 0 && len(items) > 0 {
		wake = make(chan struct{}, 1)
		for _, it := range items {
			if it.p != nil {
				it.p.AddWaiter(wake)
			} else if it.rl != nil {
				it.rl.AddWaiter(wake)
			}
		}
		defer func() {
			for _, it := range items {
				if it.p != nil {
					it.p.RemoveWaiter(wake)
				} else if it.rl != nil {
					it.rl.RemoveWaiter(wake)
				}
			}
		}()
	}
	deadline := time.Now().Add(maxWait)
	var timer *time.Timer
	for {
		bytes, anyErr := s.readFetchCharged(req, items, plan.charge)
		if wake == nil || bytes >= minBytes || anyErr {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		if timer == nil {
			timer = time.NewTimer(left)
			defer timer.Stop()
		}
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-s.closing:
		case <-c.readDone:
			// Nobody will read the answer; free the connection now.
		}
		// The wait is over: one last read, then answer.
		s.readFetchCharged(req, items, plan.charge)
		break
	}
	if plan.quota != nil {
		s.fetchQuota(c, req, resp, plan)
		plan.charge.settle(heldRecordBytes(items)) // a throttled answer drops its records
	}

	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
	}
	byTopic := map[sessionKey]int{}
	for _, it := range items {
		if incremental && !it.changed() {
			continue
		}
		if it.sp != nil {
			it.sp.highWatermark = it.res.HighWatermark
			it.sp.lastStable = it.res.LastStableOffset
			it.sp.logStart = it.res.LogStartOffset
		}
		tk := sessionKey{topicID: it.key.topicID, topic: it.key.topic}
		ti, ok := byTopic[tk]
		if !ok {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = it.key.topic
			rt.TopicID = it.key.topicID
			resp.Topics = append(resp.Topics, rt)
			ti = len(resp.Topics) - 1
			byTopic[tk] = ti
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = it.key.partition
		rp.PreferredReadReplica = -1
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.RecordBatches = []byte{}
		if it.errCode != 0 {
			rp.ErrorCode = it.errCode
		} else {
			rp.ErrorCode = it.readErr
			rp.HighWatermark = it.res.HighWatermark
			rp.LastStableOffset = it.res.LastStableOffset
			rp.LogStartOffset = it.res.LogStartOffset
			if req.IsolationLevel == 1 {
				rp.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, 0, len(it.res.Aborted))
				for _, a := range it.res.Aborted {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
					rp.AbortedTransactions = append(rp.AbortedTransactions, at)
				}
			}
			// Never null: librdkafka rejects a null record set (size -1).
			rp.RecordBatches = it.records
			if rp.RecordBatches == nil {
				rp.RecordBatches = []byte{}
			}
			s.metrics.fetchedBytes.Add(float64(len(it.records)))
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
	}
}

// changed reports whether an incremental response must carry the item.
func (it *fetchItem) changed() bool {
	if it.errCode != 0 || it.readErr != 0 || len(it.records) > 0 || it.sp == nil {
		return true
	}
	return it.sp.highWatermark != it.res.HighWatermark ||
		it.sp.lastStable != it.res.LastStableOffset ||
		it.sp.logStart != it.res.LogStartOffset
}

// readFetchItems reads every item within the response budget. It returns
// the record bytes read and whether any partition has an error to report.
func (s *Server) readFetchItems(req *kmsg.FetchRequest, items []*fetchItem) (int, bool) {
	return s.readFetchWithin(req, items, fetchResponseLimit(req))
}

// fetchResponseLimit is the record bytes a response may hold: max_bytes
// (v3+), at most maxFetchResponseBytes.
func fetchResponseLimit(req *kmsg.FetchRequest) int {
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 || budget > maxFetchResponseBytes {
		budget = maxFetchResponseBytes
	}
	return budget
}

// readFetchWithin reads every item within budget record bytes, except that
// the first batch of the first partition with data is read whole (KIP-74),
// even with budget 0.
func (s *Server) readFetchWithin(req *kmsg.FetchRequest, items []*fetchItem, budget int) (int, bool) {
	total := 0
	anyErr := false
	for _, it := range items {
		it.records = it.records[:0]
		it.readErr = 0
		if it.errCode != 0 {
			anyErr = true
			continue
		}
		limit := int(it.maxBytes)
		if rem := budget - total; rem < limit {
			limit = rem
		}
		if limit < 0 {
			limit = 0
		}
		if it.records == nil && it.p != nil {
			// Sized by what the partition holds past the offset (none:
			// no buffer), so a fetch of many partitions holds about the
			// bytes it returns, not limit per partition.
			if n := it.p.ReadSizeHint(it.offset, limit); n > 0 {
				it.records = getBuffer(min(n, 1<<20))[:0]
			}
		}
		var err error
		if it.rl != nil {
			it.records, it.res, err = readReplicated(it, limit, total == 0, req.IsolationLevel == 1)
		} else if req.IsolationLevel == 1 {
			it.records, it.res, err = it.p.ReadCommitted(it.offset, limit, total == 0, it.records)
		} else {
			it.records, it.res, err = it.p.Read(it.offset, limit, total == 0, it.records)
		}
		if err == nil && req.Version < 4 {
			err = it.downconvert(req.Version, limit, total == 0)
		}
		if err != nil {
			it.readErr = errorCode(err)
			anyErr = true
			continue
		}
		total += it.res.Bytes
	}
	return total, anyErr
}

// downconvert replaces the item's record batches with the message set a
// Fetch v0-v3 client reads, and its byte count with the set's size. The set
// holds at most limit bytes unless first is set (then at least one message,
// as for batches).
func (it *fetchItem) downconvert(version int16, limit int, first bool) error {
	if len(it.records) == 0 {
		return nil
	}
	magic := int8(1)
	if version < 2 {
		magic = 0
	}
	if first {
		limit = max(limit, 1)
	}
	set, _, err := topics.DownconvertBatches(getBuffer(len(it.records))[:0], it.records, magic, it.offset, limit)
	if err != nil {
		putBuffer(set)
		return err
	}
	if !first && len(set) > limit {
		set = set[:0]
	}
	putBuffer(it.records)
	it.records = set
	it.res.Bytes = len(set)
	return nil
}

// fetchQuota records the fetched bytes against the client's
// consumer_byte_rate. Over the quota, the response carries no records (their
// bytes unrecorded), the throttle time, and the connection is muted; a
// client before Fetch v8 (no client-side throttling, KIP-219) gets the
// answer that much later. KafkaApis.handleFetchRequest does the same.
func (s *Server) fetchQuota(c *conn, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, plan fetchPlan) {
	total := 0
	for _, it := range plan.items {
		total += len(it.records)
	}
	now := s.now()
	throttle := plan.quota.Record(float64(total), now)
	if throttle <= 0 {
		return
	}
	plan.quota.Unrecord(float64(total), now)
	for _, it := range plan.items {
		it.records = it.records[:0]
	}
	s.metrics.throttled.Inc()
	resp.ThrottleMillis = int32(min(throttle.Milliseconds(), 1<<31-1))
	c.muteFor(throttle)
	if req.Version < 8 {
		c.holdReply(throttle)
	}
}
