package kafkaproto

// Replicated partitions (issue 13, step 3): a partition of a topic with a
// replication factor above 1 is the log of its Raft group
// (Cluster.ReplicatedLog); Produce, Fetch, ListOffsets and
// OffsetForLeaderEpoch serve it on its leader through the functions here,
// each handler calling one of them in its cluster branch. Every other
// partition keeps the topics path. Without Config.Cluster nothing here
// runs.
//
// Deviations (DESIGN.md "Cluster"): acks=1 and acks=0 wait like acks=all
// (the batch is answered once committed on a majority); a timestamp lookup answers
// the first batch whose max timestamp is at or after it. The log start
// (retention, DeleteRecords) is a command of the group's log, applied on
// every replica alike (cluster/partition_logstart.go).

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/topics"
)

// replicatedLog is partition p of topic's replicated log, nil on a single
// node and for partitions that are not replicated.
func (s *Server) replicatedLog(topic string, p int32) ReplicatedLog {
	if s.cfg.Cluster == nil {
		return nil
	}
	return s.cfg.Cluster.ReplicatedLog(topic, p)
}

// produceReplicated starts replicating one partition's records of a
// Produce request and returns the function that waits for the outcome and
// fills sp.
func (s *Server) produceReplicated(req *kmsg.ProduceRequest, rl ReplicatedLog, p *topics.Partition, records []byte, sp *kmsg.ProduceResponseTopicPartition) func() {
	// The request's body is reused for the connection's next frame once
	// the handler returns (conn.go: kept): the replication outlives it.
	batch := bytes.Clone(records)
	if req.Version < 3 {
		var err error
		if batch, err = topics.UpconvertMessageSet(batch, s.now()); err != nil {
			sp.ErrorCode = errorCode(err)
			return func() {}
		}
	}
	if _, err := rl.LeaderEpoch(); err != nil {
		sp.ErrorCode = errorCode(err)
		return func() {}
	}
	// The checks of a local append (topics.checkAppend), against the
	// topic's settings, on the leader before anything is proposed.
	batch, appendTime, err := s.topics.PrepareReplicatedBatch(p, batch, s.now())
	if err != nil {
		sp.ErrorCode = errorCode(err)
		if req.Version >= 8 {
			sp.ErrorMessage = errorMessage(err)
		}
		return func() {}
	}
	sp.LogAppendTime = appendTime
	// A transactional batch is not checked with a transaction coordinator
	// (which may be another broker): the partition's state machine opens
	// the producer's transaction at its first batch and checks its epoch
	// and sequence (cluster/partition_txn.go; Kafka before KIP-890).
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > clusterTimeout {
		timeout = clusterTimeout
	}
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	// Started here, on the connection's handler goroutine, so that the
	// connection's pipelined requests propose their batches in order: an
	// idempotent producer's later batch proposed first would be refused
	// as out of order (and retried after a backoff).
	wait := rl.Append(ctx, batch, req.Acks == -1)
	go func() {
		defer close(done)
		defer cancel()
		base, err := wait()
		if err != nil {
			sp.ErrorCode = errorCode(err)
			if req.Version >= 8 {
				sp.ErrorMessage = errorMessage(err)
			}
			return
		}
		sp.BaseOffset, sp.LogStartOffset = base, rl.LogStart()
	}()
	return func() { <-done }
}

// waitReplicated waits for the replicated partitions of a Produce request.
func waitReplicated(waits []func()) {
	for _, wait := range waits {
		wait()
	}
}

// resolveReplicated checks a fetch of a replicated partition: this broker
// leads it, and the client's current leader epoch (KIP-320) is ours:
// older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
func resolveReplicated(it *fetchItem, rl ReplicatedLog) {
	epoch, err := rl.LeaderEpoch()
	switch {
	case err != nil:
		it.errCode = errorCode(err)
	case it.leaderEpoch >= 0 && it.leaderEpoch < epoch:
		it.errCode = kerr.FencedLeaderEpoch.Code
	case it.leaderEpoch > epoch:
		it.errCode = kerr.UnknownLeaderEpoch.Code
	default:
		it.rl = rl
	}
}

// readReplicated is Partition.Read (committed: ReadCommitted) for a
// replicated partition. read_committed returns the batches below the last
// stable offset (read first: the high watermark only grows after it) and
// the aborted transactions of what it returns.
func readReplicated(it *fetchItem, limit int, minOne, committed bool) ([]byte, topics.ReadResult, error) {
	lso := it.rl.LastStableOffset()
	logStart, hw := it.rl.LogStart(), it.rl.HighWatermark()
	res := topics.ReadResult{HighWatermark: hw, LastStableOffset: min(lso, hw), LogStartOffset: logStart}
	if it.offset < logStart || it.offset > hw {
		return it.records, res, topics.ErrOffsetOutOfRange
	}
	if committed && it.offset >= res.LastStableOffset {
		return it.records, res, nil
	}
	start := len(it.records)
	out, err := it.rl.Read(it.offset, limit, minOne, it.records)
	if err != nil {
		return out, res, err
	}
	if committed {
		var last int64
		out, last = cutBatchesAt(out, start, res.LastStableOffset)
		if last >= it.offset {
			res.Aborted = it.rl.AbortedTransactions(it.offset, last)
		}
	}
	res.Bytes = len(out) - start
	return out, res, nil
}

