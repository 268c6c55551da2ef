package compattests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionLeaders asks broker id itself for topic's partitions: leader,
// epoch, replica and ISR counts; ok once each of want partitions has a
// leader, 3 replicas and 3 in sync.
func partitionLeaders(ctx context.Context, cl *kgo.Client, id int32, topic string, want int) (map[int32]kmsg.MetadataResponseTopicPartition, bool) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	out := map[int32]kmsg.MetadataResponseTopicPartition{}
	if err != nil || len(resp.Topics) != 1 {
		return out, false
	}
	ok := len(resp.Topics[0].Partitions) == want
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p
		ok = ok && p.ErrorCode == 0 && p.Leader > 0 && len(p.Replicas) == 3 && len(p.ISR) == 3
	}
	return out, ok
}

// waitSpreadLeaders waits until every live broker of ids reports topic's
// three partitions replicated, in sync and led by three different
// brokers (the preferred replicas), alike; it returns the leaders.
func waitSpreadLeaders(ctx context.Context, t *testing.T, cl *kgo.Client, ids []int32, topic string) map[int32]int32 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var first map[int32]int32
		agreed := true
		for _, id := range ids {
			ps, ok := partitionLeaders(ctx, cl, id, topic, 3)
			leaders := map[int32]int32{0: ps[0].Leader, 1: ps[1].Leader, 2: ps[2].Leader}
			if first == nil {
				first = leaders
			}
			agreed = agreed && ok && leaders[0] == first[0] && leaders[1] == first[1] && leaders[2] == first[2]
		}
		if agreed && first[0] != first[1] && first[1] != first[2] && first[0] != first[2] {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("the brokers %v do not agree on three in-sync replicas and spread leaders of %s: last %v", ids, topic, first)
		}
	}
}

type ackedRecord struct {
	value  string
	offset int64
}

