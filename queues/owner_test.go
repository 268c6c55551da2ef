package queues

import (
	"errors"
	"testing"
	"time"

	"github.com/vibemq/broker/topics"
)

// TestQueueTopicsOwned pins the fix for Kafka clients breaking queues: a
// queue's topic and its automatic DLQ's are owned by the queue engine, so
// the topics layer refuses a client's delete; the queue keeps working and
// its own delete still removes both topics.
func TestQueueTopicsOwned(t *testing.T) {
	en := newEnv(t)
	en.create("jobs", nil)
	for _, name := range []string{"jobs", "jobs.dlq"} {
		tp, ok := en.tm.Topic(name)
		if !ok || tp.Owner() != topics.OwnerQueue {
			t.Fatalf("topic %s: exists %v, owner %q", name, ok, tp.Owner())
		}
		if err := en.tm.DeleteTopic(name); !errors.Is(err, topics.ErrTopicOwned) {
			t.Fatalf("client delete of %s: %v", name, err)
		}
	}
	en.send("jobs", t0, body("a"))
	got := en.receive("jobs", 1, 30000, t0)
	if bodies(got) != "a" {
		t.Fatalf("receive after the refused delete: %s", bodies(got))
	}
	if res := en.ack("jobs", t0, got[0].Receipt); codeOf(res[0]) != "acked" {
		t.Fatalf("ack: %+v", res[0])
	}
	if err := en.e.DeleteQueue("jobs", false, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs", "jobs.dlq"} {
		if _, ok := en.tm.Topic(name); ok {
			t.Fatalf("topic %s left after the queue's delete", name)
		}
	}
}

// TestQueueTopicOwnershipAtStart: a queue whose topic was created before
// owners were stored (unowned catalog row) gets its topic marked at start;
// a queue-owned topic that no queue has (a crash between the topic and the
// catalog rows of a create, or the reverse in a delete) is deleted at
// start, so the name can be used again.
func TestQueueTopicOwnershipAtStart(t *testing.T) {
	en := newEnv(t)
	en.create("old", &AttributesPatch{DeadLetter: pstr("none")})
	en.send("old", t0, body("kept"))
	if err := en.tm.SetOwner("old", topics.OwnerNone); err != nil { // as an older broker left it
		t.Fatal(err)
	}
	if _, err := en.tm.CreateOwnedTopic("half", 1, nil, topics.OwnerQueue); err != nil {
		t.Fatal(err)
	}
	if _, err := en.tm.CreateTopic("plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	en.restart(t0)

	if tp, ok := en.tm.Topic("old"); !ok || tp.Owner() != topics.OwnerQueue {
		t.Fatalf("old queue's topic after start: exists %v, owner %q", ok, tp.Owner())
	}
	if got := bodies(en.receive("old", 1, 30000, t0)); got != "kept" {
		t.Fatalf("old queue after start: %q", got)
	}
	if _, ok := en.tm.Topic("half"); ok {
		t.Fatal("orphan queue topic kept at start")
	}
	if tp, ok := en.tm.Topic("plain"); !ok || tp.Owner() != topics.OwnerNone {
		t.Fatal("a plain topic was touched at start")
	}
	en.create("half", nil)
}
