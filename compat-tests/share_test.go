package compattests

// Share groups (KIP-932, issue 10 part 2) with franz-go's share consumer
// (kgo.ShareGroup, Record.Ack): three members on a plain topic accept
// every record exactly once overall; a member that acquired records and
// went silent (no ack, connection kept open) loses them when their
// acquisition lock expires and they are delivered again; a REJECTed record
// is never delivered again; a record RELEASEd every time is delivered
// exactly group-share-delivery-count-limit times; the group shows in
// ListGroups (type share), ShareGroupDescribe, DescribeGroups (Dead, as
// Kafka 4) and `broker groups list`. A broker killed with kill -9 keeps
// every share-partition's state: accepted records are never delivered
// again, held ones come back once their lock expires with their delivery
// count.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareBroker starts a broker with short share-group timers: 3s locks,
// delivery limit 3, share groups starting at the earliest offset.
func shareBroker(t *testing.T, extra ...string) *brokerProc {
	return startBroker(t, withArgs(append([]string{
		"--group-share-record-lock-duration", "3s",
		"--group-share-delivery-count-limit", "3",
		"--group-share-auto-offset-reset", "earliest",
		"--group-consumer-session-timeout", "6s",
		"--group-consumer-heartbeat-interval", "500ms",
	}, extra...)...))
}

// shareLedger counts deliveries and acceptances per value.
type shareLedger struct {
	mu         sync.Mutex
	accepted   map[string]int
	deliveries map[string][]int32 // delivery counts seen, in order
	byMember   map[string]int
}

func newShareLedger() *shareLedger {
	return &shareLedger{accepted: map[string]int{}, deliveries: map[string][]int32{}, byMember: map[string]int{}}
}

func (l *shareLedger) snapshot() (accepted map[string]int, deliveries map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	accepted, deliveries = map[string]int{}, map[string][]int32{}
	for k, v := range l.accepted {
		accepted[k] = v
	}
	for k, v := range l.deliveries {
		deliveries[k] = append([]int32(nil), v...)
	}
	return accepted, deliveries
}

// runShareMember polls with a kgo share consumer until ctx ends: values
// "reject-*" are REJECTed, "poison-*" RELEASEd, the rest ACCEPTed.
func runShareMember(t *testing.T, ctx context.Context, addr, group, topic, name string, led *shareLedger) *kgo.Client {
	cl := newClient(t, addr, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name), kgo.FetchMaxWait(500*time.Millisecond))
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				led.mu.Lock()
				led.deliveries[v] = append(led.deliveries[v], r.DeliveryCount())
				switch {
				case strings.HasPrefix(v, "reject-"):
					r.Ack(kgo.AckReject)
				case strings.HasPrefix(v, "poison-"):
					r.Ack(kgo.AckRelease)
				default:
					r.Ack(kgo.AckAccept)
					led.accepted[v]++
					led.byMember[name]++
				}
				led.mu.Unlock()
			})
			_ = cl.FlushAcks(ctx)
		}
	}()
	return cl
}

// rawShareMember is a share group member speaking the protocol itself
// over one connection: it joins, opens a share session and acquires.
type rawShareMember struct {
	t       *testing.T
	c       *rawConn
	group   string
	id      string
	epoch   int32 // share session epoch of the next request
	topicID [16]byte
}

