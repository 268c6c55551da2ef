package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
		b.Run(fmt.Sprint("groups=", groups), func(b *testing.B) { benchHost(b, groups, 64) })
	}
}

func benchHost(b *testing.B, groups, producers int) {
	c := newHostCluster(b, 3, groups)
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
				g := uint64(1 + i%groups)
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
