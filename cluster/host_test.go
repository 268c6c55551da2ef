package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"go.etcd.io/raft/v3/raftpb"
)

// The tests of this file run Hosts as the tests of cluster_test.go run
// Nodes: real Pebble stores in temp directories, real TCP on loopback,
// ticks sent by the test while it waits, losses through the transport's
// filter only.

// testBatch is a Kafka v2 record batch of records offsets whose record
// bytes are payload (the CRC-32C is right; the records are not parsed).
func testBatch(records int32, payload string) []byte {
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(payload))
	binary.BigEndian.PutUint64(b, 0)
	b[batchMagicAt] = 2
	binary.BigEndian.PutUint32(b[batchLastDeltaAt:], uint32(records-1))
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	// No producer (ID, epoch and sequence -1): not deduplicated.
	binary.BigEndian.PutUint64(b[batchProducerIDAt:], math.MaxUint64)
	binary.BigEndian.PutUint16(b[batchProducerEpAt:], math.MaxUint16)
	binary.BigEndian.PutUint32(b[batchBaseSeqAt:], math.MaxUint32)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-batchLengthOverhead))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	return b
}

func batchPayload(b []byte) string { return string(b[batchHeaderSize:]) }

type hostNode struct {
	id     uint64
	store  *pebblestore.Store
	tr     *Transport
	host   *Host
	ticker manualTicker
	logs   map[uint64]*PartitionLog
}

type hostCluster struct {
	t        *testing.T
	ids      []uint64
	groups   []uint64
	addrs    map[uint64]string
	dirs     map[uint64]string
	nodes    map[uint64]*hostNode
	filterMu sync.Mutex
	filter   Filter
	// opts adjust every node's HostConfig.
	opts []func(*HostConfig)
	// serveStore: Pebble with serve's memtable (64 MiB) instead of the
	// tests' 8 MiB, whose 4 MiB large-batch bound benchmarks would hit.
	serveStore bool
	// paused: produce proposes nothing meanwhile.
	paused atomic.Bool
}

// newHostCluster starts n nodes, each running a replica of groups 1..groups
// whose state machine is a PartitionLog.
func newHostCluster(t testing.TB, n, groups int, opts ...func(*HostConfig)) *hostCluster {
	return newHostClusterStore(t, n, groups, false, opts...)
}

// newHostClusterStore is newHostCluster, with serve's Pebble memtable
// when serveStore.
func newHostClusterStore(t testing.TB, n, groups int, serveStore bool, opts ...func(*HostConfig)) *hostCluster {
	tt, _ := t.(*testing.T)
	c := &hostCluster{t: tt, addrs: map[uint64]string{}, dirs: map[uint64]string{}, nodes: map[uint64]*hostNode{}, opts: opts, serveStore: serveStore}
	for g := 1; g <= groups; g++ {
		c.groups = append(c.groups, uint64(g))
	}
	listeners := map[uint64]net.Listener{}
	for i := 1; i <= n; i++ {
		id := uint64(i)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.ids = append(c.ids, id)
		c.addrs[id] = l.Addr().String()
		c.dirs[id] = filepath.Join(t.TempDir(), fmt.Sprint("node", id))
		listeners[id] = l
	}
	for _, id := range c.ids {
		if err := c.start(id, listeners[id]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			if c.nodes[id] != nil {
				c.stop(id)
			}
		}
	})
	return c
}