func newRawShareMember(t *testing.T, addr, group, topic, id string) *rawShareMember {
	m := &rawShareMember{t: t, c: dialRaw(t, addr), group: group, id: id}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = 1, group, id, 0, []string{topic}
	var resp *kmsg.ShareGroupHeartbeatResponse
	for try := 0; ; try++ {
		resp = m.c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
		// Apache Kafka creates __consumer_offsets on first use.
		if (resp.ErrorCode != kerr.NotCoordinator.Code && resp.ErrorCode != kerr.CoordinatorNotAvailable.Code && resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code) || try == 60 {
			break
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = group
		m.c.roundTrip(fc)
		time.Sleep(250 * time.Millisecond)
	}
	// Apache Kafka assigns after the join's answer: heartbeat until the
	// assignment arrives.
	for try := 0; resp.ErrorCode == 0 && (resp.Assignment == nil || len(resp.Assignment.TopicPartitions) == 0) && try < 40; try++ {
		time.Sleep(250 * time.Millisecond)
		hb.MemberEpoch, hb.SubscribedTopicNames = resp.MemberEpoch, nil
		resp = m.c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
	}
	if resp.ErrorCode != 0 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 {
		t.Fatalf("raw member join: error %s, assignment %+v", errName(resp.ErrorCode), resp.Assignment)
	}
	m.topicID = resp.Assignment.TopicPartitions[0].TopicID
	return m
}

// fetch sends a ShareFetch v2 in record_limit mode (exactly maxRecords at
// most) for partitions (none: the session's) with acks, and returns the
// acquired offsets per partition.
func (m *rawShareMember) fetch(partitions []int32, acks map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, maxRecords int32) (*kmsg.ShareFetchResponse, map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = &m.group, &m.id
	req.ShareSessionEpoch = m.epoch
	req.MaxWaitMillis, req.MaxBytes, req.MaxRecords, req.BatchSize = 2000, 1<<20, maxRecords, maxRecords
	req.ShareAcquireMode = 1 // record_limit
	if len(partitions) > 0 {
		topic := kmsg.NewShareFetchRequestTopic()
		topic.TopicID = m.topicID
		for _, p := range partitions {
			rp := kmsg.NewShareFetchRequestTopicPartition()
			rp.Partition = p
			rp.AcknowledgementBatches = acks[p]
			topic.Partitions = append(topic.Partitions, rp)
		}
		req.Topics = []kmsg.ShareFetchRequestTopic{topic}
	}
	resp := m.c.roundTrip(req).(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		m.epoch++
	}
	out := map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = append(out[p.Partition], p.AcquiredRecords...)
		}
	}
	return resp, out
}

// TestShareGroupFranz: three kgo share consumers and one silent member on
// a plain topic of 3 partitions. Also against Apache Kafka 4.2.
func TestShareGroupFranz(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareGroupFranz(t, shareBroker(t), false) })
	t.Run("apache-kafka", func(t *testing.T) { testShareGroupFranz(t, &brokerProc{t: t, kafkaAddr: referenceKafka(t)}, true) })
}

