package compattests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareAutoOffsetResetByDuration: share.auto.offset.reset=
// by_duration:PT1H (KIP-932 group config, ISO 8601 duration) makes a new
// share group start at the first record at most an hour old: a kgo share
// consumer gets the records stamped now, not those stamped two hours ago;
// a negative or malformed duration is INVALID_CONFIG. Before, this broker
// refused by_duration. Also against Apache Kafka 4.2.
func TestShareAutoOffsetResetByDuration(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareByDuration(t, startBroker(t).Addr()) })
	t.Run("apache-kafka", func(t *testing.T) { testShareByDuration(t, referenceKafka(t)) })
}

func testShareByDuration(t *testing.T, addr string) {
	adm := newAdmin(t, addr)
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	old := time.Now().Add(-2 * time.Hour)
	var rs []*kgo.Record
	for i := range 5 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("old-%d", i)), Timestamp: old})
	}
	for i := range 5 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("new-%d", i)), Timestamp: time.Now()})
	}
	if err := cl.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alter := func(value string) int16 {
		t.Helper()
		return alterShareGroupConfig(t, cl, group, "share.auto.offset.reset", value)
	}
	for _, bad := range []string{"by_duration:-PT1H", "by_duration:1h", "by_duration:"} {
		if code := alter(bad); code != kerr.InvalidConfig.Code {
			t.Errorf("share.auto.offset.reset=%s: %s, want INVALID_CONFIG", bad, errName(code))
		}
	}
	if code := alter("by_duration:PT1H"); code != 0 {
		t.Fatalf("share.auto.offset.reset=by_duration:PT1H: %s", errName(code))
	}
	time.Sleep(500 * time.Millisecond) // Apache Kafka applies group configs through its metadata log
	share := newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
	var got []string
	ctx := testCtx(t, opTimeout)
	for len(got) < 5 && ctx.Err() == nil {
		share.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			r.Ack(kgo.AckAccept)
		})
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "new-0,new-1,new-2,new-3,new-4" {
		t.Fatalf("a share group with by_duration:PT1H got %v, want the 5 records stamped now", got)
	}
}

// alterShareGroupConfig sets one config of a group (IncrementalAlterConfigs
// on a GROUP resource) and returns the resource's error code.
func alterShareGroupConfig(t *testing.T, cl *kgo.Client, group, name, value string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

// TestShareGroupTimingConfigs: the group configs share.session.timeout.ms
// and share.heartbeat.interval.ms (Kafka 4.2 GroupConfig): values within
// Kafka's default bounds (45-60 s, 5-15 s) are accepted and a joining
// member is told the group's heartbeat interval; values outside them and
// non-numbers are INVALID_CONFIG. Before, this broker refused both names.
// Also against Apache Kafka 4.2.
func TestShareGroupTimingConfigs(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareGroupTimingConfigs(t, startBroker(t).Addr()) })
	t.Run("apache-kafka", func(t *testing.T) { testShareGroupTimingConfigs(t, referenceKafka(t)) })
}

func testShareGroupTimingConfigs(t *testing.T, addr string) {
	adm := newAdmin(t, addr)
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, addr)
	for _, bad := range [][2]string{{"share.heartbeat.interval.ms", "20000"}, {"share.session.timeout.ms", "70000"},
		{"share.session.timeout.ms", "soon"}} {
		if code := alterShareGroupConfig(t, cl, group, bad[0], bad[1]); code != kerr.InvalidConfig.Code {
			t.Errorf("%s=%s: %s, want INVALID_CONFIG", bad[0], bad[1], errName(code))
		}
	}
	for _, good := range [][2]string{{"share.session.timeout.ms", "50000"}, {"share.heartbeat.interval.ms", "6000"}} {
		if code := alterShareGroupConfig(t, cl, group, good[0], good[1]); code != 0 {
			t.Fatalf("%s=%s: %s", good[0], good[1], errName(code))
		}
	}
	// A joining member gets the group's heartbeat interval (Apache Kafka
	// applies a group config through its metadata log: retry a while).
	c := dialRaw(t, addr)
	defer c.conn.Close()
	var got int32
	for i := 0; i < 50; i++ {
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, group, fmt.Sprintf("timing-member-%08d-xyz", i), 0
		hb.SubscribedTopicNames = []string{topic}
		r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
		if coordinatorNotReady(r.ErrorCode) {
			// Apache Kafka creates __consumer_offsets on a FindCoordinator
			// and loads the group's partition after it; clients retry.
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey = group
			c.roundTrip(fc)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r.ErrorCode != 0 {
			t.Fatalf("join: %s", errName(r.ErrorCode))
		}
		got = r.HeartbeatIntervalMillis
		leave := kmsg.NewPtrShareGroupHeartbeatRequest()
		leave.Version, leave.GroupID, leave.MemberID, leave.MemberEpoch = 1, group, hb.MemberID, -1
		c.roundTrip(leave)
		if got == 6000 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("a member joining the group was told a heartbeat interval of %d ms, want the group's 6000", got)
}

// TestShareIsolationLevel: share.isolation.level=read_committed (Kafka 4.2
// group config) delivers committed transactional records only: the
// records of an aborted transaction are never delivered and an open
// transaction holds delivery back at the last stable offset until it
// commits; a
// read_uncommitted group (the default) gets the aborted records too.
// Before, this broker refused the config. Also against Apache Kafka 4.2.
func TestShareIsolationLevel(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareIsolationLevel(t, startBroker(t).Addr()) })
	t.Run("apache-kafka", func(t *testing.T) { testShareIsolationLevel(t, referenceKafka(t)) })
}

