package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHostPropose: three in-process nodes on loopback (real Pebble in
// temp directories, fsync on), 1, 100 or 1000 groups (partitions), 64
// producers each proposing one 1 KiB batch at a time to the leader of the
// next group (acks=all: Propose returns once a majority has it durably
// and the leader applied it). Leaders are spread over the nodes. Reports
// proposals/s, the p50 and p99 latency, and the group commit's width
// (Readies per synced batch, over the three nodes).
func BenchmarkHostPropose(b *testing.B) {
	for _, groups := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint("groups=", groups), func(b *testing.B) { benchHost(b, groups, groups, 64) })
	}
}

// BenchmarkHostProposeHot: as BenchmarkHostPropose with 1000 groups of
// which 10 take the proposals (a few hot partitions among many idle
// ones), with quiescing off and on.
func BenchmarkHostProposeHot(b *testing.B) {
	for _, off := range []bool{true, false} {
		b.Run(fmt.Sprint("quiesce=", !off), func(b *testing.B) {
			benchHost(b, 1000, 10, 64, func(cfg *HostConfig) { cfg.DisableQuiesce = off })
		})
	}
}

// BenchmarkHostThroughput: the replicated-partition path of issue 13 at
// the Host level: three in-process nodes (real Pebble, fsync on), 1 or 6
// groups, 4 concurrent proposers per group, each proposing one Kafka
// batch of 16 KiB (16 records of 1 KiB) or 1 MiB at a time to the group's
// leader. Three variants of the loop, in one run: "base", the default
// (every message after the save, committed entries applied at most 1 MiB
// per Ready), "committed" (64 MiB per Ready), "early" (and a leader's
// appends sent before its own save: HostConfig.EarlySend).
// Reports MB/s of acknowledged batches, p50 and p99 latency, synced
// batches (fsyncs, over the three nodes) and loop iterations per
// proposal, Readies per fsync, and the busiest loop's share of time per
// stage (LoopStats).
func BenchmarkHostThroughput(b *testing.B) {
	benchServeStore = true
	defer func() { benchServeStore = false }()
	variants := []struct {
		name string
		opt  func(*HostConfig)
	}{
		{"base", func(c *HostConfig) {}},
		{"committed", func(c *HostConfig) { c.CommittedPerReady = 64 << 20 }},
		{"early", func(c *HostConfig) { c.CommittedPerReady, c.EarlySend = 64<<20, true }},
	}
	for _, groups := range []int{1, 6} {
		for _, kib := range []int{16, 1024} {
			for _, v := range variants {
				b.Run(fmt.Sprintf("groups=%d/batch=%dKiB/%s", groups, kib, v.name), func(b *testing.B) {
					batch := testBatch(int32(kib), string(make([]byte, kib<<10-batchHeaderSize)))
					c, leaders, stop := startBench(b, groups, v.opt)
					defer stop()
					runBench(b, c, leaders, benchLoad{hot: groups, producers: 4 * groups, batch: batch})
				})
			}
		}
	}
}

// benchHost runs producers over the first hot of groups groups.
func benchHost(b *testing.B, groups, hot, producers int, opts ...func(*HostConfig)) {
	c, leaders, stop := startBench(b, groups, opts...)
	defer stop()
	batch := testBatch(10, string(make([]byte, 1024-batchHeaderSize)))
	runBench(b, c, leaders, benchLoad{hot: hot, producers: producers, batch: batch})
}