func testShareGroupFranz(t *testing.T, b *brokerProc, ref bool) {
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 3, nil)
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(values ...string) {
		t.Helper()
		rs := make([]*kgo.Record, len(values))
		for i, v := range values {
			rs[i] = &kgo.Record{Value: []byte(v), Partition: int32(i % 3)}
		}
		if err := prod.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	var plain []string
	for i := range 300 {
		plain = append(plain, fmt.Sprintf("v-%03d", i))
	}

	// The silent member opens its session on the empty topic (so the
	// group starts at offset 0 with share.auto.offset.reset=latest),
	// takes what it can of the first 100 records, then never
	// acknowledges nor heartbeats; its connection stays open.
	silent := newRawShareMember(t, b.Addr(), group, topic, "silent-member-00000001")
	if resp, _ := silent.fetch([]int32{0, 1, 2}, nil, 500); resp.ErrorCode != 0 {
		t.Fatalf("opening the share session: %s", errName(resp.ErrorCode))
	}
	produce(plain[:100]...)
	held := map[int32][]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
	heldCount := 0
	for try := 0; try < 5 && heldCount < 100; try++ {
		_, got := silent.fetch(nil, nil, 500)
		for p, rs := range got {
			held[p] = append(held[p], rs...)
			for _, r := range rs {
				heldCount += int(r.LastOffset - r.FirstOffset + 1)
			}
		}
	}
	if heldCount == 0 {
		t.Fatal("the silent member acquired nothing")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led := newShareLedger()
	for i := range 3 {
		runShareMember(t, ctx, b.Addr(), group, topic, fmt.Sprintf("m%d", i), led)
	}
	produce(plain[100:]...)
	produce("reject-1", "reject-2", "reject-3", "poison-1", "poison-2", "poison-3")

	deadline := time.Now().Add(groupWait)
	for {
		accepted, deliveries := led.snapshot()
		done := len(accepted) == len(plain)
		for _, v := range []string{"poison-1", "poison-2", "poison-3"} {
			done = done && len(deliveries[v]) == 3
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d of %d records, poison deliveries %v %v %v", len(accepted), len(plain),
				deliveries["poison-1"], deliveries["poison-2"], deliveries["poison-3"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let redeliveries that should not happen show up: one lock and a bit.
	time.Sleep(4 * time.Second)
	accepted, deliveries := led.snapshot()
	for _, v := range plain {
		if accepted[v] != 1 {
			t.Errorf("%s accepted %d times, want exactly once", v, accepted[v])
		}
	}
	for _, v := range []string{"reject-1", "reject-2", "reject-3"} {
		if got := deliveries[v]; len(got) != 1 || got[0] != 1 {
			t.Errorf("%s delivered with counts %v; a REJECTed record is delivered once", v, got)
		}
	}
	for _, v := range []string{"poison-1", "poison-2", "poison-3"} {
		if got := deliveries[v]; fmt.Sprint(got) != "[1 2 3]" {
			t.Errorf("%s delivered with counts %v, want [1 2 3] (delivery limit 3)", v, got)
		}
	}
	redelivered := 0
	for _, v := range plain[:100] {
		if d := deliveries[v]; len(d) > 0 && d[0] == 2 {
			redelivered++
		}
	}
	if redelivered != heldCount {
		t.Errorf("%d records first delivered with count 2, want the %d the silent member held", redelivered, heldCount)
	}
	led.mu.Lock()
	t.Logf("accepted per member: %v; the silent member held %d", led.byMember, heldCount)
	led.mu.Unlock()

	// The silent member's late acknowledgement changes nothing: its
	// records went to others and were accepted (offsets below the start
	// offset are skipped without error, as Kafka does; a held one would be
	// INVALID_RECORD_STATE). Fenced by now (6s without heartbeat), its
	// session may be gone (SHARE_SESSION_NOT_FOUND).
	var acks = map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{}
	for p, rs := range held {
		for _, r := range rs {
			acks[p] = append(acks[p], kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: r.FirstOffset, LastOffset: r.LastOffset, AcknowledgeTypes: []int8{1}})
		}
	}
	resp, _ := silent.fetch(partitionsOf(acks), acks, 1)
	if resp.ErrorCode != 0 && resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("late ack: %s, want no error or SHARE_SESSION_NOT_FOUND", errName(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if c := p.AcknowledgeErrorCode; c != 0 && c != kerr.InvalidRecordState.Code {
				t.Errorf("late ack of partition %d: %s, want none or INVALID_RECORD_STATE", p.Partition, errName(c))
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	if again, _ := led.snapshot(); len(again) != len(accepted) {
		t.Errorf("after the late ack %d values accepted, before %d", len(again), len(accepted))
	}
	checkShareGroupViews(t, b, group, topic, ref)
}

func partitionsOf[T any](m map[int32]T) []int32 {
	var out []int32
	for p := range m {
		out = append(out, p)
	}
	return out
}

// checkShareGroupViews: ListGroups, ShareGroupDescribe, DescribeGroups and
// the CLI show the share group.
func checkShareGroupViews(t *testing.T, b *brokerProc, group, topic string, ref bool) {
	t.Helper()
	cl := newClient(t, b.Addr())
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"share"}
	lr, err := lg.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range lr.Groups {
		found = found || g.Group == group && g.GroupType == "share" && g.ProtocolType == "share"
	}
	if !found {
		t.Errorf("ListGroups(types=share) = %+v, want %s of type share", lr.Groups, group)
	}
	dr := kmsg.NewPtrShareGroupDescribeRequest()
	dr.GroupIDs = []string{group, "no-such-share-group"}
	d, err := dr.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]kmsg.ShareGroupDescribeResponseGroup{}
	for _, g := range d.Groups {
		byID[g.GroupID] = g
	}
	if g := byID[group]; g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) < 3 {
		t.Errorf("ShareGroupDescribe: error %s state %q, %d members; want Stable with at least 3", errName(g.ErrorCode), g.GroupState, len(g.Members))
	} else {
		// This broker assigns every partition to every member; Kafka's
		// simple assignor spreads them (each partition to some member).
		union := map[int32]bool{}
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				if tp.Topic != topic {
					t.Errorf("member %s assigned topic %q, want %s", m.MemberID, tp.Topic, topic)
				}
				for _, p := range tp.Partitions {
					union[p] = true
				}
				if !ref && len(tp.Partitions) != 3 {
					t.Errorf("member %s assigned %v, want all 3 partitions", m.MemberID, tp.Partitions)
				}
			}
		}
		if len(union) != 3 {
			t.Errorf("the members' assignments cover partitions %v, want all 3", union)
		}
	}
	if g, ok := byID["no-such-share-group"]; !ok || g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ShareGroupDescribe of a missing group: %s, want GROUP_ID_NOT_FOUND", errName(g.ErrorCode))
	}
	// DescribeShareGroupOffsets: every record is final, so each start
	// offset is the partition's end offset and the lag 0 (KIP-1226).
	ends := endOffsets(t, newAdmin(t, b.Addr()), topic)
	so := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	sg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	sg.GroupID = group
	so.Groups = append(so.Groups, sg)
	var sor *kmsg.DescribeShareGroupOffsetsResponse
	settled := func() bool {
		for _, p := range sor.Groups[0].Topics[0].Partitions {
			if p.StartOffset != ends[p.Partition] {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		sor, err = so.RequestWith(testCtx(t, opTimeout), cl)
		if err != nil || len(sor.Groups) != 1 || sor.Groups[0].ErrorCode != 0 || len(sor.Groups[0].Topics) != 1 {
			t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, sor)
		}
		if settled() || ref || time.Now().After(deadline) {
			break
		}
	}
	// Apache Kafka 4.2 answers start offset 0 here (the share coordinator
	// moves its stored start offset lazily) with lag 0; this broker the
	// start offset it keeps.
	for _, p := range sor.Groups[0].Topics[0].Partitions {
		if p.ErrorCode != 0 || (!ref && p.StartOffset != ends[p.Partition]) || p.StartOffset < 0 || p.StartOffset > ends[p.Partition] || p.Lag != 0 {
			t.Errorf("DescribeShareGroupOffsets partition %d: start %d lag %d error %s; want start %d (the end offset), lag 0",
				p.Partition, p.StartOffset, p.Lag, errName(p.ErrorCode), ends[p.Partition])
		}
	}
	if n := len(sor.Groups[0].Topics[0].Partitions); n != 3 {
		t.Errorf("DescribeShareGroupOffsets listed %d partitions, want 3", n)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dgr, err := dg.RequestWith(testCtx(t, opTimeout), cl)
	if err != nil {
		t.Fatal(err)
	}
	if dgr.Groups[0].State != "Dead" {
		t.Errorf("DescribeGroups of a share group: state %q, want Dead (as Kafka 4)", dgr.Groups[0].State)
	}
	bs := "--bootstrap-server=" + b.Addr()
	out, errOut, _ := runCLI(t, "list", bs, "-o", "json")
	var listed []struct{ Group, State, Type string }
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("broker groups list -o json: %v\n%s%s", err, out, errOut)
	}
	if !slices.ContainsFunc(listed, func(g struct{ Group, State, Type string }) bool { return g.Group == group && g.Type == "share" }) {
		t.Errorf("broker groups list does not show the share group %s of type share:\n%s", group, out)
	}
	out, errOut, code := runCLI(t, "describe", bs, "-o", "json", group)
	var described []struct {
		Group        string
		ProtocolType string `json:"protocol_type"`
		Members      []struct {
			Assigned map[string][]int
		}
	}
	if err := json.Unmarshal([]byte(out), &described); err != nil || code != 0 {
		t.Fatalf("broker groups describe %s: exit %d, %v\n%s%s", group, code, err, out, errOut)
	}
	if len(described) != 1 || described[0].ProtocolType != "share" || len(described[0].Members) < 3 || (!ref && len(described[0].Members[0].Assigned[topic]) != 3) {
		t.Errorf("broker groups describe %s: %+v, want a share group whose members have all 3 partitions", group, described)
	}
	out, errOut, code = runCLI(t, "lag", bs, "-o", "json", group)
	var lags []struct {
		Topic          string
		Partition      int32
		Committed, End int64
		Lag            int64
	}
	if err := json.Unmarshal([]byte(out), &lags); err != nil || code != 0 || len(lags) != 3 {
		t.Fatalf("broker groups lag %s: exit %d, %v\n%s%s", group, code, err, out, errOut)
	}
	for _, l := range lags {
		if l.Topic != topic || l.Lag != 0 || l.End != ends[l.Partition] || (!ref && l.Committed != l.End) {
			t.Errorf("broker groups lag: %+v, want lag 0 at end offset %d", l, ends[l.Partition])
		}
	}
}

// TestShareGroupRestartKeepsState: a member acquires 10 of 20 records and
// accepts 5; the broker is killed (kill -9) and restarted; a kgo share
// consumer then gets the other 15 (the 5 held ones once their lock
// expired, at delivery count 2) and never an accepted one.
func TestShareGroupRestartKeepsState(t *testing.T) {
	t.Parallel()
	b := shareBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("r-%02d", i))})
	}
	if err := prod.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := newRawShareMember(t, b.Addr(), group, topic, "restart-member-0000001")
	resp, got := m.fetch([]int32{0}, nil, 10)
	if len(got[0]) != 1 || got[0][0].FirstOffset != 0 || got[0][0].LastOffset != 9 {
		t.Fatalf("acquired %+v (error %s), want offsets 0-9", got, errName(resp.ErrorCode))
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version = 1
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = &m.group, &m.id, m.epoch
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = m.topicID
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}}
	at.Partitions = append(at.Partitions, ap)
	ack.Topics = append(ack.Topics, at)
	ar := m.c.roundTrip(ack).(*kmsg.ShareAcknowledgeResponse)
	if ar.ErrorCode != 0 || len(ar.Topics) != 1 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge: %+v", ar)
	}

	b.Kill()
	b.Start()
	so := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	sg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	sg.GroupID = group
	so.Groups = append(so.Groups, sg)
	sor, err := so.RequestWith(testCtx(t, opTimeout), newClient(t, b.Addr()))
	if err != nil || len(sor.Groups) != 1 || len(sor.Groups[0].Topics) != 1 || len(sor.Groups[0].Topics[0].Partitions) != 1 {
		t.Fatalf("DescribeShareGroupOffsets after the restart: %v %+v", err, sor)
	}
	if p := sor.Groups[0].Topics[0].Partitions[0]; p.StartOffset != 5 || p.Lag != 15 {
		t.Errorf("after the restart: start offset %d lag %d, want 5 and 15", p.StartOffset, p.Lag)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led := newShareLedger()
	runShareMember(t, ctx, b.Addr(), group, topic, "after", led)
	deadline := time.Now().Add(groupWait)
	for {
		accepted, _ := led.snapshot()
		if len(accepted) >= 15 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart %d records accepted, want 15", len(accepted))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	accepted, deliveries := led.snapshot()
	for i := range 20 {
		v := fmt.Sprintf("r-%02d", i)
		switch {
		case i < 5:
			if len(deliveries[v]) != 0 {
				t.Errorf("%s was accepted before the restart but delivered again: %v", v, deliveries[v])
			}
		case i < 10:
			if d := deliveries[v]; accepted[v] != 1 || len(d) == 0 || d[0] != 2 {
				t.Errorf("%s (held at the kill): accepted %d, delivery counts %v, want once at count 2", v, accepted[v], d)
			}
		default:
			if d := deliveries[v]; accepted[v] != 1 || len(d) == 0 || d[0] != 1 {
				t.Errorf("%s: accepted %d, delivery counts %v, want once at count 1", v, accepted[v], d)
			}
		}
	}
}

// TestShareGroupConfigs: share.auto.offset.reset=earliest set on the group
// with IncrementalAlterConfigs (GROUP resource) before it exists makes a
// kgo share consumer get the records produced before it joined;
// DescribeConfigs shows the value as GROUP_CONFIG and the rest as defaults;
// a bad value and an unknown name get INVALID_CONFIG. On this broker the
// config survives a restart. Also against Apache Kafka 4.2.
func TestShareGroupConfigs(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareGroupConfigs(t, startBroker(t), false) })
	t.Run("apache-kafka", func(t *testing.T) { testShareGroupConfigs(t, &brokerProc{t: t, kafkaAddr: referenceKafka(t)}, true) })
}

