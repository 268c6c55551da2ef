package compattests

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRestartDurability: after a clean stop (SIGTERM, exit 0) and a restart
// on the same data directory, topics (names, IDs, partition counts),
// configs, every record and the end offsets are unchanged, new records
// continue the offsets, and idempotent producer state survives: a duplicate
// of a batch written before the restart gets its original offset.
func TestRestartDurability(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	ta, tb := topicName(t, "a"), topicName(t, "b")
	retA, retB := "86400000", "3600000"
	createTopic(t, adm, ta, 3, map[string]*string{"retention.ms": &retA})
	createTopic(t, adm, tb, 1, map[string]*string{"retention.ms": &retB})

	prod := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	ctx := testCtx(t, 3*opTimeout)
	var sent []*kgo.Record
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 120; i++ {
		sent = append(sent, &kgo.Record{
			Topic:     ta,
			Key:       []byte(fmt.Sprintf("k%d", i%9)),
			Value:     []byte(fmt.Sprintf("a-%d", i)),
			Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}},
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		})
	}
	if err := prod.ProduceSync(ctx, sent...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// An idempotent batch by hand, so its exact bytes can be resent later.
	vs := apiVersions(t, b.Addr())
	pv := pickVersion(t, vs, kmsg.Produce, 11, 3)
	iv := pickVersion(t, vs, kmsg.InitProducerID, 4, 0)
	raw := dialRaw(t, b.Addr())
	pid, epoch := raw.initProducerID(iv)
	ts := time.Now().Add(-time.Minute).UnixMilli()
	batch0 := rawBatch(pid, epoch, 0, ts, valueRecords("b0", "b1", "b2"))
	if p := raw.produceRaw(pv, tb, 0, batch0); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("idempotent batch: %s base %d", errName(p.ErrorCode), p.BaseOffset)
	}
	batch1 := rawBatch(pid, epoch, 3, ts, valueRecords("b3"))
	if p := raw.produceRaw(pv, tb, 0, batch1); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("idempotent batch 2: %s base %d", errName(p.ErrorCode), p.BaseOffset)
	}
	raw.conn.Close()

	topicsBefore, err := adm.ListTopics(ctx, ta, tb)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	endsA := endOffsets(t, adm, ta)
	endsB := endOffsets(t, adm, tb)

	b.Stop()
	b.Start()

	adm = newAdmin(t, b.Addr())
	topicsAfter, err := adm.ListTopics(ctx, ta, tb)
	if err != nil {
		t.Fatalf("ListTopics after restart: %v", err)
	}
	for _, name := range []string{ta, tb} {
		before, after := topicsBefore[name], topicsAfter[name]
		if after.Err != nil {
			t.Errorf("after restart %s: %v", name, after.Err)
			continue
		}
		if after.ID != before.ID {
			t.Errorf("after restart %s: topic ID %s, was %s", name, after.ID, before.ID)
		}
		if len(after.Partitions) != len(before.Partitions) {
			t.Errorf("after restart %s: %d partitions, was %d", name, len(after.Partitions), len(before.Partitions))
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, ta, tb)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs after restart: %v", err)
	}
	for name, want := range map[string]string{ta: retA, tb: retB} {
		rc, err := rcs.On(name, nil)
		if err != nil || rc.Err != nil {
			t.Errorf("DescribeTopicConfigs %s: %v %v", name, err, rc.Err)
			continue
		}
		var got *string
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				got = c.Value
			}
		}
		if got == nil || *got != want {
			t.Errorf("after restart %s retention.ms = %v, want %s", name, deref(got), want)
		}
	}
	if got := endOffsets(t, adm, ta); fmt.Sprint(got) != fmt.Sprint(endsA) {
		t.Errorf("after restart %s end offsets %v, were %v", ta, got, endsA)
	}
	if got := endOffsets(t, adm, tb); fmt.Sprint(got) != fmt.Sprint(endsB) {
		t.Errorf("after restart %s end offsets %v, were %v", tb, got, endsB)
	}

	got := readPartitions(t, b.Addr(), ta, endsA)
	want := make(map[int32][]*kgo.Record)
	for _, r := range sent {
		want[r.Partition] = append(want[r.Partition], r)
	}
	for p, rs := range got {
		checkContiguous(t, ta, p, rs)
		if len(rs) != len(want[p]) {
			t.Errorf("after restart %s/%d: %d records, want %d", ta, p, len(rs), len(want[p]))
			continue
		}
		for i, r := range rs {
			w := want[p][i]
			if r.Offset != w.Offset || string(r.Value) != string(w.Value) || string(r.Key) != string(w.Key) ||
				!r.Timestamp.Equal(w.Timestamp) || len(r.Headers) != 1 || string(r.Headers[0].Value) != string(w.Headers[0].Value) {
				t.Errorf("after restart %s/%d@%d: %q=%q ts %v headers %v; want @%d %q=%q ts %v", ta, p, r.Offset, r.Key, r.Value, r.Timestamp, r.Headers, w.Offset, w.Key, w.Value, w.Timestamp)
			}
		}
	}

	// Producer state survived: resending the batches gets their offsets.
	raw = dialRaw(t, b.Addr())
	if p := raw.produceRaw(pv, tb, 0, batch1); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Errorf("resend of last idempotent batch after restart: %s base %d; want NONE base 3 (duplicate)", errName(p.ErrorCode), p.BaseOffset)
	}
	if p := raw.produceRaw(pv, tb, 0, batch0); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Errorf("resend of earlier idempotent batch after restart: %s base %d; want NONE base 0 (duplicate)", errName(p.ErrorCode), p.BaseOffset)
	}
	// A producer id handed out before the restart is never handed out again:
	// a new producer sharing it would have its first batches taken for
	// duplicates of the old producer's and silently dropped.
	for i := 0; i < 3; i++ {
		if pid2, _ := raw.initProducerID(iv); pid2 == pid {
			t.Errorf("InitProducerID after restart handed out producer id %d again", pid)
		}
	}
	// And the sequence continues where it was.
	if p := raw.produceRaw(pv, tb, 0, rawBatch(pid, epoch, 4, ts, valueRecords("b4"))); p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Errorf("next idempotent batch after restart: %s base %d; want NONE base 4", errName(p.ErrorCode), p.BaseOffset)
	}
	if p := raw.produceRaw(pv, tb, 0, rawBatch(pid, epoch, 9, ts, valueRecords("gap"))); p.ErrorCode == 0 {
		t.Errorf("sequence gap after restart accepted at %d; want OUT_OF_ORDER_SEQUENCE_NUMBER", p.BaseOffset)
	}
	endsB = endOffsets(t, adm, tb)
	rs := readPartitions(t, b.Addr(), tb, endsB)[0]
	checkContiguous(t, tb, 0, rs)
	if values(rs) != `0:"b0" 1:"b1" 2:"b2" 3:"b3" 4:"b4"` {
		t.Errorf("after restart %s holds %s; want b0..b4 once each", tb, values(rs))
	}

	// New records continue the offsets of topic a.
	more := &kgo.Record{Topic: ta, Key: []byte("k0"), Value: []byte("after-restart")}
	prod2 := newClient(t, b.Addr())
	if err := prod2.ProduceSync(ctx, more).FirstErr(); err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
	if more.Offset != endsA[more.Partition] {
		t.Errorf("first record after restart at %d/%d; want offset %d", more.Partition, more.Offset, endsA[more.Partition])
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestShutdownWithParkedFetch: a SIGTERM while a consumer's fetch is parked
// waiting for data (MaxWaitMillis 120 s, no data coming) still stops the
// broker promptly with exit code 0: shutdown must answer or drop parked
// fetches, not wait out their MaxWaitMillis or a shutdown grace period.
// The broker is idle otherwise, so 10 s is a generous liveness bound, not
// a performance target.
func TestShutdownWithParkedFetch(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	vs := apiVersions(t, b.Addr())
	fv := pickVersion(t, vs, kmsg.Fetch, 12, 4)
	c := dialRaw(t, b.Addr())
	req := kmsg.NewPtrFetchRequest()
	req.Version = fv
	req.ReplicaID = -1
	req.MaxWaitMillis = 120000
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c.send(req)
	// Give the broker a moment to read and park the fetch. If it has not by
	// then, the test passes without proving anything; it can never fail
	// because of this sleep.
	time.Sleep(300 * time.Millisecond)
	b.StopWithin(10 * time.Second)
}

// TestClosedClientReleasesConnection: when a client closes a connection
// whose fetch is parked (MaxWaitMillis 10 min), the broker releases that
// connection at once rather than when the fetch times out. Otherwise any
// client can exhaust --max-connections with parked fetches and walk away.
// The broker runs with --max-connections 4; the test first proves the
// limit bites, then that closed connections free their slots (10 s bound).
func TestClosedClientReleasesConnection(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--max-connections", "4"))
	vs := apiVersions(t, b.Addr()) // opens and closes one connection
	c0 := dialRaw(t, b.Addr())
	topic := topicName(t, "")
	cv := pickVersion(t, vs, kmsg.CreateTopics, 7, 2)
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.Version = cv
	creq.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic = topic
	ct.NumPartitions = 1
	ct.ReplicationFactor = 1
	creq.Topics = append(creq.Topics, ct)
	if resp := c0.roundTrip(creq).(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %s", errName(resp.Topics[0].ErrorCode))
	}
	fv := pickVersion(t, vs, kmsg.Fetch, 12, 4)
	var parked []*rawConn
	for i := 0; i < 3; i++ {
		c := dialRaw(t, b.Addr())
		req := kmsg.NewPtrFetchRequest()
		req.Version = fv
		req.ReplicaID = -1
		req.MaxWaitMillis = 600000
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.send(req)
		parked = append(parked, c)
	}
	// A request on c0 answered after the fetches were sent: c0 is served,
	// the broker is reading; 4 of 4 connections are in use.
	probe := func() error {
		c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		buf := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write(buf); err != nil {
			return err
		}
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for probe() == nil {
		if time.Now().After(deadline) {
			t.Skip("--max-connections 4 does not refuse a 5th connection; cannot test slot release this way")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range parked {
		c.conn.Close()
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		err := probe()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after closing 3 connections with parked fetches, a new connection is still refused (%v): their slots are held until MaxWaitMillis (10 min)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
