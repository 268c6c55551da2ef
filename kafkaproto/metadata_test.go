package kafkaproto

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataByTopicIDWithEmptyName pins the bug where a Metadata v12
// request topic carrying a topic ID and the name "" (what the Java Admin's
// describeTopics(TopicCollection.ofTopicIds(...)) sends) was looked up by the
// name "": the answer was INVALID_TOPIC_EXCEPTION with a zero topic ID, and
// the Java client failed with IllegalStateException "Use errors() when
// managing topic using topic name". Kafka looks such topics up by ID.
func TestMetadataByTopicIDWithEmptyName(t *testing.T) {
	_, addr := startTestServer(t)
	cl := newClient(t, addr)
	ctx := context.Background()

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "by-id", 2, 1
	create.Topics = append(create.Topics, ct)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, cresp)
	}
	id := cresp.Topics[0].TopicID

	for _, tc := range []struct {
		name string
		id   [16]byte
		want int16
	}{
		{"by-id", id, 0},
		{"", id, 0},
		{"", [16]byte{1}, kerr.UnknownTopicID.Code},
	} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		name := tc.name
		rt.Topic = &name
		rt.TopicID = tc.id
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("name %q id %x: %d topics, want 1", tc.name, tc.id, len(resp.Topics))
		}
		got := resp.Topics[0]
		if got.ErrorCode != tc.want || got.TopicID != tc.id {
			t.Fatalf("name %q id %x: error %d id %x, want error %d and the asked ID", tc.name, tc.id, got.ErrorCode, got.TopicID, tc.want)
		}
		if tc.want == 0 && (got.Topic == nil || *got.Topic != "by-id" || len(got.Partitions) != 2) {
			t.Fatalf("name %q: topic %v with %d partitions, want by-id with 2", tc.name, got.Topic, len(got.Partitions))
		}
	}
}
