package kafkaproto

// Produce: v0-v11
//
// Behavior:
//   - acks must be -1, 0 or 1, else INVALID_REQUIRED_ACKS. On a single node
//     acks=1 and acks=-1 are the same: the response is sent only after the
//     batch is synced to disk (group commit shares one fsync among all
//     writers in flight). acks=0 writes no response but the append is the
//     same.
//   - Each partition's records must be exactly one v2 batch; validation
//     (CRC, lengths, record count, max.message.bytes, keys on compacted
//     topics) answers CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE or
//     UNSUPPORTED_COMPRESSION_TYPE for that partition alone.
//   - Idempotent producers (producer ID >= 0): a retried batch is answered
//     with its original offsets; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER; an
//     old epoch INVALID_PRODUCER_EPOCH (KIP-98, KIP-360).
//   - Offsets are assigned on the connection's reader in request order, so a
//     client pipelining requests (max.in.flight > 1) keeps its order.
//   - Transactional batches (KIP-98) are accepted only from a producer whose
//     transaction is ongoing and holds the partition (AddPartitionsToTxn
//     first), else INVALID_TXN_STATE, or from v11 TRANSACTION_ABORTABLE
//     (KIP-890: the client aborts the transaction and goes on, as with
//     Kafka); an older epoch gets INVALID_PRODUCER_EPOCH. In a cluster
//     whose coordinators send markers (Config.CrossBrokerTxns), a batch
//     whose transactional ID another broker coordinates is accepted
//     without asking it: the first batch opens the producer's transaction
//     on the partition (Kafka before KIP-890), its coordinator's
//     WriteTxnMarkers ends it.
//   - Unknown topics are not created by Produce (as in Kafka); internal
//     topics (__consumer_offsets) refuse client writes with
//     INVALID_TOPIC_EXCEPTION.
//   - Records produced into a native queue's topic become queue messages
//     (issue 10 part 3, queues/produce.go): the batch is appended as sent
//     with each record's delivery state in the same Pebble batch, synced
//     before the answer, so HTTP receivers and share groups get them at
//     once. A record outside the queue's limits (key, headers, reserved
//     x-q- headers) fails its partition with INVALID_RECORD, one over the
//     queue's max_message_bytes MESSAGE_TOO_LARGE; a transactional batch
//     cannot reach a queue (AddPartitionsToTxn refuses its partitions).
//   - The topic of a dead-letter queue or event store (an owned topic,
//     topics/owner.go) refuses client writes: its records must carry the
//     owner's state. From v8 the answer is POLICY_VIOLATION with a message
//     naming the owner and the command to use; before,
//     INVALID_TOPIC_EXCEPTION (as for internal topics: no message field).
//   - While the data directory's disk is below disk-free-min
//     (pebblestore.SpaceGuard), every partition is answered
//     KAFKA_STORAGE_ERROR (56) and nothing is written; from v8 the message
//     says how much space is free and the limit. Kafka uses the code for an
//     offline log directory and every client we checked retries it:
//     franz-go (kerr marks it retriable), sarama (its producer's retry
//     list), the Java client (KafkaStorageException is retriable). So
//     producers wait out the shortage within their delivery timeout.
//     Produce v3 predates the code (v4, KIP-112) and gets
//     NOT_LEADER_OR_FOLLOWER instead, as Kafka answers it.
//
// Version notes:
//   - v0-v2 carry a message set of magic 0 or 1 (topics/legacy.go), which is
//     converted to one v2 batch before the append, as Kafka did until 4.0
//     removed these versions (KIP-896); a v2 batch in them is INVALID_RECORD.
//     Old clients pinned to Kafka 0.8-0.10 (sarama before 1.32 by default)
//     keep working. Magic-0 messages, which have no timestamp, get the
//     append time. Kafka 4 advertises them only for KAFKA-18659 and answers
//     UNSUPPORTED_VERSION.
//   - Authorization (KafkaApis.handleProduceRequest): a transactional
//     producer needs WRITE on its transactional ID, else every partition
//     is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE,
//     else its partitions are TOPIC_AUTHORIZATION_FAILED.
//   - v8 adds per-partition error messages (KIP-467).
//   - producer_byte_rate (KIP-13, quotas.go): the request's size is
//     recorded after the append; over the quota the answer carries
//     throttle_time_ms (v1+) and the connection is muted (KIP-219; before
//     v6 the answer is also held back for the throttle time).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

func init() {
	register(kmsg.Produce, 0, 11, (*Server).handleProduce)
}