func testShareIsolationLevel(t *testing.T, addr string) {
	adm := newAdmin(t, addr)
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	txn := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("share-iso-"+topic))
	inTxn := func(commit bool, values ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := txn.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(testCtx(t, opTimeout), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	inTxn(true, "c-0", "c-1")
	inTxn(false, "a-0", "a-1")
	inTxn(true, "c-2")
	cl := newClient(t, addr)
	consumeFor := func(group string, n int, d time.Duration) []string {
		t.Helper()
		share := newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond))
		defer share.Close()
		var got []string
		ctx := testCtx(t, d)
		for len(got) < n && ctx.Err() == nil {
			share.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				got = append(got, string(r.Value))
				r.Ack(kgo.AckAccept)
			})
		}
		_ = share.FlushAcks(testCtx(t, opTimeout))
		slices.Sort(got)
		return got
	}
	consume := func(group string, n int) []string { return consumeFor(group, n, 20*time.Second) }
	for _, g := range []struct{ name, level, want string }{
		{"committed." + topic, "read_committed", "c-0,c-1,c-2"},
		{"uncommitted." + topic, "read_uncommitted", "a-0,a-1,c-0,c-1,c-2"},
	} {
		if code := alterShareGroupConfig(t, cl, g.name, "share.auto.offset.reset", "earliest"); code != 0 {
			t.Fatalf("share.auto.offset.reset: %s", errName(code))
		}
		if code := alterShareGroupConfig(t, cl, g.name, "share.isolation.level", g.level); code != 0 {
			t.Fatalf("share.isolation.level=%s: %s", g.level, errName(code))
		}
	}
	if code := alterShareGroupConfig(t, cl, "any."+topic, "share.isolation.level", "serializable"); code != kerr.InvalidConfig.Code {
		t.Errorf("share.isolation.level=serializable: %s, want INVALID_CONFIG", errName(code))
	}
	time.Sleep(500 * time.Millisecond) // Apache Kafka applies group configs through its metadata log
	for _, g := range []struct{ name, want string }{
		{"committed." + topic, "c-0,c-1,c-2"},
		{"uncommitted." + topic, "a-0,a-1,c-0,c-1,c-2"},
	} {
		if got := strings.Join(consume(g.name, strings.Count(g.want, ",")+1), ","); got != g.want {
			t.Errorf("share group %s got %s, want %s", g.name, got, g.want)
		}
	}
	// An open transaction holds read_committed delivery at the last
	// stable offset until it commits.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Value: []byte("o-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := consumeFor("committed."+topic, 1, 3*time.Second); len(got) != 0 {
		t.Errorf("read_committed got %v from an open transaction", got)
	}
	if err := txn.EndTransaction(testCtx(t, opTimeout), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(consume("committed."+topic, 1), ","); got != "o-0" {
		t.Errorf("read_committed after the commit got %s, want o-0", got)
	}
}

// TestShareAcquireModes: ShareFetch v2 share_acquire_mode (KIP-1206) on
// batches of 4 records with max_records 5: record_limit (1) acquires
// exactly 5 records, batch_optimized (0, the default) whole batches, so
// 8. Also against Apache Kafka 4.2.
func TestShareAcquireModes(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareAcquireModes(t, startBroker(t).Addr()) })
	t.Run("apache-kafka", func(t *testing.T) { testShareAcquireModes(t, referenceKafka(t)) })
}

