package compattests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSaramaLegacyVersions: sarama pinned to Kafka 0.8.2 (Produce v0,
// Fetch v0: magic-0 message sets) and 0.10.2 (Produce v2, Fetch v3: magic 1
// with timestamps), uncompressed and in compressed wrappers, produces; a
// current client (franz-go) reads the records with their keys, values and
// timestamps; then franz-go adds records of today's format (zstd, headers,
// a committed transaction) and the old consumer reads the whole partition
// as message sets: every record once at its offset, the transaction's
// marker left out. Apache Kafka 4 removed these versions (KIP-896), so this
// is ours alone (DESIGN.md, Deviations).
func TestSaramaLegacyVersions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	cases := []struct {
		name    string
		version sarama.KafkaVersion
		codec   sarama.CompressionCodec
	}{
		{"V0_8_2_0-none", sarama.V0_8_2_0, sarama.CompressionNone},
		{"V0_8_2_0-gzip", sarama.V0_8_2_0, sarama.CompressionGZIP},
		{"V0_10_2_0-none", sarama.V0_10_2_0, sarama.CompressionNone},
		{"V0_10_2_0-snappy", sarama.V0_10_2_0, sarama.CompressionSnappy},
		{"V0_10_2_0-lz4", sarama.V0_10_2_0, sarama.CompressionLZ4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := topicName(t, "")
			createTopic(t, adm, topic, 1, nil)
			magic1 := c.version.IsAtLeast(sarama.V0_10_0_0)

			cfg := saramaConfig(c.version)
			cfg.Producer.Compression = c.codec
			prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
			if err != nil {
				t.Fatalf("NewSyncProducer: %v", err)
			}
			defer prod.Close()
			const n = 20
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			before := time.Now().Add(-time.Second)
			msgs := make([]*sarama.ProducerMessage, n)
			for i := range msgs {
				msgs[i] = &sarama.ProducerMessage{
					Topic:     topic,
					Partition: 0,
					Key:       sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
					Value:     sarama.StringEncoder(fmt.Sprintf("%s-%d", c.name, i)),
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				}
			}
			// One call: the messages go in as few requests as sarama
			// makes, so compressed wrappers hold several messages.
			if err := prod.SendMessages(msgs); err != nil {
				t.Fatalf("SendMessages: %v", err)
			}
			after := time.Now().Add(time.Second)
			for i, m := range msgs {
				if m.Offset != int64(i) {
					t.Errorf("message %d acked at offset %d", i, m.Offset)
				}
			}

			// Today's client reads what the old one wrote.
			got := readPartitions(t, b.Addr(), topic, map[int32]int64{0: n})[0]
			if len(got) != n {
				t.Fatalf("franz-go read %d records, want %d", len(got), n)
			}
			for i, r := range got {
				if string(r.Key) != fmt.Sprintf("key-%d", i) || string(r.Value) != fmt.Sprintf("%s-%d", c.name, i) || r.Offset != int64(i) {
					t.Errorf("record %d: offset %d %s=%s", i, r.Offset, r.Key, r.Value)
				}
				if magic1 && !r.Timestamp.Equal(msgs[i].Timestamp) {
					t.Errorf("record %d: timestamp %v, want the producer's %v", i, r.Timestamp, msgs[i].Timestamp)
				}
				if !magic1 && (r.Timestamp.Before(before) || r.Timestamp.After(after)) {
					t.Errorf("record %d: timestamp %v, want the append time (magic 0 has none)", i, r.Timestamp)
				}
			}

			// Today's format: compressed, with headers, and a transaction.
			cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.DefaultProduceTopic(topic))
			for i := range 3 {
				r := &kgo.Record{Key: []byte(fmt.Sprintf("new-%d", i)), Value: []byte("zstd"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
				if err := cl.ProduceSync(testCtx(t, opTimeout), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			txn := newClient(t, b.Addr(), kgo.TransactionalID(topic+"-txn"), kgo.DefaultProduceTopic(topic))
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := txn.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Key: []byte("txn"), Value: []byte("committed")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := txn.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			// Offsets: 0-19 sarama, 20-22 franz-go, 23 the transaction's
			// record, 24 its commit marker.
			type want struct {
				offset     int64
				key, value string
			}
			var wants []want
			for i := range n {
				wants = append(wants, want{int64(i), fmt.Sprintf("key-%d", i), fmt.Sprintf("%s-%d", c.name, i)})
			}
			for i := range 3 {
				wants = append(wants, want{int64(n + i), fmt.Sprintf("new-%d", i), "zstd"})
			}
			wants = append(wants, want{n + 3, "txn", "committed"})

			cons, err := sarama.NewConsumer([]string{b.Addr()}, saramaConfig(c.version))
			if err != nil {
				t.Fatalf("NewConsumer: %v", err)
			}
			defer cons.Close()
			pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				t.Fatalf("ConsumePartition: %v", err)
			}
			defer pc.Close()
			timeout := time.After(opTimeout)
			for i, w := range wants {
				var m *sarama.ConsumerMessage
				select {
				case m = <-pc.Messages():
				case err := <-pc.Errors():
					t.Fatalf("consumer: %v", err)
				case <-timeout:
					t.Fatalf("old consumer got %d of %d messages", i, len(wants))
				}
				if m.Offset != w.offset || string(m.Key) != w.key || string(m.Value) != w.value {
					t.Errorf("#%d: offset %d %s=%s, want offset %d %s=%s", i, m.Offset, m.Key, m.Value, w.offset, w.key, w.value)
				}
				if len(m.Headers) != 0 {
					t.Errorf("#%d: %d headers; message sets have none", i, len(m.Headers))
				}
				if magic1 && i < n && !m.Timestamp.Equal(msgs[i].Timestamp) {
					t.Errorf("#%d: timestamp %v, want %v", i, m.Timestamp, msgs[i].Timestamp)
				}
			}
			select {
			case m := <-pc.Messages():
				t.Errorf("a message after the last record: offset %d %s=%s (the commit marker must be left out)", m.Offset, m.Key, m.Value)
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}

// TestKcatLegacyVersions: librdkafka told the broker is Kafka 0.9
// (api.version.request=false, broker.version.fallback=0.9.0: Produce v1,
// Fetch v1, magic 0) produces and consumes through kcat.
func TestKcatLegacyVersions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	old := []string{"-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"}
	lines := []string{"k1:one", "k2:two", "k3:three"}
	runKcat(t, strings.Join(lines, "\n")+"\n", append([]string{"-P", "-b", b.Addr(), "-t", topic, "-p", "0", "-K", ":", "-z", "gzip"}, old...)...)
	got := readPartitions(t, b.Addr(), topic, map[int32]int64{0: 3})[0]
	if len(got) != 3 || string(got[0].Key) != "k1" || string(got[2].Value) != "three" {
		t.Fatalf("franz-go read %d records of kcat's legacy produce: %v", len(got), values(got))
	}
	out := runKcat(t, "", append([]string{"-C", "-b", b.Addr(), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %k=%s\n"}, old...)...)
	want := "0 k1=one\n1 k2=two\n2 k3=three\n"
	if out != want {
		t.Errorf("kcat legacy consume:\n%s\nwant:\n%s", out, want)
	}
}