func (s *Server) handleProduce(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)

	var fixedErr int16
	switch {
	case req.Acks != -1 && req.Acks != 0 && req.Acks != 1:
		fixedErr = kerr.InvalidRequiredAcks.Code
	}
	total := 0
	for _, rt := range req.Topics {
		total += len(rt.Partitions)
	}
	if total > s.cfg.MaxPartitionsPerRequest {
		fixedErr = kerr.PolicyViolation.Code
	}
	if fixedErr == 0 && req.TransactionID != nil && !r.allowedTxn(auth.OpWrite, *req.TransactionID) {
		fixedErr = kerr.TransactionalIDAuthorizationFailed.Code
	}

	appends := make([]*topics.Append, 0, total)
	var queueAppends []*topics.Append
	type slot struct {
		topic, part int
		a           *topics.Append
	}
	slots := make([]slot, 0, total)
	var replicated []func() // waits of replicated partitions (replicated.go)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t, topicOK := s.topics.Topic(rt.Topic)
		// Clients may not write internal topics (Kafka: INVALID_TOPIC_EXCEPTION);
		// only the coordinators append to them.
		internal := topics.IsInternalTopic(rt.Topic)
		denied := !r.allowedTopic(auth.OpWrite, rt.Topic)
		var owned error
		toQueue := false
		if topicOK {
			owned = t.CheckClientChange(topics.ChangeProduce)
			if owned != nil && t.Owner() == topics.OwnerQueue && s.cfg.Queues != nil && s.cfg.Queues.AcceptsProduce(rt.Topic) {
				owned, toQueue = nil, true
			}
		}
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			if fixedErr != 0 {
				sp.ErrorCode = fixedErr
				continue
			}
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if internal {
				sp.ErrorCode = kerr.InvalidTopicException.Code
				continue
			}
			if owned != nil {
				sp.ErrorCode = kerr.InvalidTopicException.Code
				if req.Version >= 8 {
					sp.ErrorCode = kerr.PolicyViolation.Code
					sp.ErrorMessage = errorMessage(owned)
				}
				continue
			}
			var p *topics.Partition
			if topicOK {
				p, _ = t.Partition(rp.Partition)
			}
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if rl := s.replicatedLog(rt.Topic, rp.Partition); rl != nil {
				replicated = append(replicated, s.produceReplicated(req, rl, p, rp.Records, sp))
				continue
			}
			if s.cfg.Cluster != nil && !s.leads(rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			batch, code, msg := s.produceBatch(req, rt.Topic, rp.Partition, rp.Records)
			if code != 0 {
				sp.ErrorCode, sp.ErrorMessage = code, msg
				continue
			}
			a := &topics.Append{Partition: p, Batch: batch}
			if toQueue {
				queueAppends = append(queueAppends, a)
			} else {
				appends = append(appends, a)
			}
			slots = append(slots, slot{ti, pi, a})
		}
	}
	now := s.now()
	pending := s.topics.Append(appends, now)
	var queuePending *queues.ProducedWrite
	if len(queueAppends) > 0 {
		queuePending = s.cfg.Queues.AppendProduced(queueAppends, now)
	}
	finish := func() {
		_ = pending.Wait()
		if queuePending != nil {
			_ = queuePending.Wait()
		}
		for _, sl := range slots {
			s.produceResult(req.Version, &resp.Topics[sl.topic].Partitions[sl.part], sl.a)
		}
		waitReplicated(replicated)
	}
	return reply{resp: resp, finish: finish, none: req.Acks == 0}, nil
}

// produceBatch returns the v2 batch to append for one partition of a
// Produce request of the given version: a message set (v0-v2) converted
// up, and a transactional batch checked against its transaction. A
// refused partition gets its error code (and, from v8, message) instead.
func (s *Server) produceBatch(req *kmsg.ProduceRequest, topic string, partition int32, records []byte) ([]byte, int16, *string) {
	version := req.Version
	batch := records
	if version < 3 {
		var err error
		if batch, err = topics.UpconvertMessageSet(batch, s.now()); err != nil {
			return nil, errorCode(err), nil
		}
	}
	if !topics.IsTransactionalBatch(batch) {
		return batch, 0, nil
	}
	h, err := topics.ParseBatchHeader(batch)
	if err != nil {
		return batch, 0, nil // the append's validation answers it
	}
	if s.cfg.Txns == nil {
		return nil, kerr.TransactionalIDAuthorizationFailed.Code, nil
	}
	if s.coordinatedElsewhere(req.TransactionID) {
		// Another broker's transaction: this leader cannot ask its
		// coordinator, so the batch opens the producer's transaction on
		// the partition, as in Kafka before KIP-890 (the partition's
		// producer state checks epoch and sequence; the coordinator's
		// marker ends it).
		return batch, 0, nil
	}
	if err := s.cfg.Txns.CheckProduce(h.ProducerID, h.ProducerEpoch, topic, partition); err != nil {
		code := fencedCode(errorCode(err), false)
		if code == kerr.InvalidTxnState.Code && version >= 11 {
			// v11 clients abort and go on (KIP-890); older ones only
			// know INVALID_TXN_STATE.
			code = kerr.TransactionAbortable.Code
		}
		var msg *string
		if version >= 8 {
			msg = errorMessage(err)
		}
		return nil, code, msg
	}
	return batch, 0, nil
}

// produceResult fills one partition's answer from its finished append.
func (s *Server) produceResult(version int16, sp *kmsg.ProduceResponseTopicPartition, a *topics.Append) {
	if a.Err != nil {
		sp.ErrorCode = errorCode(a.Err)
		if sp.ErrorCode == kerr.KafkaStorageError.Code && version < 4 {
			// v4 introduced KAFKA_STORAGE_ERROR (KIP-112); Kafka answers
			// older requests NOT_LEADER_OR_FOLLOWER, which their clients
			// retry.
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
		if version >= 8 {
			sp.ErrorMessage = errorMessage(a.Err)
		}
		if errors.Is(a.Err, topics.ErrInvalidRecord) && oneBatch(a.Batch) {
			// Kafka reports the log start offset with a failure of its
			// log validator (RecordValidationException), -1 when the
			// request itself is malformed (not one v2 batch) or the batch
			// damaged or oversized.
			sp.LogStartOffset = a.Partition.LogStartOffset()
		}
		return
	}
	sp.BaseOffset = a.BaseOffset
	sp.LogAppendTime = a.LogAppendTime
	sp.LogStartOffset = a.LogStartOffset
	if !a.Duplicate {
		s.metrics.producedBytes.Add(float64(len(a.Batch)))
		s.metrics.producedBatches.Inc()
	}
}

// oneBatch reports whether b is exactly one whole v2 batch: what Kafka
// checks when it parses a Produce request, before its log validator.
func oneBatch(b []byte) bool {
	h, err := topics.ParseBatchHeader(b)
	return err == nil && h.Magic == 2 && h.Size() == len(b)
}