func testShareAcquireModes(t *testing.T, addr string) {
	adm := newAdmin(t, addr)
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Second))
	for b := range 4 {
		var rs []*kgo.Record
		for i := range 4 {
			rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("b%d-%d", b, i))})
		}
		if err := cl.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []struct {
		name    string
		version int16
		mode    int8
		want    int64
	}{{"record_limit", 2, 1, 5}, {"batch_optimized", 2, 0, 8}, {"v1", 1, 0, 8}} {
		group := mode.name + "." + topic
		if code := alterShareGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest"); code != 0 {
			t.Fatalf("share.auto.offset.reset: %s", errName(code))
		}
		time.Sleep(500 * time.Millisecond) // Apache Kafka applies group configs through its metadata log
		m := newRawShareMember(t, addr, group, topic, fmt.Sprintf("%s-member-0000000001", mode.name))
		var got int64
		for try := 0; got == 0 && try < 10; try++ {
			req := kmsg.NewPtrShareFetchRequest()
			req.Version = mode.version
			req.GroupID, req.MemberID = &m.group, &m.id
			req.ShareSessionEpoch = m.epoch
			req.MaxWaitMillis, req.MaxBytes, req.MaxRecords, req.BatchSize, req.ShareAcquireMode = 1000, 1<<20, 5, 5, mode.mode
			if m.epoch == 0 {
				tp := kmsg.NewShareFetchRequestTopic()
				tp.TopicID = m.topicID
				rp := kmsg.NewShareFetchRequestTopicPartition()
				tp.Partitions = append(tp.Partitions, rp)
				req.Topics = append(req.Topics, tp)
			}
			resp := m.c.roundTrip(req).(*kmsg.ShareFetchResponse)
			if resp.ErrorCode != 0 {
				t.Fatalf("%s: ShareFetch: %s", mode.name, errName(resp.ErrorCode))
			}
			m.epoch++
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					for _, r := range p.AcquiredRecords {
						got += r.LastOffset - r.FirstOffset + 1
					}
				}
			}
		}
		if got != mode.want {
			t.Errorf("%s with max_records 5 over batches of 4: acquired %d records, want %d", mode.name, got, mode.want)
		}
	}
}

// TestShareBatchSize: ShareFetch's batch_size (v1+) over six stored
// batches of 4 records, max_records 100, batch_optimized: AcquiredRecords
// lists ranges of whole stored batches, a range closed before the batch
// that starts batch_size or more offsets after its first (Kafka 4.2
// SharePartition.createBatches): batch_size 5 gives 0-7, 8-15, 16-23;
// 1 gives one range per stored batch; 24 one range. Also against Apache
// Kafka 4.2.
func TestShareBatchSize(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareBatchSize(t, startBroker(t).Addr()) })
	t.Run("apache-kafka", func(t *testing.T) { testShareBatchSize(t, referenceKafka(t)) })
}

func testShareBatchSize(t *testing.T, addr string) {
	adm := newAdmin(t, addr)
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Second))
	for b := range 6 {
		var rs []*kgo.Record
		for i := range 4 {
			rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("b%d-%d", b, i))})
		}
		if err := cl.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		batchSize int32
		want      string
	}{
		{5, "[0-7 8-15 16-23]"},
		{1, "[0-3 4-7 8-11 12-15 16-19 20-23]"},
		{10, "[0-11 12-23]"},
		{24, "[0-23]"},
	} {
		group := fmt.Sprintf("bs%d.%s", c.batchSize, topic)
		if code := alterShareGroupConfig(t, cl, group, "share.auto.offset.reset", "earliest"); code != 0 {
			t.Fatalf("share.auto.offset.reset: %s", errName(code))
		}
		time.Sleep(500 * time.Millisecond) // Apache Kafka applies group configs through its metadata log
		m := newRawShareMember(t, addr, group, topic, fmt.Sprintf("bs%d-member-00000000001", c.batchSize))
		var got []string
		for try := 0; len(got) == 0 && try < 10; try++ {
			req := kmsg.NewPtrShareFetchRequest()
			req.Version = 2
			req.GroupID, req.MemberID = &m.group, &m.id
			req.ShareSessionEpoch = m.epoch
			req.MaxWaitMillis, req.MaxBytes, req.MaxRecords, req.BatchSize, req.ShareAcquireMode = 1000, 1<<20, 100, c.batchSize, 0
			if m.epoch == 0 {
				tp := kmsg.NewShareFetchRequestTopic()
				tp.TopicID = m.topicID
				tp.Partitions = append(tp.Partitions, kmsg.NewShareFetchRequestTopicPartition())
				req.Topics = append(req.Topics, tp)
			}
			resp := m.c.roundTrip(req).(*kmsg.ShareFetchResponse)
			if resp.ErrorCode != 0 {
				t.Fatalf("batch_size %d: ShareFetch: %s", c.batchSize, errName(resp.ErrorCode))
			}
			m.epoch++
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					for _, r := range p.AcquiredRecords {
						got = append(got, fmt.Sprintf("%d-%d", r.FirstOffset, r.LastOffset))
					}
				}
			}
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("batch_size %d over six batches of 4: AcquiredRecords %s, want %s", c.batchSize, s, c.want)
		}
	}
}
