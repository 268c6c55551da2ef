package clustertests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vibemq/broker/clustertests/checker"
)

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

const (
	checkerTopic      = "jepsen"
	checkerPartitions = 6
	checkerProducers  = 3
)

// workload is checkerProducers idempotent acks=all franz-go producers
// sending Value(producer, seq) round robin over the partitions, paced,
// recording every acknowledgement.
type workload struct {
	mu       sync.Mutex
	acked    []checker.Record
	failed   map[string]int // sends whose outcome is unknown, by error
	progress [checkerPartitions]atomic.Int64
	cancel   context.CancelFunc
	// cancelRecords fails the records still buffered once stop gives up.
	cancelRecords context.CancelFunc
	wg            sync.WaitGroup
	clients       []*kgo.Client
}

func kafkaClient(t *testing.T, c *Cluster, dial dialFunc, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.KafkaAddr())
	}
	base := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.Dialer(dial), kgo.MetadataMinAge(250 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func startWorkload(t *testing.T, c *Cluster, dial dialFunc) *workload {
	w := &workload{failed: map[string]int{}}
	// ctx stops the sending loops; the records themselves are produced
	// with a context of their own so that stop can let them finish.
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	recordCtx, cancelRecords := context.WithCancel(context.Background())
	w.cancelRecords = cancelRecords
	for p := range checkerProducers {
		cl := kafkaClient(t, c, dial, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(600), kgo.ProducerLinger(2*time.Millisecond))
		w.clients = append(w.clients, cl)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for seq := int64(1); ctx.Err() == nil; seq++ {
				if seq%2 == 0 {
					select { // about 400 records/s per producer
					case <-ctx.Done():
					case <-tick.C:
					}
				}
				partition := int32(seq % checkerPartitions)
				r := &kgo.Record{Topic: checkerTopic, Partition: partition, Value: []byte(checker.Value(p, seq))}
				cl.Produce(recordCtx, r, w.record)
			}
		}()
	}
	// A test that fails midway stops the loops before the clients'
	// cleanups, registered earlier, close them.
	t.Cleanup(func() { cancel(); cancelRecords(); w.wg.Wait() })
	return w
}

func (w *workload) record(r *kgo.Record, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed[err.Error()]++
		return
	}
	w.acked = append(w.acked, checker.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	w.progress[r.Partition].Add(1)
}