// start starts node id on its data directory (l: its listener, or nil to
// listen on its address again) and adds every group.
func (c *hostCluster) start(id uint64, l net.Listener) error {
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", c.addrs[id]); err != nil {
			return fmt.Errorf("listen again on %s: %w", c.addrs[id], err)
		}
	}
	memTable := uint64(8 << 20)
	if c.serveStore {
		memTable = 0 // serve's default, 64 MiB
	}
	store, err := pebblestore.Open(c.dirs[id], pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: memTable, CacheSize: 8 << 20})
	if err != nil {
		return err
	}
	// The node's incarnation, as serve chooses it: a wiped directory gets
	// a new one, which the peers' hosts learn from the hello.
	inc, err := Incarnation(store, 0)
	if err != nil {
		return err
	}
	tr, err := NewTransport(TransportConfig{ID: id, Listener: l, Peers: c.addrs, Incarnation: inc, GroupFrames: true, QueueMessages: 8192,
		Logger: zerolog.Nop(), BackoffMin: time.Millisecond, BackoffMax: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	tr.SetFilter(func(m *raftpb.Message) bool {
		c.filterMu.Lock()
		f := c.filter
		c.filterMu.Unlock()
		return f == nil || f(m)
	})
	hn := &hostNode{id: id, store: store, tr: tr, ticker: manualTicker{make(chan time.Time, 4)}, logs: map[uint64]*PartitionLog{}}
	// 30 ticks (150 ms of waitFor) before an election: a loop slowed by the
	// race detector does not depose its leaders.
	cfg := HostConfig{ID: id, Store: store, Transport: tr, Ticker: hn.ticker, ElectionTicks: 30, Logger: testLogger()}
	for _, o := range c.opts {
		o(&cfg)
	}
	hn.host, err = StartHost(cfg)
	if err != nil {
		return err
	}
	tr.Start(nil)
	for _, g := range c.groups {
		hn.logs[g] = NewPartitionLog(store, g, nil)
		if err := hn.host.AddGroup(g, c.ids, hn.logs[g]); err != nil {
			return err
		}
	}
	c.nodes[id] = hn
	return nil
}

// stop stops node id as a crash would leave it, minus unsynced data.
func (c *hostCluster) stop(id uint64) {
	hn := c.nodes[id]
	hn.host.Stop()
	_ = hn.tr.Close()
	_ = hn.store.Close()
	delete(c.nodes, id)
}

func (c *hostCluster) setFilter(f Filter) {
	c.filterMu.Lock()
	defer c.filterMu.Unlock()
	c.filter = f
}

func (c *hostCluster) tick() {
	for _, hn := range c.nodes {
		select {
		case hn.ticker.c <- time.Time{}:
		default:
		}
	}
}

func (c *hostCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("gave up waiting for %s", what)
		}
		c.tick()
		time.Sleep(5 * time.Millisecond)
	}
}

// leader is the leader of group every running node agrees on, or 0.
func (c *hostCluster) leader(group uint64) uint64 {
	var lead uint64
	for _, hn := range c.nodes {
		s, _ := hn.host.Status(group)
		if s.Leader == 0 || (lead != 0 && s.Leader != lead) {
			return 0
		}
		lead = s.Leader
	}
	if hn := c.nodes[lead]; hn == nil {
		return 0
	} else if s, _ := hn.host.Status(group); !s.Leading {
		return 0
	}
	return lead
}

func (c *hostCluster) waitLeaders() {
	c.t.Helper()
	c.waitFor("a leader in every group", func() bool {
		for _, g := range c.groups {
			if c.leader(g) == 0 {
				return false
			}
		}
		return true
	})
}

// propose proposes batch to group on its leader, ticking meanwhile, and
// returns the batch's base offset. A leader that had just stepped down
// refuses it before proposing (NotLeaderError): then it is proposed again.
func (c *hostCluster) propose(group uint64, batch []byte) (int64, error) {
	c.t.Helper()
	for {
		off, err := c.proposeOnce(group, batch)
		if errors.Is(err, ErrLeadershipLost) {
			// The outcome is unknown: once a new leader committed its
			// whole log, the batch is in it or never will be.
			if off, ok := c.findSettled(group, batchPayload(batch)); ok {
				return off, nil
			}
			continue
		}
		if nl := (*NotLeaderError)(nil); !errors.As(err, &nl) {
			return off, err
		}
	}
}

// findSettled waits until group's leader has committed and applied its
// whole log, and looks for payload in it.
func (c *hostCluster) findSettled(group uint64, payload string) (int64, bool) {
	var lead uint64
	c.waitFor("a leader that committed its log", func() bool {
		lead = c.leader(group)
		if lead == 0 {
			return false
		}
		s, _ := c.nodes[lead].host.Status(group)
		return s.Commit == s.Last && s.Applied == s.Commit
	})
	for off, p := range c.read(lead, group) {
		if p == payload {
			return off, true
		}
	}
	return 0, false
}