func testShareGroupConfigs(t *testing.T, b *brokerProc, ref bool) {
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("c-%d", i))})
	}
	if err := cl.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alter := func(name string, value *string) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = name, value, kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(testCtx(t, opTimeout), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	if code := alter("share.auto.offset.reset", kmsg.StringPtr("earliest")); code != 0 {
		t.Fatalf("setting share.auto.offset.reset: %s", errName(code))
	}
	if code := alter("share.auto.offset.reset", kmsg.StringPtr("sometimes")); code != kerr.InvalidConfig.Code {
		t.Errorf("share.auto.offset.reset=sometimes: %s, want INVALID_CONFIG", errName(code))
	}
	if code := alter("no.such.group.config", kmsg.StringPtr("1")); code != kerr.InvalidConfig.Code {
		t.Errorf("an unknown group config: %s, want INVALID_CONFIG", errName(code))
	}
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(testCtx(t, opTimeout), newClient(t, b.Addr()))
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("DescribeConfigs of the group: %v %+v", err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	check := func(what string) {
		t.Helper()
		got := describe()
		// Apache Kafka applies a config change through its metadata log:
		// wait until it shows.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); got = describe() {
			if c := got["share.auto.offset.reset"]; c.Value != nil && *c.Value == "earliest" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if c := got["share.auto.offset.reset"]; c.Value == nil || *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s: share.auto.offset.reset %+v, want earliest from GROUP_CONFIG", what, c)
		}
		if c, ok := got["share.record.lock.duration.ms"]; !ok || c.Source == kmsg.ConfigSourceGroupConfig {
			t.Errorf("%s: share.record.lock.duration.ms %+v, want listed, not set on the group", what, c)
		}
		names := make([]string, 0, len(got))
		for n := range got {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Logf("%s: group configs %v", what, names)
	}
	check("after the change")
	if !ref {
		b.Restart()
		check("after a restart")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	led := newShareLedger()
	runShareMember(t, ctx, b.Addr(), group, topic, "late", led)
	deadline := time.Now().Add(groupWait)
	for {
		if accepted, _ := led.snapshot(); len(accepted) == 10 {
			break
		}
		if time.Now().After(deadline) {
			accepted, _ := led.snapshot()
			t.Fatalf("a member joining after the records got %d of 10 with share.auto.offset.reset=earliest", len(accepted))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShareGroupErrors: the error codes of the share protocol, the same
// on both brokers: ShareFetch without a session SHARE_SESSION_NOT_FOUND,
// a wrong epoch INVALID_SHARE_SESSION_EPOCH, acknowledging a record the
// member does not hold INVALID_RECORD_STATE; ShareGroupHeartbeat of an
// unknown member UNKNOWN_MEMBER_ID, a join without topics INVALID_REQUEST,
// a share heartbeat on a classic group's name GROUP_ID_NOT_FOUND.
func TestShareGroupErrors(t *testing.T) {
	t.Parallel()
	t.Run("broker", func(t *testing.T) { testShareGroupErrors(t, shareBroker(t)) })
	t.Run("apache-kafka", func(t *testing.T) { testShareGroupErrors(t, &brokerProc{t: t, kafkaAddr: referenceKafka(t)}) })
}

func testShareGroupErrors(t *testing.T, b *brokerProc) {
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	m := newRawShareMember(t, b.Addr(), group, topic, "errors-member-00000001")

	m.epoch = 3
	if resp, _ := m.fetch([]int32{0}, nil, 10); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("ShareFetch epoch 3 without a session: %s, want SHARE_SESSION_NOT_FOUND", errName(resp.ErrorCode))
	}
	m.epoch = 0
	if resp, _ := m.fetch([]int32{0}, nil, 10); resp.ErrorCode != 0 {
		t.Fatalf("opening the session: %s", errName(resp.ErrorCode))
	}
	m.epoch = 7
	if resp, _ := m.fetch(nil, nil, 10); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Errorf("ShareFetch epoch 7 where 1 is due: %s, want INVALID_SHARE_SESSION_EPOCH", errName(resp.ErrorCode))
	}
	m.epoch = 1
	acks := map[int32][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{0: {{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	if err := prod.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Value: []byte("x")}, &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Acknowledge offset 0 before acquiring it.
	resp, _ := m.fetch([]int32{0}, acks, 0)
	code := int16(-1)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			code = p.AcknowledgeErrorCode
		}
	}
	if resp.ErrorCode != 0 || code != kerr.InvalidRecordState.Code {
		t.Errorf("acknowledging an offset not acquired: %s / %s, want INVALID_RECORD_STATE", errName(resp.ErrorCode), errName(code))
	}
	// An answer with acknowledgements only (the session's close, epoch
	// -1): the partition's records are empty, never null (Records is not
	// nullable in ShareFetch; kafka-clients 4.2 fails reading a null).
	m.epoch = -1
	resp, _ = m.fetch([]int32{0}, acks, 10)
	parts := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			parts++
			if p.Records == nil {
				t.Errorf("closing ShareFetch with acknowledgements: partition %d has null records, want empty", p.Partition)
			}
		}
	}
	if resp.ErrorCode != 0 || parts != 1 {
		t.Errorf("closing ShareFetch with acknowledgements: %s, %d partitions, want the acknowledged one", errName(resp.ErrorCode), parts)
	}

	c := dialRaw(t, b.Addr())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, group, "unknown-member-0000001", 4
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of an unknown member: %s, want UNKNOWN_MEMBER_ID", errName(r.ErrorCode))
	}
	hb.MemberEpoch = 0
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("a join without topics: %s, want INVALID_REQUEST", errName(r.ErrorCode))
	}
	// A classic group of that name (offsets committed by an admin).
	classic := "classic." + topic
	if _, err := adm.CommitOffsets(testCtx(t, opTimeout), classic, kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	hb.GroupID, hb.SubscribedTopicNames = classic, []string{topic}
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("a share member joining a classic group's name: %s, want GROUP_ID_NOT_FOUND", errName(r.ErrorCode))
	}

	// Offsets committed to a share group's name (an admin's commit,
	// generation -1): GROUP_ID_NOT_FOUND, nothing stored, as Kafka 4.2.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 9, group, -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	if r := c.roundTrip(oc).(*kmsg.OffsetCommitResponse); len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetCommit to a share group's name: %+v, want GROUP_ID_NOT_FOUND", r.Topics)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Groups = 9, []kmsg.OffsetFetchRequestGroup{{Group: group}}
	if r := c.roundTrip(of).(*kmsg.OffsetFetchResponse); len(r.Groups) != 1 || r.Groups[0].ErrorCode != 0 || len(r.Groups[0].Topics) != 0 {
		t.Errorf("OffsetFetch of a share group after a refused commit: %+v, want no error and no offsets", r.Groups)
	}

	// DeleteGroups: NON_EMPTY_GROUP while the member is in, then deleted.
	del := func() int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(testCtx(t, opTimeout), newClient(t, b.Addr()))
		if err != nil || len(resp.Groups) != 1 {
			t.Fatalf("DeleteGroups: %v %+v", err, resp)
		}
		return resp.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Errorf("deleting a share group with a member: %s, want NON_EMPTY_GROUP", errName(code))
	}
	leave := kmsg.NewPtrShareGroupHeartbeatRequest()
	leave.Version, leave.GroupID, leave.MemberID, leave.MemberEpoch = 1, group, m.id, -1
	if r := m.c.roundTrip(leave).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("leaving: %s", errName(r.ErrorCode))
	}
	if code := del(); code != 0 {
		t.Errorf("deleting the empty share group: %s", errName(code))
	}
}

