package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testCluster is three brokers of one cluster, run in this process on
// loopback, each stoppable and restartable on its data directory.
type testCluster struct {
	t    *testing.T
	cfgs map[int32]*Config
	stop map[int32]func()
}

// startTestCluster starts three brokers, each config changed by opts.
func startTestCluster(t *testing.T, opts ...func(*Config)) *testCluster {
	var peers []string
	tc := &testCluster{t: t, cfgs: map[int32]*Config{}, stop: map[int32]func(){}}
	for id := int32(1); id <= 3; id++ {
		cfg := defaultConfig()
		cfg.DataDir, cfg.NodeID = t.TempDir(), id
		cfg.KafkaAddr, cfg.HTTPAddr = freeAddr(t), freeAddr(t)
		cfg.MemtableSize, cfg.CacheSize = 4<<20, 8<<20
		for _, o := range opts {
			o(cfg)
		}
		tc.cfgs[id] = cfg
		peers = append(peers, fmt.Sprintf("%d@%s", id, freeAddr(t)))
	}
	for id := int32(1); id <= 3; id++ {
		tc.cfgs[id].ClusterPeers = strings.Join(peers, ",")
		tc.start(id)
	}
	t.Cleanup(func() {
		for _, stop := range tc.stop {
			stop()
		}
	})
	return tc
}

// start runs broker id until stopped (tc.stop[id]) or the test ends.
func (tc *testCluster) start(id int32) {
	t := tc.t
	cfg := tc.cfgs[id]
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	lg := zerolog.Nop()
	if os.Getenv("VMQ_TEST_LOG") != "" { // the brokers' logs on stderr, to debug a cluster test
		lg = zerolog.New(os.Stderr).With().Int32("node", id).Logger()
	}
	go func() { done <- run(ctx, cfg, lg) }()
	stopped := false
	tc.stop[id] = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker %d: %v", id, err)
		}
	}
}

func (tc *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	var seeds []string
	for id := int32(1); id <= 3; id++ {
		seeds = append(seeds, tc.cfgs[id].KafkaAddr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(cl.Close)
	return cl
}

// metadataOf asks broker id itself for the metadata of every topic.
func metadataOf(ctx context.Context, cl *kgo.Client, id int32) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	return resp, err
}

// clusterSummary is what must be identical on every broker: brokers,
// controller, cluster ID, and each cluster topic's ID and leaders.
func clusterSummary(m *kmsg.MetadataResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s controller %d brokers", *m.ClusterID, m.ControllerID)
	for _, br := range m.Brokers {
		fmt.Fprintf(&b, " %d@%s:%d", br.NodeID, br.Host, br.Port)
	}
	topics := slices.Clone(m.Topics)
	slices.SortFunc(topics, func(a, c kmsg.MetadataResponseTopic) int { return strings.Compare(*a.Topic, *c.Topic) })
	for _, t := range topics {
		if strings.HasPrefix(*t.Topic, "__") {
			continue
		}
		fmt.Fprintf(&b, "; %s %x:", *t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, " %d->%d%v%v", p.Partition, p.Leader, p.Replicas, p.ISR)
		}
	}
	return b.String()
}