func (c *hostCluster) proposeOnce(group uint64, batch []byte) (int64, error) {
	c.t.Helper()
	var lead uint64
	c.waitFor(fmt.Sprint("a leader of group ", group), func() bool { lead = c.leader(group); return lead != 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		offset uint64
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, off, err := c.nodes[lead].host.Propose(ctx, group, batch)
		done <- result{off, err}
	}()
	var r result
	c.waitFor("a proposal", func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	return int64(r.offset), r.err
}

// read returns the payloads of every batch of group's log on node id, by
// base offset, checking each batch and its offsets on the way.
func (c *hostCluster) read(id, group uint64) map[int64]string {
	c.t.Helper()
	pl := c.nodes[id].logs[group]
	out := map[int64]string{}
	start := pl.LogStart()
	for off := start; off < pl.HighWatermark(); {
		b, err := pl.Read(off)
		if err != nil {
			c.t.Fatalf("node %d group %d: read %d: %v", id, group, off, err)
		}
		n, err := CheckBatch(b)
		if err != nil {
			c.t.Fatalf("node %d group %d: the batch at %d: %v", id, group, off, err)
		}
		// The first batch may straddle the log start.
		base := int64(binary.BigEndian.Uint64(b))
		if base != off && (off != start || base > off) {
			c.t.Fatalf("node %d group %d: the batch read at %d has base offset %d", id, group, off, base)
		}
		out[base] = batchPayload(b)
		off = base + n
	}
	return out
}

// waitSameLogs waits until every running node applied every group up to
// the same high watermark (at least atLeast[g]), and checks the logs are
// identical.
func (c *hostCluster) waitSameLogs(atLeast map[uint64]int64) {
	c.t.Helper()
	c.waitFor("every replica of every group at the same high watermark", func() bool {
		for _, g := range c.groups {
			var hw int64 = -1
			for _, hn := range c.nodes {
				h := hn.logs[g].HighWatermark()
				if (hw != -1 && h != hw) || h < atLeast[g] {
					return false
				}
				hw = h
			}
		}
		return true
	})
	for _, g := range c.groups {
		var first map[int64]string
		var firstID uint64
		for id := range c.nodes {
			got := c.read(id, g)
			if first == nil {
				first, firstID = got, id
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(first) {
				c.t.Fatalf("group %d: node %d's log %v differs from node %d's %v", g, id, got, firstID, first)
			}
		}
	}
}

// TestHostManyGroupsElectAndReplicate: 100 groups on three nodes, one loop
// each, elect a leader each; batches proposed to every group get
// contiguous offsets in proposal order and every replica reads the same
// batches, offsets and leader epochs set, CRCs intact.
func TestHostManyGroupsElectAndReplicate(t *testing.T) {
	c := newHostCluster(t, 3, 100)
	for _, g := range c.groups {
		c.nodes[1+g%3].host.Campaign(g) // spread the leaders
	}
	c.waitLeaders()
	want := map[uint64]int64{}
	for round := range 3 {
		for _, g := range c.groups {
			off, err := c.propose(g, testBatch(int32(round+1), fmt.Sprintf("g%d-r%d", g, round)))
			if err != nil {
				t.Fatalf("group %d round %d: %v", g, round, err)
			}
			if off != want[g] {
				t.Fatalf("group %d round %d: base offset %d, want %d", g, round, off, want[g])
			}
			want[g] += int64(round + 1)
		}
	}
	c.waitSameLogs(want)
	leaders := map[uint64]int{}
	for _, g := range c.groups {
		leaders[c.leader(g)]++
		got := c.read(1, g)
		if got[0] != fmt.Sprintf("g%d-r0", g) || got[1] != fmt.Sprintf("g%d-r1", g) || got[3] != fmt.Sprintf("g%d-r2", g) {
			t.Fatalf("group %d: log %v", g, got)
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders by node %v: the campaigns should spread them over the three nodes", leaders)
	}
	// Every tick touched the 100 groups at once: their Readies shared
	// synced batches.
	for id, hn := range c.nodes {
		if saves, readies := hn.host.Saves(); readies <= saves {
			t.Fatalf("node %d: %d Readies in %d synced batches: no batch carried two groups", id, readies, saves)
		}
	}
}

// TestHostRejectsInvalidBatch: a command that is not a valid batch (here a
// bad CRC) is refused on every replica alike and takes no offset.
func TestHostRejectsInvalidBatch(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	bad := testBatch(1, "bad")
	bad[len(bad)-1] ^= 0xff
	if _, err := c.propose(1, bad); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a corrupt batch: %v, want ErrInvalidBatch", err)
	}
	if off, err := c.propose(1, testBatch(2, "good")); err != nil || off != 0 {
		t.Fatalf("the next batch: offset %d, %v; want 0", off, err)
	}
	c.waitSameLogs(map[uint64]int64{1: 2})
}

// TestHostProposeOnFollower: a follower refuses a proposal at once and
// names the leader (Kafka's NOT_LEADER_OR_FOLLOWER, the client re-routes).
func TestHostProposeOnFollower(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	lead := c.leader(1)
	follower := c.ids[0]
	if follower == lead {
		follower = c.ids[1]
	}
	_, _, err := c.nodes[follower].host.Propose(context.Background(), 1, testBatch(1, "x"))
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != lead {
		t.Fatalf("proposal on follower %d: %v, want a NotLeaderError naming %d", follower, err, lead)
	}
	if _, _, err := c.nodes[lead].host.Propose(context.Background(), 99, testBatch(1, "x")); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("an unknown group: %v", err)
	}
}

// acked records the proposals a leader acknowledged: group -> base offset
// -> payload.
type acked struct {
	mu sync.Mutex
	m  map[uint64]map[int64]string
	n  int
}

func (a *acked) add(group uint64, off int64, payload string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[uint64]map[int64]string{}
	}
	if a.m[group] == nil {
		a.m[group] = map[int64]string{}
	}
	a.m[group][off] = payload
	a.n++
}

func (a *acked) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// produce proposes to random groups on whichever node leads them until
// stop is closed, recording what is acknowledged. Failures (no leader,
// lost leadership, a stopped node) are retried with a new batch.
func (c *hostCluster) produce(stop chan struct{}, a *acked, seed uint64, nodes func() map[uint64]*Host) {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if c.paused.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		g := c.groups[r.IntN(len(c.groups))]
		payload := fmt.Sprintf("p%d-%d", seed, i)
		var lead *Host
		for _, h := range nodes() {
			if s, _ := h.Status(g); s.Leading {
				lead = h
			}
		}
		if lead == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, off, err := lead.Propose(ctx, g, testBatch(1, payload))
		cancel()
		if err == nil {
			a.add(g, int64(off), payload)
		}
	}
}

