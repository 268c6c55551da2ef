package main

import (
	"context"
	"fmt"
	"time"

	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/topics"
)

// Transactions on replicated partitions (issue 13; DESIGN.md "Cluster",
// "Transactions across brokers"): the partition's state machine keeps the
// ongoing transactions and the aborted index (cluster/partition_txn.go);
// the leader writes a marker as a control batch proposed through the
// group's log.

// LastStableOffset implements kafkaproto.ReplicatedLog.
func (l *replicaLog) LastStableOffset() int64 { return l.r.log.LastStableOffset() }

// AbortedTransactions implements kafkaproto.ReplicatedLog.
func (l *replicaLog) AbortedTransactions(from, to int64) []topics.AbortedTxn {
	in := l.r.log.AbortedTransactions(from, to)
	out := make([]topics.AbortedTxn, len(in))
	for i, a := range in {
		out[i] = topics.AbortedTxn(a)
	}
	return out
}

// WriteMarker implements kafkaproto.ReplicatedLog: on the leader, the
// control batch (Kafka's format, topics.ControlBatch) is proposed; the
// state machine decides whether it ends a transaction, alike on every
// replica.
func (l *replicaLog) WriteMarker(ctx context.Context, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) func() error {
	if _, err := l.LeaderEpoch(); err != nil {
		return func() error { return err }
	}
	batch, err := topics.ControlBatch(producerID, epoch, commit, coordinatorEpoch, time.Now())
	if err != nil {
		return func() error { return fmt.Errorf("build the control batch of producer %d: %w", producerID, err) }
	}
	wait := l.m.host.Enqueue(ctx, l.r.rp.Group, batch)
	return func() error {
		_, base, err := wait()
		_, err = appendResult(base, err)
		return err
	}
}

// Producers implements kafkaproto.ReplicatedLog: the state machine's
// producers, on the leader only (a follower's may lag).
func (l *replicaLog) Producers() ([]topics.ProducerInfo, error) {
	if _, err := l.LeaderEpoch(); err != nil {
		return nil, err
	}
	in := l.r.log.Producers()
	out := make([]topics.ProducerInfo, len(in))
	for i, p := range in {
		out[i] = topics.ProducerInfo(p)
	}
	return out, nil
}

func (notReplica) Producers() ([]topics.ProducerInfo, error)            { return nil, kafkaproto.ErrNotLeader }
func (notReplica) LastStableOffset() int64                              { return -1 }
func (notReplica) AbortedTransactions(int64, int64) []topics.AbortedTxn { return nil }
func (notReplica) WriteMarker(context.Context, int64, int16, bool, int32) func() error {
	return func() error { return kafkaproto.ErrNotLeader }
}