// TestClusterReplicatedLeaderKill: three broker processes, a 3-partition
// RF 3 topic, an idempotent acks=all franz-go producer writing all the
// time; the broker leading partition 0 is killed with SIGKILL mid-stream
// and the producer keeps going. Every acknowledged record is then read
// back from the two survivors exactly once, at its acknowledged offset,
// in order per partition. The killed broker, restarted on its data,
// catches up: it leads partition 0 again (its preferred replica) with the
// same end offset and the same records. The failover times (kill to a
// new leader in the survivors' metadata, and to the next acknowledgement
// on partition 0) are logged, not asserted.
func TestClusterReplicatedLeaderKill(t *testing.T) {
	kcatPath(t)
	brokers := startCluster(t)
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr())
	}
	ctx := context.Background()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl := newClient()
	adm := kadm.NewClient(cl)
	const topic = "kill-rf3"
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	leaders := waitSpreadLeaders(ctx, t, cl, []int32{1, 2, 3}, topic)
	victim := leaders[0]

	pr := newClient(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(60*time.Second), kgo.MaxBufferedRecords(300),
		// Refresh metadata soon after a NOT_LEADER (5 s by default), so
		// that the measured failover is the cluster's, not the client's.
		kgo.MetadataMinAge(100*time.Millisecond))
	var mu sync.Mutex
	acked := map[int32][]ackedRecord{}
	var produceErrs []error
	var killedAt, failoverAck time.Time
	var killOffset int64 = -1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pr.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i)), Partition: int32(i % 3)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceErrs = append(produceErrs, err)
					return
				}
				acked[r.Partition] = append(acked[r.Partition], ackedRecord{string(r.Value), r.Offset})
				if r.Partition == 0 && !killedAt.IsZero() && failoverAck.IsZero() && r.Offset > killOffset {
					failoverAck = time.Now()
				}
			})
		}
	}()
	count := func(p int32) int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked[p])
	}
	waitAcked := func(p int32, n int) {
		for deadline := time.Now().Add(60 * time.Second); count(p) < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("partition %d: %d records acknowledged, waited for %d", p, count(p), n)
			}
		}
	}
	waitAcked(0, 300)
	t0 := time.Now()
	brokers[victim-1].Kill()
	// Acknowledgements that arrived before the process died came from it.
	mu.Lock()
	for _, a := range acked[0] {
		killOffset = max(killOffset, a.offset)
	}
	killedAt = t0
	mu.Unlock()
	t.Logf("killed broker %d (leader of partition 0) after %d acknowledged records there", victim, count(0))
	survivor := victim%3 + 1
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps, _ := partitionLeaders(ctx, cl, survivor, topic, 3)
		if l := ps[0].Leader; l > 0 && l != victim {
			t.Logf("failover: broker %d reports broker %d leading partition 0 (epoch %d) %v after the kill",
				survivor, l, ps[0].LeaderEpoch, time.Since(killedAt).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader of partition 0 within 30 s")
		}
	}
	waitAcked(0, count(0)+300)
	close(stop)
	wg.Wait()
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("failover: the first acknowledgement on partition 0 after the kill came %v after it; acknowledged per partition: %d %d %d",
		failoverAck.Sub(killedAt).Round(time.Millisecond), len(acked[0]), len(acked[1]), len(acked[2]))
	if len(produceErrs) > 0 {
		t.Errorf("%d produce errors, first: %v", len(produceErrs), produceErrs[0])
	}
	mu.Unlock()

	var survivors []string
	for i, b := range brokers {
		if int32(i+1) != victim {
			survivors = append(survivors, b.Addr())
		}
	}
	checkAcked(ctx, t, acked, survivors, topic, "survivors")

	// The killed broker comes back, catches up and leads its preferred
	// partition again, with the same end offset.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := ends[topic][0].Offset
	brokers[victim-1].Start()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ps, ok := partitionLeaders(ctx, cl, victim, topic, 3)
		if ok && ps[0].Leader == victim {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted broker %d does not lead partition 0 again: %+v", victim, ps[0])
		}
	}
	back, err := kgo.NewClient(kgo.SeedBrokers(brokers[victim-1].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	ends, err = kadm.NewClient(back).ListEndOffsets(ctx, topic)
	if err != nil || ends[topic][0].Err != nil || ends[topic][0].Offset != want {
		t.Fatalf("restarted broker's end offset of partition 0: %+v %v, want %d", ends[topic][0], err, want)
	}
	checkAcked(ctx, t, acked, []string{brokers[victim-1].Addr()}, topic, "restarted")
}

// checkAcked reads topic's three partitions from offset 0 through seeds
// and checks that every acknowledged record is there once, at its
// acknowledged offset, and that no value is read twice.
func checkAcked(ctx context.Context, t *testing.T, acked map[int32][]ackedRecord, seeds []string, topic, label string) {
	t.Helper()
	co, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	total := 0
	for _, a := range acked {
		total += len(a)
	}
	got := map[int32]map[int64]string{0: {}, 1: {}, 2: {}}
	seen := map[string]bool{}
	n := 0
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for n < total {
		fs := co.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("%s: read %d records, %d acknowledged", label, n, total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[string(r.Value)] {
				t.Errorf("%s: partition %d: %s read twice (a duplicate under idempotence)", label, r.Partition, r.Value)
			}
			seen[string(r.Value)] = true
			got[r.Partition][r.Offset] = string(r.Value)
			n++
		})
	}
	for p, as := range acked {
		for i, a := range as {
			if got[p][a.offset] != a.value {
				t.Fatalf("%s: partition %d: acknowledged %s at offset %d, read %q there", label, p, a.value, a.offset, got[p][a.offset])
			}
			if i > 0 && a.offset <= as[i-1].offset {
				t.Fatalf("%s: partition %d: acknowledgements out of order: %v then %v", label, p, as[i-1], a)
			}
		}
	}
	t.Logf("%s: %d records read, every acknowledged one once at its offset", label, n)
}
