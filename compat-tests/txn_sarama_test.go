package compattests

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestTxnSaramaCommitAbort: sarama's transactional producer commits and
// aborts; sarama's and franz-go's read_committed consumers see only the
// committed records.
func TestTxnSaramaCommitAbort(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	createTopic(t, newAdmin(t, b.Addr()), topic, 1, nil)

	cfg := saramaConfig(sarama.V2_8_0_0)
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = topicName(t, "txn")
	cfg.Producer.Transaction.Timeout = 10 * time.Second
	prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatalf("NewSyncProducer: %v", err)
	}
	defer prod.Close()
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := prod.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		for _, v := range values {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("SendMessage %q: %v", v, err)
			}
		}
		end := prod.CommitTxn
		if !commit {
			end = prod.AbortTxn
		}
		if err := end(); err != nil {
			t.Fatalf("end transaction (commit=%v): %v", commit, err)
		}
	}
	txn(true, "c1", "c2")
	txn(false, "a1", "a2")
	txn(true, "c3")
	want := "c1,c2,c3"

	if got := strings.Join(readCommittedValues(t, b.Addr(), topic, 3), ","); got != want {
		t.Fatalf("franz-go read_committed saw %s, want %s", got, want)
	}

	ccfg := saramaConfig(sarama.V2_8_0_0)
	ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
	consumer, err := sarama.NewConsumer([]string{b.Addr()}, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < 3 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama consumer: %v", err)
		case <-timeout:
			t.Fatalf("sarama read_committed: %v after 20s, want %s", got, want)
		}
	}
	// Nothing else may follow (the aborted records).
	select {
	case m := <-pc.Messages():
		t.Fatalf("sarama read_committed saw an extra record %q at %d", m.Value, m.Offset)
	case <-time.After(500 * time.Millisecond):
	}
	sort.Strings(got)
	if strings.Join(got, ",") != want {
		t.Fatalf("sarama read_committed saw %v, want %s", got, want)
	}
}
