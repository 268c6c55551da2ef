package compattests

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kgosasl "github.com/segmentio/kafka-go/sasl"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

// saramaSCRAM adapts xdg-go/scram to sarama.SCRAMClient (sarama leaves the
// SCRAM implementation to the application).
type saramaSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, password, authz string) error {
	c, err := s.hash.NewClient(user, password, authz)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}
func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// saramaSecure is a sarama config for a SASL mechanism, over TLS when tlsCfg is set.
func saramaSecure(mech, user, password string, tlsCfg *tls.Config, handshake int16) *sarama.Config {
	cfg := saramaConfig(sarama.V3_6_0_0)
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.User, cfg.Net.SASL.Password = user, password
	cfg.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
	cfg.Net.SASL.Version = handshake
	// sarama refuses ApiVersions with a v0 handshake (the raw tokens must
	// come first on the connection).
	cfg.ApiVersionsRequest = handshake != sarama.SASLHandshakeV0
	switch mech {
	case sarama.SASLTypeSCRAMSHA256:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA256} }
	case sarama.SASLTypeSCRAMSHA512:
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{hash: xdgscram.SHA512} }
	}
	if tlsCfg != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tlsCfg
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Metadata.Retry.Max = 2
	return cfg
}

type saramaGroupHandler struct {
	mu   sync.Mutex
	got  []string
	done chan struct{}
	once sync.Once
}

func (h *saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaGroupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, string(m.Value))
		if len(h.got) == 3 {
			h.once.Do(func() { close(h.done) })
		}
		h.mu.Unlock()
	}
	return nil
}