// waitAgreed waits until the three brokers answer Metadata alike, with
// three brokers and a controller, and returns the summary; check tells
// whether the summary is the one awaited.
func (tc *testCluster) waitAgreed(ctx context.Context, cl *kgo.Client, check func(*kmsg.MetadataResponse) bool) *kmsg.MetadataResponse {
	tc.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last []string
	for {
		last = last[:0]
		var first *kmsg.MetadataResponse
		ok := true
		for id := int32(1); id <= 3; id++ {
			m, err := metadataOf(ctx, cl, id)
			if err != nil {
				last, ok = append(last, err.Error()), false
				continue
			}
			last = append(last, clusterSummary(m))
			if first == nil {
				first = m
			}
			if len(m.Brokers) != 3 || m.ControllerID < 1 || !check(m) || last[len(last)-1] != last[0] {
				ok = false
			}
		}
		if ok {
			return first
		}
		if time.Now().After(deadline) {
			tc.t.Fatalf("the brokers' metadata did not agree:\n%s", strings.Join(last, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func topicOf(m *kmsg.MetadataResponse, name string) (kmsg.MetadataResponseTopic, bool) {
	for _, t := range m.Topics {
		if t.Topic != nil && *t.Topic == name {
			return t, true
		}
	}
	return kmsg.MetadataResponseTopic{}, false
}

// TestClusterKafkaThreeBrokers: three brokers form one Kafka cluster whose
// metadata is the metadata group's. A 6-partition topic created through
// a broker that is not the controller is placed round robin (each broker
// leads two partitions) and every broker's Metadata is identical; RF 4 is
// refused; franz-go produces to every partition (routed to the leaders)
// and a consumer group reads every record back and commits through its
// coordinator; a non-leader answers NOT_LEADER_OR_FOLLOWER, a
// non-coordinator NOT_COORDINATOR; a broker restarted serves the same
// metadata and its partitions' records; the topic is deleted through
// another broker and disappears everywhere. DescribeCluster agrees;
// IncrementalAlterConfigs and CreatePartitions sent to a follower reach
// every broker, and so does auto-creation; with two brokers stopped, a
// creation is refused.
//
// The restart pins a data loss found while building it: the restarted
// broker restored its own older metadata snapshot and synced its topic
// store to it, deleting the topics created after it with their records
// (TestClusterTopicsReplaySafe).
func TestClusterKafkaThreeBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	m := tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	controller := m.ControllerID
	follower := controller%3 + 1 // not the controller

	// Create through a follower: it proposes to the group.
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "orders", 6, -1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}
	rf3 := kmsg.NewCreateTopicsRequestTopic()
	rf3.Topic, rf3.NumPartitions, rf3.ReplicationFactor = "replicated", 3, 4
	create.Topics = []kmsg.CreateTopicsRequestTopic{ct, rf3}
	create.TimeoutMillis = 30000
	cresp, err := create.RequestWith(ctx, cl.Broker(int(follower)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create through broker %d: %v %v", follower, err, cresp.Topics[0].ErrorMessage)
	}
	if got := cresp.Topics[1]; got.ErrorCode != kerr.InvalidReplicationFactor.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "replication factor 4, 3 unfenced registered broker(s)") {
		t.Fatalf("RF 4: code %d message %v; want INVALID_REPLICATION_FACTOR saying there are 3 brokers", got.ErrorCode, got.ErrorMessage)
	}
	m = tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, "orders"); return ok })
	orders, _ := topicOf(m, "orders")
	if orders.TopicID != cresp.Topics[0].TopicID || len(orders.Partitions) != 6 {
		t.Fatalf("orders: id %x (created %x), %d partitions", orders.TopicID, cresp.Topics[0].TopicID, len(orders.Partitions))
	}
	leads := map[int32]int{}
	leaderOf := map[int32]int32{}
	for _, p := range orders.Partitions {
		leads[p.Leader]++
		leaderOf[p.Partition] = p.Leader
		if !slices.Equal(p.Replicas, []int32{p.Leader}) || !slices.Equal(p.ISR, []int32{p.Leader}) {
			t.Fatalf("partition %d: replicas %v isr %v, want only the leader %d", p.Partition, p.Replicas, p.ISR, p.Leader)
		}
	}
	if leads[1] != 2 || leads[2] != 2 || leads[3] != 2 {
		t.Fatalf("leaders of the 6 partitions: %v; want two per broker", leads)
	}
	if _, ok := topicOf(m, "replicated"); ok {
		t.Fatal("the refused RF 4 topic exists")
	}
	// The configs are the same on every broker (DescribeConfigs of each).
	for id := int32(1); id <= 3; id++ {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "orders", []string{"retention.ms"}
		dc.Resources = append(dc.Resources, r)
		resp, err := dc.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 || *resp.Resources[0].Configs[0].Value != "3600000" {
			t.Fatalf("broker %d: retention.ms of orders: %v %+v", id, err, resp)
		}
	}

	// DescribeCluster on each broker: the three brokers, the controller.
	for id := int32(1); id <= 3; id++ {
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(dc.Brokers) != 3 || dc.ControllerID < 1 || dc.ControllerID > 3 || dc.ClusterID != *m.ClusterID {
			t.Fatalf("DescribeCluster of broker %d: %v %+v; want 3 brokers, a controller, cluster %s", id, err, dc, *m.ClusterID)
		}
	}
	// Configs and partitions change through the group from any broker.
	adm := kadm.NewClient(cl)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: kmsg.StringPtr("7200000")}}
	alter.Resources = append(alter.Resources, ar)
	if aresp, err := alter.RequestWith(ctx, cl.Broker(int(follower%3+1))); err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs through broker %d: %v %+v", follower%3+1, err, aresp)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "scratch", 4
	cp.Topics, cp.TimeoutMillis = append(cp.Topics, cpt), 30000
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "scratch"); err != nil {
		t.Fatal(err)
	}
	// Like Kafka's, a broker learns of a topic when it applies the record.
	tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, "scratch"); return ok })
	if cresp, err := cp.RequestWith(ctx, cl.Broker(int(follower))); err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions through broker %d: %v %+v", follower, err, cresp)
	}
	m = tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool {
		s, ok := topicOf(m, "scratch")
		return ok && len(s.Partitions) == 4
	})
	scratch, _ := topicOf(m, "scratch")
	scratchLeaders := map[int32]bool{}
	for _, p := range scratch.Partitions {
		scratchLeaders[p.Leader] = true
	}
	if len(scratchLeaders) != 3 {
		t.Fatalf("scratch's 4 partitions are led by %v; want all three brokers", scratchLeaders)
	}
	for id := int32(1); id <= 3; id++ {
		deadline := time.Now().Add(30 * time.Second)
		for {
			dc := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, "orders", []string{"retention.ms"}
			dc.Resources = append(dc.Resources, r)
			resp, err := dc.RequestWith(ctx, cl.Broker(int(id)))
			if err == nil && len(resp.Resources) == 1 && len(resp.Resources[0].Configs) == 1 && *resp.Resources[0].Configs[0].Value == "7200000" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d: retention.ms of orders after the change: %v %+v", id, err, resp)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Auto-creation (Metadata with allow_auto_topic_creation) on a
	// follower goes through the group too.
	auto := kmsg.NewPtrMetadataRequest()
	auto.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto-created")}}
	auto.AllowAutoTopicCreation = true
	if aresp, err := auto.RequestWith(ctx, cl.Broker(int(follower))); err != nil || len(aresp.Topics) != 1 || aresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("auto-creation through broker %d: %v %+v", follower, err, aresp)
	}
	tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, "auto-created"); return ok })

	// Produce to every partition: franz-go routes each to its leader.
	const perPartition = 10
	producer := tc.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var records []*kgo.Record
	for p := int32(0); p < 6; p++ {
		for i := 0; i < perPartition; i++ {
			records = append(records, &kgo.Record{Topic: "orders", Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A broker that does not lead a partition refuses it.
	var notLed int32
	var other int32
	for p, l := range leaderOf {
		notLed, other = p, l%3+1
		break
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "orders"
	prp := kmsg.NewProduceRequestTopicPartition()
	prp.Partition = notLed
	prp.Records = oneRecordBatch(t)
	prt.Partitions = append(prt.Partitions, prp)
	pr.Topics = append(pr.Topics, prt)
	presp, err := pr.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil {
		t.Fatal(err)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce of partition %d to broker %d (leader %d): code %d, want NOT_LEADER_OR_FOLLOWER", notLed, other, leaderOf[notLed], code)
	}
	fr := kmsg.NewPtrListOffsetsRequest()
	frt := kmsg.NewListOffsetsRequestTopic()
	frt.Topic = "orders"
	frp := kmsg.NewListOffsetsRequestTopicPartition()
	frp.Partition, frp.Timestamp = notLed, -1
	frt.Partitions = append(frt.Partitions, frp)
	fr.Topics = append(fr.Topics, frt)
	lresp, err := fr.RequestWith(ctx, cl.Broker(int(other)))
	if err != nil || lresp.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("list offsets of partition %d on broker %d: %v %+v; want NOT_LEADER_OR_FOLLOWER", notLed, other, err, lresp)
	}

	// A consumer group reads everything and commits through its coordinator.
	const group = "order-readers"
	consumer := tc.client(kgo.ConsumeTopics("orders"), kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := map[string]bool{}
	for len(got) < len(records) {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("poll after %d records: %v", len(got), err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("p%d-", r.Partition); !strings.HasPrefix(string(r.Value), want) {
				t.Fatalf("record %q read from partition %d", r.Value, r.Partition)
			}
			got[string(r.Value)] = true
		})
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		if o, ok := offsets.Lookup("orders", p); !ok || o.At != perPartition {
			t.Fatalf("committed offset of partition %d: %+v %v, want %d", p, o, ok, perPartition)
		}
	}
	coordinators, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	coordinator := coordinators[group].Coordinator.NodeID
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}} // v8+
	ofresp, err := of.RequestWith(ctx, cl.Broker(int(coordinator%3+1)))
	if err != nil || len(ofresp.Groups) != 1 || ofresp.Groups[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("offset fetch of %s on broker %d (coordinator %d): %v %+v; want NOT_COORDINATOR", group, coordinator%3+1, coordinator, err, ofresp)
	}
	consumer.Close()

	// A restarted broker serves the same metadata and its records.
	restarted := leaderOf[0]
	before := clusterSummary(tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true }))
	tc.stop[restarted]()
	tc.start(restarted)
	m = tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool {
		o, ok := topicOf(m, "orders")
		return ok && o.TopicID == orders.TopicID
	})
	if after := clusterSummary(m); strings.SplitN(after, "; ", 2)[1] != strings.SplitN(before, "; ", 2)[1] {
		t.Fatalf("topics after broker %d restarted:\n%s\nbefore:\n%s", restarted, after, before)
	}
	reader := tc.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	n := 0
	for n < perPartition {
		fetches := reader.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("reading partition 0 from restarted broker %d: %v", restarted, err)
		}
		n += fetches.NumRecords()
	}

	// Delete through a broker other than the one that created it.
	deleter := follower%3 + 1
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"orders"}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	del.TimeoutMillis = 30000
	dresp, err := del.RequestWith(ctx, cl.Broker(int(deleter)))
	if err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete through broker %d: %v %+v", deleter, err, dresp)
	}
	tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, "orders"); return !ok })

	// Without a quorum a change is refused, not pretended: the broker left
	// answers NOT_CONTROLLER (no leader known) or REQUEST_TIMED_OUT.
	alone := int32(1)
	tc.stop[2]()
	tc.stop[3]()
	late := kmsg.NewPtrCreateTopicsRequest()
	lt := kmsg.NewCreateTopicsRequestTopic()
	lt.Topic, lt.NumPartitions, lt.ReplicationFactor = "late", 1, 1
	late.Topics, late.TimeoutMillis = append(late.Topics, lt), 2000
	lone := tc.client(kgo.SeedBrokers(tc.cfgs[alone].KafkaAddr))
	lresp2, err := late.RequestWith(ctx, lone.Broker(int(alone)))
	if err != nil {
		t.Fatal(err)
	}
	if code := lresp2.Topics[0].ErrorCode; code != kerr.NotController.Code && code != kerr.RequestTimedOut.Code {
		t.Fatalf("create without a quorum: code %d, want NOT_CONTROLLER or REQUEST_TIMED_OUT", code)
	}
}

// oneRecordBatch is a valid v2 record batch of one record.
func oneRecordBatch(t *testing.T) []byte {
	t.Helper()
	rec := kmsg.NewRecord()
	rec.Value = []byte("x")
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body after the length varint (1 byte while 0)
	b := kmsg.NewRecordBatch()
	b.Magic = 2
	b.FirstTimestamp, b.MaxTimestamp = time.Now().UnixMilli(), time.Now().UnixMilli()
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.NumRecords = 1
	b.Records = rec.AppendTo(nil)
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // length after the length field
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC-32C of attributes onwards
	return raw
}
