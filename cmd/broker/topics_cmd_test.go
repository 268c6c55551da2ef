package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startServing runs the broker in this process on a free port (no HTTP
// listener) until the test ends, and returns its Kafka address.
func startServing(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := defaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.KafkaAddr = addr
	cfg.HTTPAddr = ""
	cfg.MemtableSize = 4 << 20
	cfg.CacheSize = 8 << 20
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case err := <-done:
			t.Fatalf("broker exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not listening on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTopicsCommand(t *testing.T) {
	addr := startServing(t)
	cli := func(args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		full := append([]string{"broker", "topics", args[0], "--bootstrap-server", addr}, args[1:]...)
		code := realMain(full, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	expect := func(wantCode int, want string, args ...string) string {
		t.Helper()
		code, out := cli(args...)
		if code != wantCode || !strings.Contains(out, want) {
			t.Fatalf("broker topics %v: exit %d, output:\n%s\nwant exit %d and %q", args, code, out, wantCode, want)
		}
		return out
	}

	expect(0, "topic table created with 3 partitions", "create", "-p", "3", "--config", "cleanup.policy=compact", "table")
	expect(1, "TOPIC_ALREADY_EXISTS", "create", "table")
	expect(0, "exists already", "create", "--if-not-exists", "table")
	expect(1, "INVALID_CONFIG", "create", "--config", "retention.ms=soon", "bad")
	expect(2, "not KEY=VALUE", "create", "--config", "retention.ms", "bad")
	expect(0, "would be created", "create", "--validate-only", "maybe")
	expect(0, "topic logs created with 1 partitions", "create", "logs")
	out := expect(0, "table", "list")
	if !strings.Contains(out, "logs") || strings.Contains(out, "maybe") {
		t.Fatalf("list:\n%s", out)
	}

	expect(0, "altered", "alter", "--config", "retention.ms=1000", "--delete-config", "cleanup.policy", "table")
	expect(1, "INVALID_CONFIG", "alter", "--config", "segment.bytes=10", "table")
	expect(0, "the change is valid", "alter", "--validate-only", "--config", "segment.ms=100", "table")
	out = expect(0, "retention.ms=1000", "describe", "table")
	if strings.Contains(out, "cleanup.policy") || strings.Contains(out, "segment.ms") {
		t.Fatalf("describe after alter:\n%s", out)
	}
	expect(0, "cleanup.policy=delete (default_config)", "describe", "--all-configs", "table")

	expect(0, "topic table now has 5 partitions", "add-partitions", "-p", "5", "table")
	expect(1, "INVALID_PARTITIONS", "add-partitions", "-p", "2", "table")
	expect(0, "Partitions: 5", "describe", "table")

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("logs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	expect(0, "partition logs/0: log start offset 2", "delete-records", "--offset", "2", "logs")
	out = expect(0, "LOG START", "describe", "logs")
	if !regexpLine(out, `^\s+0\s+1\s+2\s+5\s+3$`) {
		t.Fatalf("describe after delete-records:\n%s", out)
	}
	expect(1, "OFFSET_OUT_OF_RANGE", "delete-records", "--offset", "9", "logs")
	expect(0, "log start offset 5", "delete-records", "--offset", "-1", "--partition", "0", "logs")
	expect(0, "topic logs deleted", "delete", "logs")
	expect(1, "UNKNOWN_TOPIC_OR_PARTITION", "delete", "logs")
	expect(2, "one topic name", "alter", "a", "b")
}

func regexpLine(out, pattern string) bool {
	for _, line := range strings.Split(out, "\n") {
		if regexp.MustCompile(pattern).MatchString(line) {
			return true
		}
	}
	return false
}
