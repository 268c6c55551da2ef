package topics

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/vibemq/broker/pebblestore"
)

// TestOwnedTopicRefusesClientChanges pins the bug the owner fixes: a Kafka
// client could delete a queue's or an event store's topic, add partitions,
// change its configs or delete its records, silently breaking the state
// kept beside the log. Every such change is now an *OwnedError and changes
// nothing, validate-only included; the owner itself can still delete it.
func TestOwnedTopicRefusesClientChanges(t *testing.T) {
	fs := vfs.NewMem()
	_, m := openTestManager(t, fs, "data")
	topic, err := m.CreateOwnedTopic("orders", 2, map[string]string{"retention.ms": "60000"}, OwnerQueue)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	appendOne(t, m, p, testBatch(t, "a", 3, -1, -1, -1, 1))

	refused := func(what string, change Change, err error, hint string) {
		t.Helper()
		var owned *OwnedError
		if !errors.Is(err, ErrTopicOwned) || !errors.As(err, &owned) {
			t.Fatalf("%s: %v, want an *OwnedError", what, err)
		}
		if owned.Topic != "orders" || owned.Owner != OwnerQueue || owned.Change != change {
			t.Fatalf("%s: %+v", what, owned)
		}
		if msg := err.Error(); !strings.Contains(msg, `the native queue "orders"`) || !strings.Contains(msg, hint) {
			t.Fatalf("%s: message %q lacks the owner or %q", what, msg, hint)
		}
	}
	refused("delete", ChangeDelete, m.DeleteTopic("orders"), "broker queue delete orders")
	refused("add partitions", ChangePartitions, m.CreatePartitions("orders", 4, false), "fixed")
	refused("add partitions, validate only", ChangePartitions, m.CreatePartitions("orders", 4, true), "fixed")
	refused("replace configs", ChangeConfigs, m.ReplaceTopicConfigs("orders", map[string]string{"retention.ms": "1"}, false), "PATCH /v1/queues/orders")
	refused("alter configs", ChangeConfigs, m.AlterTopicConfigs("orders", []ConfigOp{{Name: "retention.ms", Op: ConfigOpDelete}}, true), "PATCH")
	low, err := p.DeleteRecordsBefore(2)
	refused("delete records", ChangeDeleteRecords, err, "broker queue purge orders")
	if low != -1 {
		t.Fatalf("refused DeleteRecords answered low watermark %d", low)
	}
	refused("produce check", ChangeProduce, topic.CheckClientChange(ChangeProduce), "broker queue send orders")
	refused("delete by another owner", ChangeDelete, m.DeleteOwnedTopic("orders", OwnerEventStore), "broker queue delete")
	if err := m.SetOwner("orders", OwnerEventStore); !errors.Is(err, ErrTopicOwned) {
		t.Fatalf("taking over another owner's topic: %v", err)
	}

	if _, ok := m.Topic("orders"); !ok || topic.NumPartitions() != 2 || topic.Config("retention.ms") != "60000" || p.LogStartOffset() != 0 || p.HighWatermark() != 3 {
		t.Fatalf("a refused change changed the topic: partitions %d, retention.ms %s, log start %d, hwm %d",
			topic.NumPartitions(), topic.Config("retention.ms"), p.LogStartOffset(), p.HighWatermark())
	}
	if got := readAll(t, p); len(got) != 3 {
		t.Fatalf("records after refused changes: %v", got)
	}

	// Appends (the owner's path) and reads are not the manager's to refuse.
	appendOne(t, m, p, testBatch(t, "b", 1, -1, -1, -1, 1))
	if err := m.DeleteOwnedTopic("orders", OwnerQueue); err != nil {
		t.Fatalf("owner's delete: %v", err)
	}
	if _, ok := m.Topic("orders"); ok {
		t.Fatal("topic left after the owner's delete")
	}
}

// TestTopicOwnerPersists: the owner survives a restart; a catalog row
// written before owners existed reads as unowned and can be marked
// (SetOwner) and released; an owner this broker does not know still
// protects its topic.
func TestTopicOwnerPersists(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	if _, err := m.CreateOwnedTopic("events-a", 1, nil, OwnerEventStore); err != nil {
		t.Fatal(err)
	}
	legacy, err := m.CreateTopic("legacy", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	// Rows as an older broker wrote them: no owner field, and one with an
	// owner from a newer broker.
	future, err := m.CreateTopic("future", 1, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	b.Set(pebblestore.TopicKey(legacy.ID), []byte(`{"name":"legacy","partitions":1}`))
	b.Set(pebblestore.TopicKey(future.ID), []byte(`{"name":"future","partitions":1,"owner":"stream-processor"}`))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, m = openTestManager(t, fs, "data")
	owners := map[string]Owner{}
	for _, tp := range m.Topics() {
		owners[tp.Name] = tp.Owner()
	}
	want := map[string]Owner{"events-a": OwnerEventStore, "legacy": OwnerNone, "plain": OwnerNone, "future": "stream-processor"}
	for name, o := range want {
		if owners[name] != o {
			t.Errorf("after restart %s has owner %q, want %q", name, owners[name], o)
		}
	}
	if err := m.DeleteTopic("future"); !errors.Is(err, ErrTopicOwned) || !strings.Contains(err.Error(), `"stream-processor"`) {
		t.Errorf("delete of a topic with an unknown owner: %v", err)
	}
	if got := m.OwnedTopics(OwnerEventStore); len(got) != 1 || got[0] != "events-a" {
		t.Errorf("OwnedTopics(event-store) = %v", got)
	}

	if err := m.SetOwner("legacy", OwnerQueue); err != nil {
		t.Fatal(err)
	}
	if err := m.SetOwner("legacy", OwnerQueue); err != nil {
		t.Fatalf("marking again: %v", err)
	}
	if err := m.SetOwner("nope", OwnerQueue); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("marking an unknown topic: %v", err)
	}
	if err := m.AlterTopicConfigs("plain", []ConfigOp{{Name: "retention.ms", Op: ConfigOpSet, Value: strPtr("5000")}}, false); err != nil {
		t.Fatalf("plain topics stay alterable: %v", err)
	}
	if err := m.SetOwner("events-a", OwnerNone); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	_, m = openTestManager(t, fs, "data")
	for name, o := range map[string]Owner{"legacy": OwnerQueue, "events-a": OwnerNone, "plain": OwnerNone} {
		tp, ok := m.Topic(name)
		if !ok || tp.Owner() != o {
			t.Fatalf("after the second restart %s: owner %q, want %q", name, tp.Owner(), o)
		}
	}
	if tp, _ := m.Topic("plain"); tp.Config("retention.ms") != "5000" {
		t.Fatalf("plain topic's config lost: %q", tp.Config("retention.ms"))
	}
	if err := m.DeleteTopic("events-a"); err != nil {
		t.Fatalf("a released topic is a plain topic again: %v", err)
	}
}

func strPtr(s string) *string { return &s }