// startBench starts three nodes with groups groups, ticking every 100 ms,
// and elects leaders spread over the nodes; stop stops the ticks.
func startBench(b *testing.B, groups int, opts ...func(*HostConfig)) (*hostCluster, []*Host, func()) {
	c := newHostClusterStore(b, 3, groups, benchServeStore, opts...)
	stop := c.tickEvery100ms()
	for _, g := range c.groups {
		c.nodes[1+g%3].host.Campaign(g)
	}
	leaders := make([]*Host, groups+1)
	deadline := time.Now().Add(2 * time.Minute)
	for _, g := range c.groups {
		for leaders[g] == nil {
			for _, hn := range c.nodes {
				if s, _ := hn.host.Status(g); s.Leading {
					leaders[g] = hn.host
				}
			}
			if time.Now().After(deadline) {
				stop()
				b.Fatalf("no leader for group %d", g)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return c, leaders, stop
}

// benchServeStore: startBench opens Pebble as serve does (64 MiB
// memtables): BenchmarkHostThroughput's saves of several MiB would
// otherwise exceed the tests' 4 MiB large-batch bound and each force a
// memtable flush. The older benchmarks keep the tests' store.
var benchServeStore bool

// benchLoad: producers proposing batch, round-robin over groups 1..hot.
type benchLoad struct {
	hot, producers int
	batch          []byte
}

// runBench runs b.N proposals of load and reports the figures.
func runBench(b *testing.B, c *hostCluster, leaders []*Host, load benchLoad) {
	var saves0, readies0 uint64
	for _, hn := range c.nodes {
		s, r := hn.host.Saves()
		saves0, readies0 = saves0+s, readies0+r
	}
	loops0, stages0 := loopStats(c)
	nodeStages0 := map[uint64][numLoopStages]time.Duration{}
	nodeSaves0 := map[uint64]uint64{}
	for i, hn := range c.nodes {
		_, nodeStages0[i] = hn.host.LoopStats()
		nodeSaves0[i], _ = hn.host.Saves()
	}
	lat := make([][]time.Duration, load.producers)
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range load.producers {
		wg.Go(func() {
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				g := uint64(1 + i%load.hot)
				t0 := time.Now()
				if _, _, err := leaders[g].Propose(context.Background(), g, load.batch); err != nil {
					b.Errorf("group %d: %v", g, err)
					return
				}
				lat[p] = append(lat[p], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	var saves, readies uint64
	for _, hn := range c.nodes {
		s, r := hn.host.Saves()
		saves, readies = saves+s, readies+r
	}
	saves -= saves0
	readies -= readies0
	loops, stages := loopStats(c)
	b.ReportMetric(float64(loops-loops0)/float64(len(all)), "loops/proposal")
	// The busiest loop (least waiting): its share of time in each stage.
	busiest, least := uint64(0), time.Duration(1<<62)
	for i, hn := range c.nodes {
		_, st := hn.host.LoopStats()
		if w := st[StageWait] - nodeStages0[i][StageWait]; w < least {
			busiest, least = i, w
		}
	}
	_, st := c.nodes[busiest].host.LoopStats()
	for i, name := range []string{"wait", "input", "stage", "save", "apply"} {
		b.ReportMetric(float64(st[i]-nodeStages0[busiest][i])/float64(elapsed), name+"-frac")
	}
	if s, _ := c.nodes[busiest].host.Saves(); s > nodeSaves0[busiest] {
		// The busiest loop's mean time per save (mostly synced ones).
		b.ReportMetric(float64(st[StageSave]-nodeStages0[busiest][StageSave])/float64(s-nodeSaves0[busiest])/1e6, "ms/save")
	}
	_ = stages
	_ = stages0
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(len(all)*len(load.batch))/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	if saves > 0 {
		b.ReportMetric(float64(readies)/float64(saves), "readies/fsync")
		b.ReportMetric(float64(saves)/float64(len(all)), "fsyncs/proposal")
	}
	b.ReportMetric(0, "ns/op")
}

// loopStats sums the nodes' LoopStats.
func loopStats(c *hostCluster) (loops uint64, stages [numLoopStages]time.Duration) {
	for _, hn := range c.nodes {
		l, st := hn.host.LoopStats()
		loops += l
		for i := range st {
			stages[i] += st[i]
		}
	}
	return loops, stages
}

// BenchmarkHostIdle: the CPU three in-process nodes spend on 1000 idle
// groups (leaders spread, nothing proposed after the elections), a tick
// every 100 ms (serve's), measured from the process's rusage over 10 s
// once the groups settled, with quiescing off (every group ticks and
// heartbeats, the behaviour before quiescing) and on. Reports CPU
// milliseconds per second of wall clock (1000 = one core busy) and the
// Raft ticks the groups took per second (all nodes). Run it
// with -benchtime 1x: the measured interval is fixed.
func BenchmarkHostIdle(b *testing.B) {
	for _, off := range []bool{true, false} {
		b.Run(fmt.Sprint("quiesce=", !off), func(b *testing.B) {
			benchIdle(b, 1000, off)
		})
	}
}

func benchIdle(b *testing.B, groups int, disable bool) {
	c := newHostCluster(b, 3, groups, func(cfg *HostConfig) { cfg.DisableQuiesce = disable })
	defer c.tickEvery100ms()()
	for _, g := range c.groups {
		c.nodes[1+g%3].host.Campaign(g)
	}
	deadline := time.Now().Add(3 * time.Minute)
	settled := func() bool {
		for _, g := range c.groups {
			if c.leader(g) == 0 {
				return false
			}
		}
		for _, hn := range c.nodes {
			if !disable && hn.host.Quiesced() != groups {
				return false
			}
		}
		return true
	}
	for !settled() {
		if time.Now().After(deadline) {
			b.Fatal("the groups did not settle (elect, and quiesce when on) in 3 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	b.ResetTimer()
	groupTicks := func() (n uint64) {
		for _, hn := range c.nodes {
			n += hn.host.GroupTicks()
		}
		return n
	}
	ticks0, cpu0, t0 := groupTicks(), processCPU(b), time.Now()
	time.Sleep(10 * time.Second)
	cpu, wall := processCPU(b)-cpu0, time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(cpu.Milliseconds())/wall.Seconds(), "cpu-ms/s")
	b.ReportMetric(float64(groupTicks()-ticks0)/wall.Seconds(), "group-ticks/s")
	b.ReportMetric(0, "ns/op")
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tickEvery100ms ticks every node every 100 ms (serve's tick) until the
// function it returns is called.
func (c *hostCluster) tickEvery100ms() (stop func()) {
	stopTicks := make(chan struct{})
	var ticks sync.WaitGroup
	ticks.Go(func() {
		for {
			select {
			case <-stopTicks:
				return
			case <-time.After(100 * time.Millisecond):
				c.tick()
			}
		}
	})
	return func() { close(stopTicks); ticks.Wait() }
}
