package compattests

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaGoCreateTopic creates a topic the way kafka-go users do: through a
// connection to the controller.
func kafkaGoCreateTopic(t testing.TB, addr, topic string, partitions int) {
	t.Helper()
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("kafka.Dial: %v", err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("Controller: %v", err)
	}
	if ctrl.ID != 1 {
		t.Errorf("Controller id %d, want 1", ctrl.ID)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatalf("dial controller %s:%d: %v", ctrl.Host, ctrl.Port, err)
	}
	defer cc.Close()
	err = cc.CreateTopics(kafka.TopicConfig{
		Topic:             topic,
		NumPartitions:     partitions,
		ReplicationFactor: 1,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "86400000"}},
	})
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
}

// TestKafkaGoWriterReader: kafka-go Writer (RequiredAcks all, every codec,
// hash balancer) and a Reader per explicit partition (no group).
func TestKafkaGoWriterReader(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	for _, codec := range []struct {
		name string
		c    kafka.Compression
	}{
		{"none", 0},
		{"gzip", kafka.Gzip},
		{"snappy", kafka.Snappy},
		{"lz4", kafka.Lz4},
		{"zstd", kafka.Zstd},
	} {
		t.Run(codec.name, func(t *testing.T) {
			topic := topicName(t, "")
			kafkaGoCreateTopic(t, b.Addr(), topic, 2)
			w := &kafka.Writer{
				Addr: kafka.TCP(b.Addr()),
				// A Transport per writer: the shared default one caches
				// metadata and would not know the topic created above.
				Transport:    &kafka.Transport{},
				Topic:        topic,
				Balancer:     &kafka.Hash{},
				RequiredAcks: kafka.RequireAll,
				Compression:  codec.c,
				BatchTimeout: 10 * time.Millisecond,
				BatchSize:    20,
				MaxAttempts:  5,
			}
			defer w.Close()
			ctx := testCtx(t, opTimeout)
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			const n = 60
			var msgs []kafka.Message
			for i := 0; i < n; i++ {
				msgs = append(msgs, kafka.Message{
					Key:     []byte(fmt.Sprintf("key-%d", i%6)),
					Value:   []byte(fmt.Sprintf("kafkago-%s-%03d", codec.name, i)),
					Headers: []kafka.Header{{Key: "idx", Value: []byte(strconv.Itoa(i))}, {Key: "lib", Value: []byte("kafka-go")}},
					Time:    base.Add(time.Duration(i) * time.Millisecond),
				})
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("WriteMessages: %v", err)
			}

			byValue := make(map[string]int)
			for i, m := range msgs {
				byValue[string(m.Value)] = i
			}
			seen := make(map[string]bool)
			for p := 0; p < 2; p++ {
				lc, err := kafka.DialLeader(ctx, "tcp", b.Addr(), topic, p)
				if err != nil {
					t.Fatalf("DialLeader p%d: %v", p, err)
				}
				last, err := lc.ReadLastOffset()
				lc.Close()
				if err != nil {
					t.Fatalf("ReadLastOffset p%d: %v", p, err)
				}
				r := kafka.NewReader(kafka.ReaderConfig{
					Brokers:   []string{b.Addr()},
					Topic:     topic,
					Partition: p,
					MinBytes:  1,
					MaxBytes:  1 << 20,
					MaxWait:   500 * time.Millisecond,
				})
				if err := r.SetOffset(kafka.FirstOffset); err != nil {
					t.Fatalf("SetOffset: %v", err)
				}
				lastIdx := map[string]int{}
				for off := int64(0); off < last; off++ {
					m, err := r.ReadMessage(ctx)
					if err != nil {
						t.Fatalf("p%d: ReadMessage at %d of %d: %v", p, off, last, err)
					}
					if m.Offset != off {
						t.Fatalf("p%d: message offset %d, want %d (contiguous from 0)", p, m.Offset, off)
					}
					i, ok := byValue[string(m.Value)]
					if !ok {
						t.Fatalf("p%d@%d: unknown value %q", p, m.Offset, m.Value)
					}
					if seen[string(m.Value)] {
						t.Errorf("p%d@%d: value %q read twice", p, m.Offset, m.Value)
					}
					seen[string(m.Value)] = true
					want := msgs[i]
					if string(m.Key) != string(want.Key) || !m.Time.Equal(want.Time) {
						t.Errorf("p%d@%d: key %q time %v, want %q %v", p, m.Offset, m.Key, m.Time, want.Key, want.Time)
					}
					if len(m.Headers) != 2 || m.Headers[0].Key != "idx" || string(m.Headers[0].Value) != strconv.Itoa(i) || m.Headers[1].Key != "lib" {
						t.Errorf("p%d@%d: headers %v", p, m.Offset, m.Headers)
					}
					if prev, ok := lastIdx[string(m.Key)]; ok && prev > i {
						t.Errorf("p%d@%d: key %s: message %d after %d (order per key broken)", p, m.Offset, m.Key, i, prev)
					}
					lastIdx[string(m.Key)] = i
				}
				r.Close()
			}
			if len(seen) != n {
				t.Errorf("read %d distinct messages, wrote %d", len(seen), n)
			}
		})
	}
}