// waitProgress waits until every partition got a new acknowledgement.
func (w *workload) waitProgress(t *testing.T, c *Cluster, what string) {
	t.Helper()
	var before [checkerPartitions]int64
	for i := range before {
		before[i] = w.progress[i].Load()
	}
	deadline := time.Now().Add(wait)
	for i := range before {
		for w.progress[i].Load() == before[i] {
			if time.Now().After(deadline) {
				t.Fatalf("%s: partition %d acknowledged nothing within %v\n%s", what, i, wait, c.logTails())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// stop stops sending, lets what is buffered finish (or fail: outcome
// unknown) and returns the acknowledged records.
func (w *workload) stop(t *testing.T) []checker.Record {
	w.cancel()
	w.wg.Wait()
	for _, cl := range w.clients {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		if err := cl.Flush(ctx); err != nil {
			t.Logf("flush: %v (the records still buffered count as unknown outcome)", err)
		}
		cancel()
	}
	w.cancelRecords()
	for _, cl := range w.clients {
		cl.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

// createCheckerTopic creates the topic with replication factor 3 if the
// cluster accepts it, else 1, and returns the factor used.
func createCheckerTopic(t *testing.T, adm *kadm.Client) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, rf := range []int16{3, 1} {
		for {
			resp, err := adm.CreateTopic(ctx, checkerPartitions, rf, nil, checkerTopic)
			if err == nil {
				err = resp.Err
			}
			switch {
			case err == nil:
				return rf
			case errors.Is(err, kerr.InvalidReplicationFactor) && rf == 3:
				t.Logf("replication factor 3 refused (%v %s); using 1", err, resp.ErrMessage)
			case ctx.Err() == nil && (errors.Is(err, kerr.NotController) || errors.Is(err, kerr.RequestTimedOut) || kerr.IsRetriable(err)):
				time.Sleep(200 * time.Millisecond)
				continue
			default:
				t.Fatalf("create %s with RF %d: %v %s", checkerTopic, rf, err, resp.ErrMessage)
			}
			break
		}
	}
	panic("unreachable")
}

// leaderOf returns the current leader of partition p (from a broker's
// Metadata), or 0 when none is known.
func leaderOf(adm *kadm.Client, p int32) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := adm.Metadata(ctx, checkerTopic)
	if err != nil {
		return 0
	}
	pd, ok := m.Topics[checkerTopic].Partitions[p]
	if !ok || pd.Leader < 1 {
		return 0
	}
	return int(pd.Leader)
}

// readBack reads every partition from its start to its end offset.
func readBack(t *testing.T, c *Cluster, dial dialFunc, adm *kadm.Client) []checker.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	var ends kadm.ListedOffsets
	for {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, checkerTopic); err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("list end offsets: %v %v", err, ends.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}
	offsets := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for p := range int32(checkerPartitions) {
		offsets[p] = kgo.NewOffset().AtStart()
		if end := ends[checkerTopic][p].Offset; end > 0 {
			left[p] = end
		}
	}
	cl := kafkaClient(t, c, dial, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{checkerTopic: offsets}))
	var read []checker.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back: partitions not read to their end: %v (left: partition -> end offset)", left)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			read = append(read, checker.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return read
}

// runFaults kills the leader of a partition (round robin) kills times,
// each with kill -9, 1 s down, a restart on its data and a wait until
// every partition acknowledges again; after every kills/partitions kills
// (partitions times) it cuts one broker off the network for 2 s and heals
// it, then pauses another (SIGSTOP) for 1 s and continues it. It returns
// how many partitions (and pauses) it did.
func runFaults(t *testing.T, c *Cluster, adm *kadm.Client, w *workload, kills, partitions int) int {
	every := max(1, kills/partitions)
	cut := 0
	for k := 0; k < kills; k++ {
		leader := leaderOf(adm, int32(k%checkerPartitions))
		if leader == 0 {
			leader = k%3 + 1
		}
		c.Kill(leader)
		time.Sleep(time.Second) // the producers keep sending; its partitions wait (RF 1) or fail over
		c.Start(leader)
		w.waitProgress(t, c, fmt.Sprintf("kill %d (broker %d) and restart", k+1, leader))
		if (k+1)%every != 0 || cut >= partitions {
			continue
		}
		id := (k+cut)%3 + 1
		c.Partition(id)
		time.Sleep(2 * time.Second)
		c.Heal()
		cut++
		w.waitProgress(t, c, fmt.Sprintf("partition %d (broker %d) healed", cut, id))
		paused := id%3 + 1
		c.Pause(paused)
		time.Sleep(time.Second)
		c.Resume(paused)
		w.waitProgress(t, c, fmt.Sprintf("pause %d (broker %d) continued", cut, paused))
	}
	return cut
}

// TestNetnsChecker: three brokers, a 6-partition topic (RF 3 when the
// cluster accepts it, else RF 1), three idempotent acks=all producers
// under load while partition leaders are killed with kill -9 and
// restarted on their data, one broker is cut off the network and
// healed, and one is paused (SIGSTOP) and continued; then every
// partition is read back from the start and the checker must find no
// acknowledged record lost or moved, none duplicated, none reordered. CLUSTER_CHECKER_KILLS=N runs N kills (one
// partition and one pause per 10 kills) instead of 2 and 1.
func TestNetnsChecker(t *testing.T) {
	Require(t)
	kills, partitions := 2, 1
	if n, _ := strconv.Atoi(os.Getenv("CLUSTER_CHECKER_KILLS")); n > 0 {
		kills, partitions = n, max(1, n/10)
	}
	c := New(t, brokerBin, 3)
	c.waitConverged("3 nodes elect a leader and register", ids(1, 3))
	dial := c.Dialer()
	adm := kadm.NewClient(kafkaClient(t, c, dial))
	rf := createCheckerTopic(t, adm)
	t.Logf("topic %s: %d partitions, replication factor %d", checkerTopic, checkerPartitions, rf)

	start := time.Now()
	w := startWorkload(t, c, dial)
	w.waitProgress(t, c, "before the faults")
	cut := runFaults(t, c, adm, w, kills, partitions)
	acked := w.stop(t)
	faults := time.Since(start)
	read := readBack(t, c, dial, adm)
	r := checker.Check(checker.History{Idempotent: true, Producers: checkerProducers, Acked: acked, Read: read})
	w.mu.Lock()
	failed := fmt.Sprint(w.failed)
	w.mu.Unlock()
	t.Logf("FIGURE checker: RF %d, %d kill -9 of partition leaders, %d network partitions, %d pauses (SIGSTOP), %v under load; sends with unknown outcome (by error): %s\n%s",
		rf, kills, cut, cut, faults.Round(time.Second), failed, r)
	if !r.OK() || r.Duplicated != 0 {
		t.Fatalf("the checker found failures:\n%s", r)
	}
	if r.Acked == 0 {
		t.Fatal("no record was acknowledged: the test checked nothing")
	}
}
