package main

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/pebblestore"
)

// handTicker is a cluster.Ticker that ticks when the test sends.
type handTicker chan time.Time

func (h handTicker) C() <-chan time.Time { return h }
func (h handTicker) Stop()               {}

// countingWriter counts the log lines holding msg.
type countingWriter struct {
	mu  sync.Mutex
	msg []byte
	n   int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.n += bytes.Count(p, w.msg)
	w.mu.Unlock()
	return len(p), nil
}

func (w *countingWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// TestReplicaLeaderRecordNotProposedInALoop: while the metadata group has
// no leader (here: a voter of three whose peers are down, its clock never
// ticking), a partition's leader record fails at once at every proposal.
// The replica manager proposes it again at its next leader check, once
// per tick: it used to check again on each failure's result, proposing
// every such record in a busy loop (seen after a kill -9 of the metadata
// leader: 42,766 dropped proposals in half a second on one broker).
func TestReplicaLeaderRecordNotProposedInALoop(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inc, err := cluster.Incarnation(store, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cluster.NewTransport(cluster.TransportConfig{ID: 1, Incarnation: inc, Listener: ln, GroupFrames: true, Logger: zerolog.Nop(),
		Peers: map[uint64]string{2: freeAddr(t), 3: freeAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	hostTicks := make(handTicker)
	host, err := cluster.StartHost(cluster.HostConfig{ID: 1, Store: store, Transport: tr, Ticker: hostTicks, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Stop()
	// A replicated topic whose one partition has this broker as its only
	// replica: its group elects this broker at once.
	md := cluster.NewMetadata()
	rec := cluster.CreateTopicRecord(cluster.Topic{Name: "t", ID: [16]byte{1}, Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1}}})
	if err := md.Apply(cluster.Entry{Index: 1, Term: 1, Data: rec}); err != nil {
		t.Fatal(err)
	}
	node, err := cluster.StartNode(cluster.NodeConfig{ID: 1, Group: 0, Voters: []uint64{1, 2, 3}, Store: store, StateMachine: md,
		Sender: tr, Peers: tr, Ticker: make(handTicker), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	tr.Start(node)

	failed := &countingWriter{msg: []byte("partition leader record not applied")}
	rm := newReplicaManager(1, host, md, store, zerolog.New(failed).Level(zerolog.DebugLevel))
	rm.node = node
	ticks := make(handTicker)
	rm.ticker = ticks
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go rm.run(ctx, done)
	defer func() { cancel(); <-done }()

	// Tick until the group leads (its in-sync view follows the host's
	// clock) and its record was proposed and failed.
	sent := 0
	deadline := time.Now().Add(10 * time.Second)
	for failed.count() == 0 {
		hostTicks <- time.Now()
		if time.Now().After(deadline) {
			g, _ := md.PartitionGroup("t", 0)
			st, ok := host.Status(g)
			t.Fatalf("no leader record proposed after %d ticks (group %d status %+v, %v)", sent, g, st, ok)
		}
		ticks <- time.Now()
		sent++
		time.Sleep(20 * time.Millisecond)
	}
	// No tick now: nothing is proposed again. (Half a second only bounds
	// how long the busy loop, if back, has to show.)
	time.Sleep(500 * time.Millisecond)
	if n := failed.count(); n > sent {
		t.Fatalf("%d failed proposals of the leader record after %d ticks: proposed again without a tick", n, sent)
	}
	// The next tick proposes it again, once.
	ticks <- time.Now()
	sent++
	for failed.count() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the leader record not proposed again at the next tick: %d failures", failed.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := failed.count(); n > sent {
		t.Fatalf("%d failed proposals after %d ticks", n, sent)
	}
}
