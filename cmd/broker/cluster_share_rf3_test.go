package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterShareGroupReplicatedTopic: share groups (KIP-932) on a topic
// of replication factor 3 fail loudly, not silently. Before the fix a
// share consumer of an RF 3 topic received nothing and no error (the
// share-partition read the leader's empty local partition); now every
// broker answers its ShareFetch INVALID_REPLICATION_FACTOR with a message
// saying what to do, which franz-go's share consumer surfaces as the
// partition's fetch error. A share group on an RF 1 topic of the same
// cluster still receives its records.
func TestClusterShareGroupReplicatedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	tc := startTestCluster(t, func(c *Config) { c.GroupShareAutoOffsetReset = "earliest" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := tc.client()
	tc.waitAgreed(ctx, cl, func(*kmsg.MetadataResponse) bool { return true })
	const single, replicated = "share-rf1", "share-rf3"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, single); err != nil {
		t.Fatal(err)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = replicated, 3, 3
	create.Topics, create.TimeoutMillis = append(create.Topics, ct), 10000
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	leaders := tc.waitPreferredLeaders(ctx, cl, replicated)
	m := tc.waitAgreed(ctx, cl, func(m *kmsg.MetadataResponse) bool { _, ok := topicOf(m, single); return ok })
	rf3, _ := topicOf(m, replicated)
	prod := tc.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range 3 {
		rs = append(rs, &kgo.Record{Topic: single, Value: fmt.Appendf(nil, "one-%d", i)},
			&kgo.Record{Topic: replicated, Partition: int32(i), Value: fmt.Appendf(nil, "three-%d", i)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// RF 1: the records arrive.
	c1 := tc.client(kgo.ShareGroup("share-rf1-group"), kgo.ConsumeTopics(single), kgo.FetchMaxWait(500*time.Millisecond))
	for got := 0; got < 3; {
		fs := c1.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("RF 1 share consumer: %d of 3 records", got)
		}
		fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); got++ })
	}

	// RF 3: the share consumer's poll reports the error, and no record.
	c3 := tc.client(kgo.ShareGroup("share-rf3-group"), kgo.ConsumeTopics(replicated), kgo.FetchMaxWait(500*time.Millisecond))
	pollCtx, stopPolling := context.WithTimeout(ctx, 30*time.Second)
	defer stopPolling()
	for surfaced := false; !surfaced; {
		fs := c3.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatal("the RF 3 share consumer's polls surfaced no INVALID_REPLICATION_FACTOR")
		}
		fs.EachRecord(func(r *kgo.Record) { t.Fatalf("the RF 3 share consumer received %s", r.Value) })
		fs.EachError(func(topic string, p int32, err error) {
			if topic == replicated && errors.Is(err, kerr.InvalidReplicationFactor) {
				surfaced = true
			}
		})
	}

	// The brokers that do not coordinate the group (which would refuse
	// the raw request's unknown member first) answer a raw ShareFetch of
	// partition 0 alike, leader or not, with the message.
	coordinator := findGroupCoordinator(ctx, t, cl, "share-rf3-group")
	for id := int32(1); id <= 3; id++ {
		if id == coordinator {
			continue
		}
		sf := kmsg.NewPtrShareFetchRequest()
		sf.GroupID, sf.MemberID = kmsg.StringPtr("share-rf3-group"), kmsg.StringPtr("raw-member")
		sf.MaxWaitMillis, sf.MaxBytes, sf.MaxRecords = 0, 1<<20, 10
		st := kmsg.NewShareFetchRequestTopic()
		st.TopicID = rf3.TopicID
		sp := kmsg.NewShareFetchRequestTopicPartition()
		st.Partitions = append(st.Partitions, sp)
		sf.Topics = append(sf.Topics, st)
		fr, err := sf.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			t.Fatalf("ShareFetch on broker %d (partition 0 led by %d): %v %+v", id, leaders[0], err, fr)
		}
		p := fr.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.InvalidReplicationFactor.Code || p.ErrorMessage == nil ||
			!strings.Contains(*p.ErrorMessage, "replication factor above 1") {
			t.Fatalf("ShareFetch on broker %d: code %d message %v, want INVALID_REPLICATION_FACTOR saying why", id, p.ErrorCode, p.ErrorMessage)
		}
	}
}