// TestSecuritySarama: sarama with PLAIN (SASL_SSL, handshake v1 and v0)
// and SCRAM-SHA-256/512 (SASL_PLAINTEXT, SASL_SSL): SyncProducer, a
// consumer group and ClusterAdmin (DescribeUserScramCredentials); a wrong
// password gets SASL_AUTHENTICATION_FAILED.
func TestSecuritySarama(t *testing.T) {
	b := startSecureBroker(t)
	createUser(t, b.adminClient(t), "sarama", "sarama-pw")
	cases := []struct {
		name, mech string
		useTLS     bool
		handshake  int16
	}{
		{"PLAIN-SASL_SSL", sarama.SASLTypePlaintext, true, sarama.SASLHandshakeV1},
		{"PLAIN-SASL_SSL-handshake-v0", sarama.SASLTypePlaintext, true, sarama.SASLHandshakeV0},
		{"SCRAM-SHA-256-SASL_PLAINTEXT", sarama.SASLTypeSCRAMSHA256, false, sarama.SASLHandshakeV1},
		{"SCRAM-SHA-512-SASL_SSL", sarama.SASLTypeSCRAMSHA512, true, sarama.SASLHandshakeV1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := b.saslPlaintext()
			var tlsCfg *tls.Config
			if tc.useTLS {
				addr, tlsCfg = b.saslSSL(), b.pki.clientTLS(t, "")
			}
			cfg := saramaSecure(tc.mech, "sarama", "sarama-pw", tlsCfg, tc.handshake)
			topic := topicName(t, "")
			adm, err := sarama.NewClusterAdmin([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("admin: %v", err)
			}
			defer adm.Close()
			if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
				t.Fatalf("create topic: %v", err)
			}
			users, err := adm.DescribeUserScramCredentials([]string{"sarama"})
			if err != nil || len(users) != 1 || len(users[0].CredentialInfos) != 2 {
				t.Fatalf("DescribeUserScramCredentials: %v %+v", err, users)
			}
			prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
			if err != nil {
				t.Fatalf("producer: %v", err)
			}
			defer prod.Close()
			for i := range 3 {
				if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v" + strconv.Itoa(i))}); err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			group, err := sarama.NewConsumerGroup([]string{addr}, topic+"-g", cfg)
			if err != nil {
				t.Fatalf("consumer group: %v", err)
			}
			defer group.Close()
			h := &saramaGroupHandler{done: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			go func() {
				for ctx.Err() == nil {
					if err := group.Consume(ctx, []string{topic}, h); err != nil {
						return
					}
				}
			}()
			select {
			case <-h.done:
			case <-ctx.Done():
				t.Fatalf("consumed %v before the deadline", h.got)
			}
			cancel()
			h.mu.Lock()
			if strings.Join(h.got, ",") != "v0,v1,v2" {
				t.Errorf("consumed %v", h.got)
			}
			h.mu.Unlock()

			bad := saramaSecure(tc.mech, "sarama", "wrong", tlsCfg, tc.handshake)
			client, err := sarama.NewClient([]string{addr}, bad)
			if err == nil {
				client.Close()
				t.Fatal("wrong password accepted")
			}
			// Over a v0 handshake there is no error channel: the broker
			// closes the connection (as Kafka does).
			if tc.handshake == sarama.SASLHandshakeV1 && !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
				t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

// TestSecurityKafkaGo: segmentio/kafka-go with PLAIN and SCRAM-SHA-256/512
// over SASL_PLAINTEXT and SASL_SSL: Writer, a group Reader, and the Client
// (Metadata, DescribeUserScramCredentials); a wrong password gets
// SASL_AUTHENTICATION_FAILED.
func TestSecurityKafkaGo(t *testing.T) {
	b := startSecureBroker(t)
	createUser(t, b.adminClient(t), "kgo", "kgo-pw")
	mech := func(t *testing.T, name, pw string) kgosasl.Mechanism {
		switch name {
		case "PLAIN":
			return kgoplain.Mechanism{Username: "kgo", Password: pw}
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			algo := kgoscram.SHA256
			if name == "SCRAM-SHA-512" {
				algo = kgoscram.SHA512
			}
			m, err := kgoscram.Mechanism(algo, "kgo", pw)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		return nil
	}
	for _, tc := range []struct {
		mech   string
		useTLS bool
	}{{"PLAIN", true}, {"SCRAM-SHA-256", false}, {"SCRAM-SHA-512", true}} {
		t.Run(tc.mech, func(t *testing.T) {
			addr := b.saslPlaintext()
			var tlsCfg *tls.Config
			if tc.useTLS {
				addr, tlsCfg = b.saslSSL(), b.pki.clientTLS(t, "")
			}
			transport := &kafkago.Transport{SASL: mech(t, tc.mech, "kgo-pw"), TLS: tlsCfg}
			client := &kafkago.Client{Addr: kafkago.TCP(addr), Transport: transport, Timeout: opTimeout}
			ctx := testCtx(t, opTimeout)
			topic := topicName(t, "")
			created, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}})
			if err != nil || created.Errors[topic] != nil {
				t.Fatalf("create topic: %v %v", err, created)
			}
			meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
			if err != nil || len(meta.Brokers) != 1 || meta.Brokers[0].Port != portOf(t, addr) {
				t.Fatalf("metadata: %v %+v", err, meta)
			}
			users, err := client.DescribeUserScramCredentials(ctx, &kafkago.DescribeUserScramCredentialsRequest{Users: []kafkago.UserScramCredentialsUser{{Name: "kgo"}}})
			if err != nil || len(users.Results) != 1 || len(users.Results[0].CredentialInfos) != 2 {
				t.Fatalf("DescribeUserScramCredentials: %v %+v", err, users)
			}
			w := &kafkago.Writer{Addr: kafkago.TCP(addr), Topic: topic, Transport: transport, RequiredAcks: kafkago.RequireAll}
			defer w.Close()
			for i := range 3 {
				if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte("v" + strconv.Itoa(i))}); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			dialer := &kafkago.Dialer{Timeout: 10 * time.Second, SASLMechanism: mech(t, tc.mech, "kgo-pw"), TLS: tlsCfg}
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, GroupID: topic + "-g", Topic: topic, Dialer: dialer,
				StartOffset: kafkago.FirstOffset, MaxWait: 100 * time.Millisecond})
			defer r.Close()
			var got []string
			for len(got) < 3 {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("read: %v (got %v)", err, got)
				}
				got = append(got, string(m.Value))
			}
			if strings.Join(got, ",") != "v0,v1,v2" {
				t.Errorf("consumed %v", got)
			}

			bad := &kafkago.Client{Addr: kafkago.TCP(addr), Timeout: 20 * time.Second,
				Transport: &kafkago.Transport{SASL: mech(t, tc.mech, "wrong"), TLS: tlsCfg}}
			_, err = bad.Metadata(ctx, &kafkago.MetadataRequest{})
			if !errors.Is(err, kafkago.SASLAuthenticationFailed) {
				t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return p
}
