package topics

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestClusterTopicsReplaySafe pins the data loss found while building
// issue 13's second step: a broker restarted restores its own metadata
// snapshot, older than its store, and replays the log after it; syncing
// the store to that snapshot deleted the topics created after it, with
// their records. Now a snapshot restored at start deletes nothing, a
// replayed deletion deletes only the topic of its ID, and a created
// topic replaces a cluster topic of the same name under an older ID.
func TestClusterTopicsReplaySafe(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	idA, idB := TopicID{0xa}, TopicID{0xb}
	if err := m.ApplyClusterTopic(ClusterTopic{Name: "orders", ID: idA, Partitions: 2, Configs: map[string]string{"retention.ms": "1000"}}); err != nil {
		t.Fatal(err)
	}
	orders, _ := m.Topic("orders")
	p, _ := orders.Partition(1)
	appendOne(t, m, p, testBatch(t, "x", 3, -1, -1, -1, 1000))

	// The broker's older snapshot (no topics) at start: nothing deleted.
	if err := m.SyncClusterTopics(nil, false); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, p); len(got) != 3 {
		t.Fatalf("records after the start-up sync: %v", got)
	}
	// Replayed again: the creation is harmless, configs and growth apply.
	if err := m.ApplyClusterTopic(ClusterTopic{Name: "orders", ID: idA, Partitions: 3, Configs: map[string]string{"retention.ms": "2000"}}); err != nil {
		t.Fatal(err)
	}
	if orders.NumPartitions() != 3 || orders.Config("retention.ms") != "2000" || len(readAll(t, p)) != 3 {
		t.Fatalf("orders after a change: %d partitions, retention.ms %s", orders.NumPartitions(), orders.Config("retention.ms"))
	}
	// A deletion of an older topic of the same name changes nothing.
	if err := m.DeleteClusterTopic("orders", idB); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Topic("orders"); !ok {
		t.Fatal("a deletion of another ID deleted orders")
	}
	// The catalog row survives a restart, cluster mark included.
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store, m = openTestManager(t, fs, "data")
	defer store.Close()
	orders, ok := m.Topic("orders")
	if !ok || !orders.IsClusterTopic() || orders.ID != idA || orders.NumPartitions() != 3 {
		t.Fatalf("after a restart: %+v %v", orders, ok)
	}
	// Deleted and created again under a new ID: the old data goes.
	if err := m.ApplyClusterTopic(ClusterTopic{Name: "orders", ID: idB, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	orders, _ = m.Topic("orders")
	if orders.ID != idB || orders.NumPartitions() != 1 {
		t.Fatalf("recreated: %x %d", orders.ID, orders.NumPartitions())
	}
	p, _ = orders.Partition(0)
	if got := readAll(t, p); len(got) != 0 {
		t.Fatalf("the new topic has the old one's records: %v", got)
	}
	// A leader's snapshot without it deletes it.
	if err := m.SyncClusterTopics(nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Topic("orders"); ok {
		t.Fatal("a newer snapshot without orders left it")
	}
}

// TestClusterTopicsKeepOwnTopics: a broker's own topic (created before it
// joined, or a queue's) is never changed by the cluster's metadata.
func TestClusterTopicsKeepOwnTopics(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer store.Close()
	own, err := m.CreateTopic("mine", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	err = m.ApplyClusterTopic(ClusterTopic{Name: "mine", ID: TopicID{7}, Partitions: 3})
	if !errors.Is(err, ErrClusterTopicConflict) {
		t.Fatalf("a cluster topic named like this broker's own: %v", err)
	}
	if err := m.SyncClusterTopics(nil, true); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteClusterTopic("mine", own.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok := m.Topic("mine"); !ok || got.ID != own.ID || got.NumPartitions() != 1 || got.IsClusterTopic() {
		t.Fatalf("this broker's own topic changed: %+v %v", got, ok)
	}
}

// TestClusterProducerIDs: in a cluster, producer IDs carry the node ID in
// their high 32 bits, so two brokers never hand out the same one.
func TestClusterProducerIDs(t *testing.T) {
	store, m := openTestManager(t, vfs.NewMem(), "data")
	defer store.Close()
	m.cfg.ClusterNodeID = 3
	id, err := m.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if id>>32 != 3 || id&(1<<32-1) != 1000 {
		t.Fatalf("producer id %d (%#x), want node 3 in the high bits and the counter 1000", id, id)
	}
}
