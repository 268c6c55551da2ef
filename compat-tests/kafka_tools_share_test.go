package compattests

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const toolShareGroups = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"

// TestKafkaToolsShareGroups: kafka-share-groups.sh against both brokers:
// --reset-offsets --to-earliest --execute (AlterShareGroupOffsets),
// --describe --offsets (DescribeShareGroupOffsets) and --delete-offsets
// (DeleteShareGroupOffsets) on an empty share group.
func TestKafkaToolsShareGroups(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		adm := newAdmin(t, addr)
		topic := topicName(t, "")
		group := "share." + topic
		createTopic(t, adm, topic, 1, nil)
		prod := newClient(t, addr, kgo.DefaultProduceTopic(topic))
		for range 5 {
			if err := prod.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := retryCoordinator(t, func() error {
			r, err := adm.AlterShareGroupOffsets(testCtx(t, opTimeout), group, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 5}}})
			if err == nil {
				err, _ = r.Lookup(topic, 0)
			}
			return err
		}); err != nil {
			t.Fatalf("creating the group at offset 5: %v", err)
		}
		sg := []string{"--bootstrap-server", addr, "--group", group}
		out := mustTool(t, "", toolShareGroups, append(sg, "--reset-offsets", "--to-earliest", "--topic", topic, "--execute")...)
		if !strings.Contains(out, topic) {
			t.Errorf("--reset-offsets printed:\n%s", out)
		}
		if got := shareGroupOffsets(t, addr, group, topic); got != "0:0/5" {
			t.Errorf("after --reset-offsets --to-earliest: %s, want 0:0/5", got)
		}
		out = mustTool(t, "", toolShareGroups, append(sg, "--describe", "--offsets")...)
		if !strings.Contains(out, topic) {
			t.Errorf("--describe --offsets lacks %s:\n%s", topic, out)
		}
		mustTool(t, "", toolShareGroups, append(sg, "--delete-offsets", "--topic", topic)...)
		if got := shareGroupOffsets(t, addr, group, topic); got != "" {
			t.Errorf("after --delete-offsets: %q, want nothing", got)
		}
	})
}