// TestKafkaGoConn: kafka.DialLeader, Conn.ReadPartitions, Brokers,
// WriteMessages, ReadFirstOffset/ReadLastOffset, Seek + ReadBatch,
// DeleteTopics.
func TestKafkaGoConn(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	kafkaGoCreateTopic(t, b.Addr(), topic, 3)
	ctx := testCtx(t, opTimeout)

	conn, err := kafka.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	brokers, err := conn.Brokers()
	if err != nil {
		t.Fatalf("Brokers: %v", err)
	}
	if len(brokers) != 1 || brokers[0].ID != 1 || net.JoinHostPort(brokers[0].Host, strconv.Itoa(brokers[0].Port)) != b.Addr() {
		t.Errorf("Brokers %+v; want node 1 at %s", brokers, b.Addr())
	}
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		t.Fatalf("ReadPartitions: %v", err)
	}
	if len(parts) != 3 {
		t.Fatalf("ReadPartitions: %d partitions, want 3: %+v", len(parts), parts)
	}
	ids := map[int]bool{}
	for _, p := range parts {
		ids[p.ID] = true
		if p.Topic != topic || p.Leader.ID != 1 || len(p.Replicas) != 1 || len(p.Isr) != 1 {
			t.Errorf("partition %+v; want leader 1, one replica, one ISR", p)
		}
		if p.Error != nil {
			t.Errorf("partition %d: %v", p.ID, p.Error)
		}
	}
	if !ids[0] || !ids[1] || !ids[2] {
		t.Errorf("partition ids %v, want 0 1 2", ids)
	}

	lc, err := kafka.DialLeader(ctx, "tcp", b.Addr(), topic, 1)
	if err != nil {
		t.Fatalf("DialLeader: %v", err)
	}
	defer lc.Close()
	_ = lc.SetDeadline(time.Now().Add(opTimeout))
	var msgs []kafka.Message
	for i := 0; i < 25; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("conn-%02d", i))})
	}
	if _, err := lc.WriteMessages(msgs[:10]...); err != nil {
		t.Fatalf("WriteMessages: %v", err)
	}
	if _, err := lc.WriteMessages(msgs[10:]...); err != nil {
		t.Fatalf("WriteMessages: %v", err)
	}
	first, err := lc.ReadFirstOffset()
	if err != nil || first != 0 {
		t.Errorf("ReadFirstOffset = %d, %v; want 0", first, err)
	}
	last, err := lc.ReadLastOffset()
	if err != nil || last != 25 {
		t.Errorf("ReadLastOffset = %d, %v; want 25", last, err)
	}
	if _, err := lc.Seek(0, kafka.SeekAbsolute); err != nil {
		t.Fatalf("Seek: %v", err)
	}
	var got []string
	for len(got) < 25 {
		batch := lc.ReadBatch(1, 1<<20)
		before := len(got)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					batch.Close()
					t.Fatalf("ReadBatch: %v", err)
				}
				break
			}
			if m.Offset != int64(len(got)) {
				t.Fatalf("message offset %d, want %d", m.Offset, len(got))
			}
			got = append(got, string(m.Value))
		}
		if err := batch.Close(); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("batch close: %v", err)
		}
		if len(got) == before {
			t.Fatalf("ReadBatch returned nothing at offset %d of 25", len(got))
		}
	}
	for i, v := range got {
		if v != string(msgs[i].Value) {
			t.Fatalf("offset %d: %q, want %q (all: %s)", i, v, msgs[i].Value, strings.Join(got, ","))
		}
	}
	// Other partitions stay empty.
	lc0, err := kafka.DialLeader(ctx, "tcp", b.Addr(), topic, 0)
	if err != nil {
		t.Fatalf("DialLeader p0: %v", err)
	}
	if last, err := lc0.ReadLastOffset(); err != nil || last != 0 {
		t.Errorf("p0 ReadLastOffset = %d, %v; want 0", last, err)
	}
	lc0.Close()

	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("Controller: %v", err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatalf("dial controller: %v", err)
	}
	defer cc.Close()
	if err := cc.DeleteTopics(topic); err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	waitTopicGone(t, b.Addr(), topic)
}
