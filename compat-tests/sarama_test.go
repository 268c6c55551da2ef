package compattests

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func init() {
	// SARAMA_DEBUG=1 prints sarama's client log.
	if os.Getenv("SARAMA_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "compat-tests-sarama"
	cfg.Version = v
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Net.WriteTimeout = 30 * time.Second
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	return cfg
}

// TestSaramaProduceConsume: SyncProducer (keyed, headers, explicit
// timestamps, acks=all) at several protocol versions and codecs, with and
// without idempotence, then a partition consumer from the oldest offset.
func TestSaramaProduceConsume(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	cases := []struct {
		name       string
		version    sarama.KafkaVersion
		codec      sarama.CompressionCodec
		idempotent bool
	}{
		{"V0_11_0_0-gzip", sarama.V0_11_0_0, sarama.CompressionGZIP, false},
		{"V2_1_0_0-zstd", sarama.V2_1_0_0, sarama.CompressionZSTD, false},
		{"V2_8_0_0-none", sarama.V2_8_0_0, sarama.CompressionNone, false},
		{"V3_6_0_0-lz4", sarama.V3_6_0_0, sarama.CompressionLZ4, false},
		{"Max-" + sarama.MaxVersion.String() + "-zstd", sarama.MaxVersion, sarama.CompressionZSTD, false},
		{"V2_8_0_0-snappy-idempotent", sarama.V2_8_0_0, sarama.CompressionSnappy, true},
		{"Max-gzip-idempotent", sarama.MaxVersion, sarama.CompressionGZIP, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, adm, topic, 2, nil)
			cfg := saramaConfig(c.version)
			cfg.Producer.Compression = c.codec
			if c.idempotent {
				cfg.Producer.Idempotent = true
				cfg.Net.MaxOpenRequests = 1
			}
			prod, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
			if err != nil {
				t.Fatalf("NewSyncProducer: %v", err)
			}
			defer prod.Close()

			type sentMsg struct {
				key, value string
				headers    []sarama.RecordHeader
				ts         time.Time
				partition  int32
				offset     int64
			}
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			var sent []sentMsg
			for i := 0; i < 40; i++ {
				m := sentMsg{
					key:   fmt.Sprintf("key-%d", i%5),
					value: fmt.Sprintf("sarama-%s-%d", c.name, i),
					headers: []sarama.RecordHeader{
						{Key: []byte("idx"), Value: []byte(fmt.Sprint(i))},
						{Key: []byte("lib"), Value: []byte("sarama")},
					},
					ts: base.Add(time.Duration(i) * time.Millisecond),
				}
				pm := &sarama.ProducerMessage{
					Topic:     topic,
					Key:       sarama.StringEncoder(m.key),
					Value:     sarama.StringEncoder(m.value),
					Headers:   m.headers,
					Timestamp: m.ts,
				}
				p, off, err := prod.SendMessage(pm)
				if err != nil {
					t.Fatalf("SendMessage %d: %v", i, err)
				}
				m.partition, m.offset = p, off
				sent = append(sent, m)
			}
			// Per partition, acked offsets are 0, 1, 2, ... in send order.
			next := map[int32]int64{}
			byPart := map[int32][]sentMsg{}
			for _, m := range sent {
				if m.offset != next[m.partition] {
					t.Errorf("SendMessage %q acked at %d/%d, want offset %d", m.value, m.partition, m.offset, next[m.partition])
				}
				next[m.partition] = m.offset + 1
				byPart[m.partition] = append(byPart[m.partition], m)
			}

			cons, err := sarama.NewConsumer([]string{b.Addr()}, saramaConfig(c.version))
			if err != nil {
				t.Fatalf("NewConsumer: %v", err)
			}
			defer cons.Close()
			for p, want := range byPart {
				pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
				if err != nil {
					t.Fatalf("ConsumePartition %d: %v", p, err)
				}
				timeout := time.After(opTimeout)
				for i, w := range want {
					var m *sarama.ConsumerMessage
					select {
					case m = <-pc.Messages():
					case err := <-pc.Errors():
						t.Fatalf("partition %d: %v", p, err)
					case <-timeout:
						t.Fatalf("partition %d: got %d of %d messages", p, i, len(want))
					}
					if m.Offset != w.offset || string(m.Key) != w.key || string(m.Value) != w.value {
						t.Errorf("p%d #%d: got offset %d %q=%q, want offset %d %q=%q", p, i, m.Offset, m.Key, m.Value, w.offset, w.key, w.value)
					}
					if !m.Timestamp.Equal(w.ts) {
						t.Errorf("p%d@%d: timestamp %v, want %v", p, m.Offset, m.Timestamp, w.ts)
					}
					if len(m.Headers) != len(w.headers) {
						t.Errorf("p%d@%d: %d headers, want %d", p, m.Offset, len(m.Headers), len(w.headers))
						continue
					}
					for j, h := range m.Headers {
						if !bytes.Equal(h.Key, w.headers[j].Key) || !bytes.Equal(h.Value, w.headers[j].Value) {
							t.Errorf("p%d@%d: header %d %s=%s, want %s=%s", p, m.Offset, j, h.Key, h.Value, w.headers[j].Key, w.headers[j].Value)
						}
					}
				}
				if hwm := pc.HighWaterMarkOffset(); hwm != int64(len(want)) {
					t.Errorf("partition %d: consumer high watermark %d, want %d", p, hwm, len(want))
				}
				pc.Close()
			}
		})
	}
}