// cutBatchesAt drops the batches of b[start:] whose base offset is at or
// above end and returns the rest with the last offset it holds (-1 when
// none).
func cutBatchesAt(b []byte, start int, end int64) ([]byte, int64) {
	last := int64(-1)
	for at := start; at+topics.BatchHeaderSize <= len(b); {
		h, err := topics.ParseBatchHeader(b[at:])
		if err != nil || h.BaseOffset >= end {
			return b[:at], last
		}
		last = h.LastOffset()
		at += h.Size()
	}
	return b, last
}

// listOffsetsReplicated answers ListOffsets for a replicated partition.
func listOffsetsReplicated(rl ReplicatedLog, req *kmsg.ListOffsetsRequest, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	version := req.Version
	epoch, err := rl.LeaderEpoch()
	switch {
	case err != nil:
		sp.ErrorCode = errorCode(err)
		return
	case version >= 4 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return
	case version >= 4 && rp.CurrentLeaderEpoch > epoch:
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return
	}
	switch rp.Timestamp {
	case topics.TimestampEarliest, timestampEarliestLocal:
		sp.Offset = rl.LogStart()
	case topics.TimestampLatest:
		sp.Offset = rl.HighWatermark()
		if req.IsolationLevel == 1 {
			sp.Offset = rl.LastStableOffset()
		}
	case topics.TimestampMaxTimestamp:
		sp.Offset, sp.Timestamp = rl.MaxTimestamp()
	default:
		if rp.Timestamp < 0 {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
		sp.Offset, sp.Timestamp = rl.OffsetForTimestamp(rp.Timestamp)
	}
	if sp.Offset >= 0 {
		sp.LeaderEpoch = epoch
	}
	if version == 0 {
		sp.OldStyleOffsets = []int64{sp.Offset}
	}
}

// deleteRecordsReplicated moves a replicated partition's log start
// (DeleteRecords on its leader) and returns the low watermark once the
// command is applied; timeoutMs bounds the wait as Produce's timeout does.
func deleteRecordsReplicated(rl ReplicatedLog, offset int64, timeoutMs int32) (int64, error) {
	timeout := time.Duration(timeoutMs) * time.Millisecond
	if timeout <= 0 || timeout > clusterTimeout {
		timeout = clusterTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return rl.DeleteRecords(ctx, offset)
}

// offsetForEpochReplicated answers OffsetForLeaderEpoch for a replicated
// partition from its index (KIP-279).
func offsetForEpochReplicated(rl ReplicatedLog, version int16, rp kmsg.OffsetForLeaderEpochRequestTopicPartition, sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	epoch, err := rl.LeaderEpoch()
	switch {
	case err != nil:
		sp.ErrorCode = errorCode(err)
	case version >= 2 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
	case version >= 2 && rp.CurrentLeaderEpoch > epoch:
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
	default:
		sp.LeaderEpoch, sp.EndOffset = rl.EndOffsetForEpoch(rp.LeaderEpoch)
	}
}

// partitionState is what Metadata and DescribeTopicPartitions report
// for a partition.
type partitionState struct {
	leader, epoch          int32
	replicas, isr, offline []int32
}

// partitionView is what Metadata and DescribeTopicPartitions report for
// partition p of t. A replicated partition's leader, epoch and ISR come
// from its leader's record (leader -1 until one is recorded); any
// other's ISR is its replicas (RF 1) and its epoch 0. A fenced leader is
// reported as none (-1), as Kafka's controller takes the leadership from
// a broker it fences (ReplicationControlManager.handleBrokerFenced: an
// RF 1 partition is left with leader -1 and its ISR unchanged) until it
// is unfenced; replicas on fenced brokers are offline
// (KRaftMetadataCache.getOfflineReplicas).
func (s *Server) partitionView(t *topics.Topic, p int32) partitionState {
	leader, replicas := s.partitionReplicas(t, p)
	st := partitionState{leader: leader, replicas: replicas, isr: replicas, offline: []int32{}}
	if s.cfg.Cluster == nil {
		return st
	}
	if l, e, in, ok := s.cfg.Cluster.ReplicatedState(t.Name, p); ok {
		if in == nil {
			in = []int32{}
		}
		st.leader, st.epoch, st.isr = l, e, in
	}
	if s.brokerFenced(st.leader) {
		st.leader = -1
	}
	for _, r := range replicas {
		if s.brokerFenced(r) {
			st.offline = append(st.offline, r)
		}
	}
	return st
}
