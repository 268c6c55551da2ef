package events

import (
	"errors"
	"testing"

	"github.com/vibemq/broker/topics"
)

// TestStoreTopicOwnershipAtStart: a store's topic is owned by the event
// store from its creation; one created before owners were stored gets
// marked at start; a store-owned topic that no store has is released to
// Kafka clients (not deleted); the store's own delete removes its topic.
func TestStoreTopicOwnershipAtStart(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("ledger")
	mustAppend(t, st, "acct", NoStream, e.now(), ev("Opened", "1"))
	if tp, _ := e.tm.Topic("ledger"); tp.Owner() != topics.OwnerEventStore {
		t.Fatalf("new store's topic owner %q", tp.Owner())
	}
	if err := e.tm.SetOwner("ledger", topics.OwnerNone); err != nil { // as an older broker left it
		t.Fatal(err)
	}
	if _, err := e.tm.CreateOwnedTopic("stray", 1, nil, topics.OwnerEventStore); err != nil {
		t.Fatal(err)
	}
	e.reopen()

	if tp, ok := e.tm.Topic("ledger"); !ok || tp.Owner() != topics.OwnerEventStore {
		t.Fatalf("store topic after start: exists %v owner %q", ok, tp.Owner())
	}
	st, err := e.svc.Store("ledger")
	if err != nil {
		t.Fatal(err)
	}
	if page, err := st.ReadStream("acct", 0, false, 0, 0); err != nil || len(page.Events) != 1 {
		t.Fatalf("read after start: %v %+v", err, page)
	}
	if tp, ok := e.tm.Topic("stray"); !ok || tp.Owner() != topics.OwnerNone {
		t.Fatalf("orphan store topic after start: exists %v owner %q", ok, tp.Owner())
	}
	if err := e.tm.DeleteTopic("stray"); err != nil {
		t.Fatalf("a released topic is a plain topic: %v", err)
	}
	if err := e.tm.DeleteTopic("ledger"); !errors.Is(err, topics.ErrTopicOwned) {
		t.Fatalf("client delete of a store topic: %v", err)
	}
	if err := e.svc.DeleteStore("ledger"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.tm.Topic("ledger"); ok {
		t.Fatal("the store's delete left its topic")
	}
}
