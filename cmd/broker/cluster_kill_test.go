package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// processCluster is three `broker serve` processes of one cluster, each
// killable with SIGKILL and restartable on its data directory.
type processCluster struct {
	*testCluster
	bin   string
	peers string
	dirs  map[int32]string
	procs map[int32]*exec.Cmd
}

func startProcessCluster(t *testing.T) *processCluster {
	bin := os.Getenv("BROKER_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "broker")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	pc := &processCluster{testCluster: &testCluster{t: t, cfgs: map[int32]*Config{}}, bin: bin, dirs: map[int32]string{}, procs: map[int32]*exec.Cmd{}}
	var peers []string
	for id := int32(1); id <= 3; id++ {
		pc.cfgs[id] = &Config{KafkaAddr: freeAddr(t), HTTPAddr: freeAddr(t)}
		pc.dirs[id] = t.TempDir()
		peers = append(peers, fmt.Sprintf("%d@%s", id, freeAddr(t)))
	}
	pc.peers = strings.Join(peers, ",")
	for id := int32(1); id <= 3; id++ {
		pc.start(id)
	}
	t.Cleanup(func() {
		for id := range pc.procs {
			pc.kill(id)
		}
		if t.Failed() {
			for id, dir := range pc.dirs {
				b, _ := os.ReadFile(filepath.Join(dir, "broker.log"))
				t.Logf("broker %d log (tail):\n%s", id, b[max(0, len(b)-4000):])
			}
		}
	})
	return pc
}

func (pc *processCluster) start(id int32) {
	cfg := pc.cfgs[id]
	logf, err := os.OpenFile(filepath.Join(pc.dirs[id], "broker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		pc.t.Fatal(err)
	}
	cmd := exec.Command(pc.bin, "serve", "--node-id", strconv.Itoa(int(id)), "--cluster-peers", pc.peers,
		"--data-dir", filepath.Join(pc.dirs[id], "data"), "--kafka-addr", cfg.KafkaAddr, "--http-addr", cfg.HTTPAddr,
		"--memtable-size", "4MiB", "--cache-size", "8MiB", "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, kv := range os.Environ() { // the broker refuses BROKER_ variables it does not know (BROKER_BIN)
		if !strings.HasPrefix(kv, "BROKER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		pc.t.Fatal(err)
	}
	_ = logf.Close()
	pc.procs[id] = cmd
}

// kill sends SIGKILL to broker id and reaps it.
func (pc *processCluster) kill(id int32) {
	if cmd := pc.procs[id]; cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		delete(pc.procs, id)
	}
}

type ackedRecord struct {
	value  string
	offset int64
}

// TestClusterReplicatedLeaderKill: three real `broker serve` processes,
// a 3-partition RF 3 topic, an idempotent acks=all franz-go producer
// writing all the time; the broker leading partition 0 is killed with
// SIGKILL mid-stream and the producer keeps going. Every acknowledged
// record is then read back from the two survivors exactly once, at its
// acknowledged offset, in order per partition. The killed broker,
// restarted, catches up: it leads partition 0 again (its preferred
// replica) with the same end offset and the same records. The failover
// time (kill to the next acknowledgement on partition 0) is logged.
//
// It builds the broker and runs about 30 s: CLUSTER_KILL_TEST=1 runs it
// (TESTING.md), BROKER_BIN names a prebuilt binary.
func TestClusterReplicatedLeaderKill(t *testing.T) {
	if os.Getenv("CLUSTER_KILL_TEST") == "" {
		t.Skip("builds the broker and runs three processes for about 30 s; CLUSTER_KILL_TEST=1 runs it")
	}
	pc := startProcessCluster(t)
	ctx := context.Background()
	cl := pc.client()
	pc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, "kill"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	leaders := pc.waitPreferredLeaders(ctx, cl, "kill")
	victim := leaders[0]

	pr := pc.client(kgo.DefaultProduceTopic("kill"), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
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
			r := &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i)), Partition: int32(i % 3)}
			pr.Produce(ctx, r, func(r *kgo.Record, err error) {
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
	mu.Lock()
	for _, a := range acked[0] {
		killOffset = max(killOffset, a.offset)
	}
	killedAt = time.Now()
	mu.Unlock()
	pc.kill(victim)
	t.Logf("killed broker %d (leader of partition 0) after %d acknowledged records there", victim, count(0))
	survivor := victim%3 + 1
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, err := metadataOf(ctx, cl, survivor)
		if err == nil {
			if mt, ok := topicOf(m, "kill"); ok && mt.Partitions[0].Leader > 0 && mt.Partitions[0].Leader != victim {
				t.Logf("failover: broker %d reports broker %d leading partition 0 (epoch %d) %v after the kill",
					survivor, mt.Partitions[0].Leader, mt.Partitions[0].LeaderEpoch, time.Since(killedAt).Round(time.Millisecond))
				break
			}
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

	// Read everything back from the survivors.
	var survivors []string
	for id := int32(1); id <= 3; id++ {
		if id != victim {
			survivors = append(survivors, pc.cfgs[id].KafkaAddr)
		}
	}
	checkAll := func(seeds []string, label string) {
		t.Helper()
		co := pc.client(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kill": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0), 2: kgo.NewOffset().At(0)}}))
		total := 0
		for _, a := range acked {
			total += len(a)
		}
		got := map[int32][]ackedRecord{}
		n := 0
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for n < total {
			fs := co.PollFetches(cctx)
			if cctx.Err() != nil {
				t.Fatalf("%s: read %d records, %d acknowledged", label, n, total)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], ackedRecord{string(r.Value), r.Offset})
				n++
			})
		}
		co.Close()
		seen := map[string]bool{}
		for p, recs := range got {
			for _, r := range recs {
				if seen[r.value] {
					t.Fatalf("%s: partition %d: %s read twice (a duplicate under idempotence)", label, p, r.value)
				}
				seen[r.value] = true
			}
		}
		for p, as := range acked {
			at := map[int64]string{}
			for _, r := range got[p] {
				at[r.offset] = r.value
			}
			for i, a := range as {
				if at[a.offset] != a.value {
					t.Fatalf("%s: partition %d: acknowledged %s at offset %d, read %q there", label, p, a.value, a.offset, at[a.offset])
				}
				if i > 0 && a.offset <= as[i-1].offset {
					t.Fatalf("%s: partition %d: acknowledgements out of order: %v then %v", label, p, as[i-1], a)
				}
			}
		}
		t.Logf("%s: %d records read, every acknowledged one once at its offset", label, n)
	}
	checkAll(survivors, "survivors")

	// The killed broker comes back, catches up and leads its preferred
	// partition again.
	pc.start(victim)
	ends, err := adm.ListEndOffsets(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	want := ends["kill"][0].Offset
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		leaders := pc.waitReplicated(ctx, cl, "kill", 3)
		if leaders[0] == victim {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted broker %d does not lead partition 0 again: leaders %v", victim, leaders)
		}
	}
	back := pc.client(kgo.SeedBrokers(pc.cfgs[victim].KafkaAddr))
	ends, err = kadm.NewClient(back).ListEndOffsets(ctx, "kill")
	if err != nil || ends["kill"][0].Err != nil || ends["kill"][0].Offset != want {
		t.Fatalf("restarted broker's end offset of partition 0: %+v %v, want %d", ends["kill"][0], err, want)
	}
	checkAll([]string{pc.cfgs[victim].KafkaAddr}, "restarted")
}
