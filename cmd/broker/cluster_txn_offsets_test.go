package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
)

// txnOffsetsRun is one run of TestClusterTxnOffsetCommitRemote: a group
// coordinated by broker groupAt, a transactional ID by txnAt.
type txnOffsetsRun struct {
	t              *testing.T
	tc             *testCluster
	cl             *kgo.Client
	ctx            context.Context
	topic, group   string
	txnID          string
	groupAt, txnAt int32
	pid            int64
	epoch          int16
	offsetsPart    int32 // the group's partition of __consumer_offsets
	part           int32 // the topic's partition committed and fetched
}

// coordinatorOfKey is broker 1's answer to FindCoordinator for key of
// type typ (0 group, 1 transaction), retried while none is placed.
func (r *txnOffsetsRun) coordinatorOfKey(typ int8, key string) int32 {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
		resp, err := req.RequestWith(r.ctx, r.cl.Broker(1))
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no coordinator for %q: %v %+v", key, err, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// txnOffsetCommit sends a TxnOffsetCommit of offset for partition r.part
// to broker at and returns the partition's code.
func (r *txnOffsetsRun) txnOffsetCommit(at int32, offset int64) int16 {
	r.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = r.txnID, r.group, r.pid, r.epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = r.topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = r.part, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(r.ctx, r.cl.Broker(int(at)))
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// marker sends a WriteTxnMarkers v1 for the group's partition of
// __consumer_offsets to broker at and returns the partition's code.
func (r *txnOffsetsRun) marker(at int32, commit bool) int16 {
	r.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = r.pid, r.epoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = groups.OffsetsTopic, []int32{r.offsetsPart}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(r.ctx, r.cl.Broker(int(at)))
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// fetch is the group coordinator's answer for partition r.part: the
// offset and code, with or without require_stable.
func (r *txnOffsetsRun) fetch(stable bool) (int64, int16, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = stable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = r.group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = r.topic, []int32{r.part}
	if ts, err := kadm.NewClient(r.cl).ListTopics(r.ctx, r.topic); err == nil {
		rt.TopicID = ts[r.topic].ID
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(r.ctx, r.cl.Broker(int(r.groupAt)))
	if err != nil {
		return 0, 0, err
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 || len(g.Topics) != 1 {
		return 0, g.ErrorCode, nil
	}
	p := g.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode, nil
}

// wantFetch checks the committed offset and the require_stable code.
func (r *txnOffsetsRun) wantFetch(what string, offset int64, stableCode int16) {
	r.t.Helper()
	got, code, err := r.fetch(false)
	if err != nil || code != 0 || got != offset {
		r.t.Fatalf("%s: offset fetch = %d code %d %v, want %d", what, got, code, err, offset)
	}
	_, code, err = r.fetch(true)
	if err != nil || code != stableCode {
		r.t.Fatalf("%s: offset fetch require_stable code %d %v, want %d", what, code, err, stableCode)
	}
}

// endTxn ends the transaction on its coordinator.
func (r *txnOffsetsRun) endTxn(commit bool) {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = r.txnID, r.pid, r.epoch, commit
	resp, err := req.RequestWith(r.ctx, r.cl.Broker(int(r.txnAt)))
	if err != nil || resp.ErrorCode != 0 {
		r.t.Fatalf("end txn: %v %+v", err, resp)
	}
}

// waitComplete waits until the transaction coordinator, whose marker
// sender delivers the marker for the group's __consumer_offsets
// partition, has completed the transaction (state CompleteCommit or
// CompleteAbort).
func (r *txnOffsetsRun) waitComplete(state string) {
	r.t.Helper()
	waitTxnState(r.ctx, r.t, r.cl, r.txnAt, r.txnID, state)
}

// addOffsets adds the group to the transaction on its coordinator.
func (r *txnOffsetsRun) addOffsets() {
	r.t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = r.txnID, r.pid, r.epoch, r.group
	resp, err := req.RequestWith(r.ctx, r.cl.Broker(int(r.txnAt)))
	if err != nil || resp.ErrorCode != 0 {
		r.t.Fatalf("add offsets to txn: %v %+v", err, resp)
	}
}

// startTxnOffsetsRun starts three brokers (with
// offsets-topic-replication-factor offsetsRF), a topic of two partitions,
// and picks a group and a transactional ID coordinated by different
// brokers; the producer is initialized on its coordinator. With
// offsetsRF 3 the group's coordinator is the one every broker names once
// it is the preferred replica and serves the group.
func startTxnOffsetsRun(t *testing.T, offsetsRF int) *txnOffsetsRun {
	tc := startTestCluster(t, func(c *Config) {
		c.HTTPAddr = "" // a restart on the same port could find it taken
		c.OffsetsTopicReplicationFactor = offsetsRF
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r := &txnOffsetsRun{t: t, tc: tc, cl: tc.client(), ctx: ctx, topic: "txo"}
	tc.waitAgreed(ctx, r.cl, func(*kmsg.MetadataResponse) bool { return true })
	if _, err := kadm.NewClient(r.cl).CreateTopic(ctx, 2, 1, nil, r.topic); err != nil {
		t.Fatal(err)
	}
	tc.waitAgreed(ctx, r.cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, r.topic); return ok })
	r.group = "txo-group"
	if offsetsRF > 1 {
		all := []int32{1, 2, 3}
		tc.waitCoordinator(ctx, r.cl, r.group, r.topic, all, func(int32) bool { return true }) // placed
		preferred := preferredCoordinator(ctx, t, r.cl, r.group)
		r.groupAt, _ = tc.waitCoordinator(ctx, r.cl, r.group, r.topic, all, func(c int32) bool { return c == preferred })
	} else {
		r.groupAt = r.coordinatorOfKey(0, r.group)
	}
	for i := 0; r.txnID == "" && i < 100; i++ {
		if id := fmt.Sprint("txo-tx-", i); r.coordinatorOfKey(1, id) != r.groupAt {
			r.txnID = id
		}
	}
	if r.txnID == "" {
		t.Fatal("no transactional ID coordinated by another broker than the group's")
	}
	r.txnAt = r.coordinatorOfKey(1, r.txnID)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &r.txnID, 60000
	resp, err := init.RequestWith(ctx, r.cl.Broker(int(r.txnAt)))
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %+v", err, resp)
	}
	r.pid, r.epoch = resp.ProducerID, resp.ProducerEpoch
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(groups.OffsetsTopic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, r.cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) == 0 {
		t.Fatalf("metadata of %s: %v %+v", groups.OffsetsTopic, err, mresp)
	}
	r.offsetsPart = groups.PartitionFor(r.group, int32(len(mresp.Topics[0].Partitions)))
	return r
}

// TestClusterTxnOffsetCommitRemote: three brokers; a group coordinated by
// one, a transactional ID by another (C4 of transactions across brokers,
// DESIGN.md). TxnOffsetCommit goes to the group's coordinator, which
// keeps the offset pending (require_stable: UNSTABLE_OFFSET_COMMIT; plain
// fetch: the last committed offset), also across its restart; EndTxn's
// COMMIT marker for the group's partition of __consumer_offsets (sent by
// the transaction coordinator's marker sender) makes it the committed
// offset, a repeated one by hand ends nothing; an ABORT leaves the old
// one. Other brokers answer NOT_COORDINATOR to both.
func TestClusterTxnOffsetCommitRemote(t *testing.T) {
	r := startTxnOffsetsRun(t, 1)
	other := int32(1)
	for other == r.groupAt {
		other++
	}
	ctx := r.ctx

	// An offset committed outside the transaction.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = r.group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = r.topic
	if ts, err := kadm.NewClient(r.cl).ListTopics(ctx, r.topic); err == nil {
		ct.TopicID = ts[r.topic].ID // v10 names topics by ID
	}
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if cresp, err := commit.RequestWith(ctx, r.cl.Broker(int(r.groupAt))); err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset commit: %v %+v", err, cresp)
	}

	// Commit.
	r.addOffsets()
	if code := r.txnOffsetCommit(other, 10); code != kerr.NotCoordinator.Code {
		t.Fatalf("txn offset commit on broker %d (not the group's coordinator): code %d", other, code)
	}
	if code := r.txnOffsetCommit(r.groupAt, 10); code != 0 {
		t.Fatalf("txn offset commit: code %d", code)
	}
	r.wantFetch("pending", 5, kerr.UnstableOffsetCommit.Code)

	r.tc.stop[r.groupAt]()
	r.tc.start(r.groupAt)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, code, err := r.fetch(false); err == nil && code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted group coordinator does not answer offset fetch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.wantFetch("pending after the group coordinator's restart", 5, kerr.UnstableOffsetCommit.Code)

	r.endTxn(true)
	r.waitComplete("CompleteCommit")
	r.wantFetch("committed", 10, 0)
	if code := r.marker(other, true); code != kerr.NotCoordinator.Code {
		t.Fatalf("marker on broker %d (not the coordinator of the offsets partition): code %d", other, code)
	}
	if code := r.marker(r.groupAt, true); code != 0 { // ends nothing
		t.Fatalf("repeated commit marker: code %d", code)
	}
	r.wantFetch("after a repeated marker", 10, 0)

	// Abort.
	r.addOffsets()
	if code := r.txnOffsetCommit(r.groupAt, 20); code != 0 {
		t.Fatalf("txn offset commit: code %d", code)
	}
	r.wantFetch("pending again", 10, kerr.UnstableOffsetCommit.Code)
	r.endTxn(false)
	r.waitComplete("CompleteAbort")
	r.wantFetch("aborted", 10, 0)
}

// TestClusterTxnOffsetCommitReplicated: TestClusterTxnOffsetCommitRemote
// with offsets-topic-replication-factor 3. The pending offset is a record
// of the group's replicated partition of __consumer_offsets: once the
// group's coordinator is stopped, the broker that takes over loads it
// (require_stable: UNSTABLE_OFFSET_COMMIT), and the COMMIT marker the
// transaction coordinator sends it commits it; a second transaction's
// offset of the other partition is dropped by an ABORT there.
func TestClusterTxnOffsetCommitReplicated(t *testing.T) {
	r := startTxnOffsetsRun(t, 3)
	other := int32(1)
	for other == r.groupAt || other == r.txnAt {
		other++
	}

	r.addOffsets()
	if code := r.txnOffsetCommit(other, 10); code != kerr.NotCoordinator.Code {
		t.Fatalf("txn offset commit on broker %d (not the group's coordinator): code %d", other, code)
	}
	if code := r.txnOffsetCommit(r.groupAt, 10); code != 0 {
		t.Fatalf("txn offset commit: code %d", code)
	}
	r.wantFetch("pending", -1, kerr.UnstableOffsetCommit.Code)

	stopped := r.groupAt
	r.tc.stop[stopped]()
	running := []int32{r.txnAt, other}
	r.groupAt, _ = r.tc.waitCoordinator(r.ctx, r.cl, r.group, r.topic, running, func(c int32) bool { return c != stopped })
	t.Logf("group coordinator %d stopped; broker %d coordinates the group", stopped, r.groupAt)
	r.wantFetch("pending on the new coordinator", -1, kerr.UnstableOffsetCommit.Code)

	r.endTxn(true)
	r.waitComplete("CompleteCommit")
	r.wantFetch("committed on the new coordinator", 10, 0)
	notCoordinator := r.txnAt
	if notCoordinator == r.groupAt {
		notCoordinator = other
	}
	if code := r.marker(notCoordinator, true); code != kerr.NotCoordinator.Code {
		t.Fatalf("marker on broker %d (not the coordinator of the offsets partition): code %d", notCoordinator, code)
	}
	if code := r.marker(r.groupAt, true); code != 0 { // ends nothing
		t.Fatalf("repeated commit marker: code %d", code)
	}

	// Abort, of the topic's other partition.
	r.part = 1
	r.addOffsets()
	if code := r.txnOffsetCommit(r.groupAt, 20); code != 0 {
		t.Fatalf("txn offset commit: code %d", code)
	}
	r.wantFetch("pending again", -1, kerr.UnstableOffsetCommit.Code)
	r.endTxn(false)
	r.waitComplete("CompleteAbort")
	r.wantFetch("aborted", -1, 0)
	r.part = 0
	r.wantFetch("the committed partition after the abort", 10, 0)
}