// TestShareGroupDescribeInFlight: a raw member holds 10 of 20 records;
// GET /v1/admin/groups/{group} answers the share-partition with in_flight
// 10 and lag 20, and `broker groups describe` lists the partition with
// its start offset and lag (DescribeShareGroupOffsets) and IN-FLIGHT 10
// when --server names the HTTP listener, "-" (JSON null) without it, and
// also when that listener cannot be reached (a warning on stderr, exit 0).
func TestShareGroupDescribeInFlight(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--group-share-auto-offset-reset", "earliest", "--group-share-record-lock-duration", "10m"))
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	group := "share." + topic
	createTopic(t, adm, topic, 1, nil)
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("r-%02d", i))})
	}
	if err := prod.ProduceSync(testCtx(t, opTimeout), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := newRawShareMember(t, b.Addr(), group, topic, "inflight-member-000001")
	if resp, got := m.fetch([]int32{0}, nil, 10); len(got[0]) != 1 || got[0][0].LastOffset != 9 {
		t.Fatalf("acquired %+v (error %s), want offsets 0-9", got, errName(resp.ErrorCode))
	}

	var detail struct {
		ProtocolType string `json:"protocol_type"`
		Members      []struct {
			MemberID string `json:"member_id"`
		}
		Lag             int64
		SharePartitions []struct {
			Topic          string
			Partition      int32
			StartOffset    int64 `json:"start_offset"`
			InFlight       int64 `json:"in_flight"`
			Available, Lag int64
		} `json:"share_partitions"`
	}
	body := httpGet(t, "http://"+b.HTTPAddr()+"/v1/admin/groups/"+group)
	if err := json.Unmarshal([]byte(body), &detail); err != nil {
		t.Fatalf("GET /v1/admin/groups/%s: %v\n%s", group, err, body)
	}
	if want := fmt.Sprintf("[{%s 0 0 10 0 20}]", topic); detail.ProtocolType != "share" || len(detail.Members) != 1 || detail.Lag != 20 || fmt.Sprint(detail.SharePartitions) != want {
		t.Errorf("GET /v1/admin/groups/%s = %s\nwant protocol_type share, 1 member, share_partitions %s (start, in_flight, available, lag), lag 20", group, body, want)
	}

	type row struct {
		Topic       string
		Partition   int32
		StartOffset int64  `json:"start_offset"`
		InFlight    *int64 `json:"in_flight"`
		Lag         int64
	}
	describe := func(args ...string) (row, string) {
		t.Helper()
		out, errOut, code := runCLI(t, append(append([]string{"describe", "--bootstrap-server=" + b.Addr(), "-o", "json"}, args...), group)...)
		var described []struct{ Partitions []row }
		if err := json.Unmarshal([]byte(out), &described); err != nil || code != 0 || len(described) != 1 || len(described[0].Partitions) != 1 {
			t.Fatalf("broker groups describe %v: exit %d, %v\n%s%s", args, code, err, out, errOut)
		}
		return described[0].Partitions[0], errOut
	}
	if r, _ := describe(); r.Topic != topic || r.StartOffset != 0 || r.Lag != 20 || r.InFlight != nil {
		t.Errorf("describe without --server: %+v, want start 0, lag 20, in_flight null", r)
	}
	if r, _ := describe("--server", "http://"+b.HTTPAddr()); r.InFlight == nil || *r.InFlight != 10 || r.Lag != 20 {
		t.Errorf("describe --server: %+v, want in_flight 10, lag 20", r)
	}
	if r, errOut := describe("--server", "127.0.0.1:1"); r.InFlight != nil || !strings.Contains(errOut, "in-flight counts unavailable") {
		t.Errorf("describe with an unreachable --server: %+v, stderr %q; want in_flight null and a warning", r, errOut)
	}
	out, errOut, code := runCLI(t, "describe", "--bootstrap-server="+b.Addr(), "--server", b.HTTPAddr(), group)
	if code != 0 || !strings.Contains(out, "IN-FLIGHT") || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return slices.Equal(strings.Fields(l), []string{topic, "0", "0", "10", "20"})
	}) {
		t.Errorf("broker groups describe (table): exit %d\n%s%s\nwant a partition row %s 0 0 10 20", code, out, errOut, topic)
	}
}