// TestSaramaAdmin: ClusterAdmin CreateTopic (with a config), ListTopics,
// DescribeTopics, duplicate create, DeleteTopic.
func TestSaramaAdmin(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ca, err := sarama.NewClusterAdmin([]string{b.Addr()}, saramaConfig(sarama.V2_8_0_0))
	if err != nil {
		t.Fatalf("NewClusterAdmin: %v", err)
	}
	defer ca.Close()
	topic := topicName(t, "")
	retention := "3600000"
	detail := &sarama.TopicDetail{
		NumPartitions:     2,
		ReplicationFactor: 1,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}
	if err := ca.CreateTopic(topic, detail, false); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	err = ca.CreateTopic(topic, detail, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("CreateTopic of an existing topic: %v, want %v", err, sarama.ErrTopicAlreadyExists)
	}

	topics, err := ca.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	td, ok := topics[topic]
	if !ok {
		t.Fatalf("ListTopics: %s missing (have %d topics)", topic, len(topics))
	}
	if td.NumPartitions != 2 {
		t.Errorf("ListTopics %s: %d partitions, want 2", topic, td.NumPartitions)
	}
	if v := td.ConfigEntries["retention.ms"]; v == nil || *v != retention {
		t.Errorf("ListTopics %s: retention.ms = %v, want %s", topic, v, retention)
	}

	md, err := ca.DescribeTopics([]string{topic})
	if err != nil {
		t.Fatalf("DescribeTopics: %v", err)
	}
	if len(md) != 1 || md[0].Err != sarama.ErrNoError {
		t.Fatalf("DescribeTopics: %+v", md)
	}
	if len(md[0].Partitions) != 2 {
		t.Errorf("DescribeTopics: %d partitions, want 2", len(md[0].Partitions))
	}
	for _, p := range md[0].Partitions {
		if p.Leader != 1 {
			t.Errorf("DescribeTopics p%d: leader %d, want 1", p.ID, p.Leader)
		}
	}

	if err := ca.DeleteTopic(topic); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		topics, err := ca.ListTopics()
		if err != nil {
			t.Fatalf("ListTopics after delete: %v", err)
		}
		if _, ok := topics[topic]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed 20s after DeleteTopic", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := ca.DeleteTopic(topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("DeleteTopic of a deleted topic: %v, want %v", err, sarama.ErrUnknownTopicOrPartition)
	}
}