// TestHostLeaderKillsLoseNoAckedProposal: producers write to 10 groups
// while the network drops a fifth of all messages and the node leading
// most groups is stopped, restarted, then another one; each is stopped
// after a pause of the producers that let every group it runs quiesce,
// so the survivors must find its node dead to elect. In the end every
// replica of every group has the same log, holding every acknowledged
// batch at its acknowledged offset.
func TestHostLeaderKillsLoseNoAckedProposal(t *testing.T) { testLeaderKills(t) }

// TestHostLeaderKillsEarlySend: the same with HostConfig.EarlySend (a
// leader's appends sent before its own save).
func TestHostLeaderKillsEarlySend(t *testing.T) {
	testLeaderKills(t, func(cfg *HostConfig) { cfg.EarlySend = true })
}

func testLeaderKills(t *testing.T, opts ...func(*HostConfig)) {
	c := newHostCluster(t, 3, 10, opts...)
	c.waitLeaders()
	var lossMu sync.Mutex
	loss := rand.New(rand.NewPCG(7, 7))
	c.setFilter(func(*raftpb.Message) bool {
		lossMu.Lock()
		defer lossMu.Unlock()
		return loss.IntN(5) != 0
	})
	var hostsMu sync.Mutex
	hosts := func() map[uint64]*Host {
		hostsMu.Lock()
		defer hostsMu.Unlock()
		out := map[uint64]*Host{}
		for id, hn := range c.nodes {
			out[id] = hn.host
		}
		return out
	}
	var a acked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() { c.produce(stop, &a, uint64(p), hosts) })
	}
	for _, victim := range []uint64{c.mostLeader(), 0} {
		if victim == 0 {
			victim = c.mostLeader()
		}
		before := a.count()
		c.waitFor("acknowledgements before the kill", func() bool { return a.count() >= before+50 })
		c.paused.Store(true)
		c.waitFor("every group quiesced on the victim", func() bool { return c.nodes[victim].host.Quiesced() == len(c.groups) })
		hostsMu.Lock()
		c.stop(victim)
		hostsMu.Unlock()
		c.paused.Store(false)
		mark := a.count()
		c.waitFor("acknowledgements with a node down", func() bool { return a.count() >= mark+50 })
		hostsMu.Lock()
		err := c.start(victim, nil)
		hostsMu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	mark := a.count()
	c.waitFor("acknowledgements after the restarts", func() bool { return a.count() >= mark+50 })
	close(stop)
	wg.Wait()
	c.setFilter(nil)
	c.waitLeaders()
	c.checkAcked(&a)
}

