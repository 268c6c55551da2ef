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

// benchHost runs producers over the first hot of groups groups.
func benchHost(b *testing.B, groups, hot, producers int, opts ...func(*HostConfig)) {
	c := newHostCluster(b, 3, groups, opts...)
	stopTicks := make(chan struct{})
	var ticks sync.WaitGroup
	var nodesMu sync.Mutex
	ticks.Go(func() {
		for {
			select {
			case <-stopTicks:
				return
			case <-time.After(100 * time.Millisecond): // serve's tick
				nodesMu.Lock()
				c.tick()
				nodesMu.Unlock()
			}
		}
	})
	defer func() { close(stopTicks); ticks.Wait() }()
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
				b.Fatalf("no leader for group %d", g)
			}
			time.Sleep(time.Millisecond)
		}
	}
	batch := testBatch(10, string(make([]byte, 1024-batchHeaderSize)))
	var saves0, readies0 uint64
	for _, hn := range c.nodes {
		s, r := hn.host.Saves()
		saves0, readies0 = saves0+s, readies0+r
	}
	lat := make([][]time.Duration, producers)
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for {
				next.Lock()
				i := n
				n++
				next.Unlock()
				if i >= b.N {
					return
				}
				g := uint64(1 + i%hot)
				t0 := time.Now()
				if _, _, err := leaders[g].Propose(context.Background(), g, batch); err != nil {
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
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	if saves > 0 {
		b.ReportMetric(float64(readies)/float64(saves), "readies/fsync")
	}
	b.ReportMetric(0, "ns/op")
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
	defer func() { close(stopTicks); ticks.Wait() }()
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