// mostLeader is the node leading the most groups.
func (c *hostCluster) mostLeader() uint64 {
	c.waitLeaders()
	count := map[uint64]int{}
	var best uint64
	for _, g := range c.groups {
		l := c.leader(g)
		count[l]++
		if count[l] > count[best] {
			best = l
		}
	}
	return best
}

// checkAcked waits for every replica to converge and checks every
// acknowledged batch is in every log at its offset.
func (c *hostCluster) checkAcked(a *acked) {
	c.t.Helper()
	// A proposal through each group's leader makes it commit everything
	// of its term, so every replica converges on one high watermark.
	atLeast := map[uint64]int64{}
	for _, g := range c.groups {
		off, err := c.propose(g, testBatch(1, "final"))
		if err != nil {
			c.t.Fatalf("group %d: final proposal: %v", g, err)
		}
		atLeast[g] = off + 1
	}
	c.waitSameLogs(atLeast)
	a.mu.Lock()
	defer a.mu.Unlock()
	for id := range c.nodes {
		for g, offs := range a.m {
			got := c.read(id, g)
			for off, payload := range offs {
				if got[off] != payload {
					c.t.Fatalf("node %d group %d: acknowledged %q at offset %d, the log has %q there", id, g, payload, off, got[off])
				}
			}
		}
	}
	c.t.Logf("%d acknowledged batches, all in every replica", a.n)
}

// TestHostRestartRecoversEveryGroup: every node stopped (every group
// quiesced) and started again rebuilds every group's partition log from its Raft log (same offsets,
// same batches) and the groups elect and accept proposals again.
func TestHostRestartRecoversEveryGroup(t *testing.T) {
	c := newHostCluster(t, 3, 50)
	c.waitLeaders()
	want := map[uint64]int64{}
	for _, g := range c.groups {
		for i := range 2 {
			if _, err := c.propose(g, testBatch(2, fmt.Sprintf("g%d-%d", g, i))); err != nil {
				t.Fatal(err)
			}
		}
		want[g] = 4
	}
	c.waitSameLogs(want)
	before := map[uint64]map[int64]string{}
	for _, g := range c.groups {
		before[g] = c.read(1, g)
	}
	c.waitQuiesced() // stopped quiesced: they must wake on restart
	for _, id := range c.ids {
		c.stop(id)
	}
	for _, id := range c.ids {
		if err := c.start(id, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.waitSameLogs(want)
	for _, g := range c.groups {
		if got := c.read(2, g); fmt.Sprint(got) != fmt.Sprint(before[g]) {
			t.Fatalf("group %d after the restart: %v, before %v", g, got, before[g])
		}
		if off, err := c.propose(g, testBatch(1, "after")); err != nil || off != 4 {
			t.Fatalf("group %d: proposal after the restart: offset %d, %v; want 4", g, off, err)
		}
	}
}

func testLogger() zerolog.Logger {
	if os.Getenv("HOSTLOG") != "" {
		return zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

// TestHostEnqueueKeepsOrder: an idempotent producer's batches enqueued
// one after the other, without waiting in between (a connection's
// pipelined Produce requests), reach the log in that order: every one is
// accepted (none out of order) at ascending offsets.
func TestHostEnqueueKeepsOrder(t *testing.T) {
	c := newHostCluster(t, 3, 1)
	c.waitLeaders()
	leader := c.nodes[c.leader(1)].host
	var waits []func() (uint64, uint64, error)
	for i := range 50 {
		b := testBatch(2, "ab")
		binary.BigEndian.PutUint64(b[batchProducerIDAt:], 7)
		binary.BigEndian.PutUint16(b[batchProducerEpAt:], 0)
		binary.BigEndian.PutUint32(b[batchBaseSeqAt:], uint32(2*i))
		binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
		waits = append(waits, leader.Enqueue(context.Background(), 1, b))
	}
	for i, wait := range waits {
		if _, off, err := wait(); err != nil || off != uint64(2*i) {
			t.Fatalf("batch %d: offset %d, %v; want %d", i, off, err, 2*i)
		}
	}
}
