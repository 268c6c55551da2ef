package compattests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka's own command-line tools (the classes behind kafka-topics.sh,
// kafka-configs.sh, ...; the kafka-tools and kafka_2.13 jars that
// reference/pom.xml fetches), run as a user runs them, against our broker
// and against Apache Kafka: each with its exit code and output checked.

const toolTimeout = 90 * time.Second

// toolResult is one run of a Kafka tool.
type toolResult struct {
	stdout, stderr string
	code           int
}

func (r toolResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// kafkaTool runs the tool whose main class is class with args, and
// returns its output and exit code. It skips (or fails under
// KAFKA_REFERENCE_REQUIRED) where the jars or java are missing.
func kafkaTool(t testing.TB, stdin string, class string, args ...string) toolResult {
	t.Helper()
	lib, err := filepath.Abs(referenceLib())
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(lib, "kafka-tools-*.jar")); len(m) == 0 {
		if os.Getenv("KAFKA_REFERENCE_REQUIRED") != "" {
			t.Fatalf("Kafka's tools required but missing from %s", lib)
		}
		t.Skipf("Kafka's tools are not in %s (run: mvn -B -q -f compat-tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib)", lib)
	}
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	// Quick JVM start: these tools run for a second or two.
	jvm := []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true", "-cp", filepath.Join(lib, "*"), class}
	cmd := exec.CommandContext(ctx, "java", append(jvm, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	res := toolResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v", class, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within %v:\n%s", class, args, toolTimeout, res)
	}
	return res
}

// mustTool runs a tool that must succeed and returns its stdout.
func mustTool(t testing.TB, stdin, class string, args ...string) string {
	t.Helper()
	r := kafkaTool(t, stdin, class, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: %s", class, strings.Join(args, " "), r)
	}
	return r.stdout
}

const (
	toolTopics         = "org.apache.kafka.tools.TopicCommand"
	toolConfigs        = "kafka.admin.ConfigCommand"
	toolConsumerGroups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	toolTransactions   = "org.apache.kafka.tools.TransactionsCommand"
	toolGetOffsets     = "org.apache.kafka.tools.GetOffsetShell"
	toolDeleteRecords  = "org.apache.kafka.tools.DeleteRecordsCommand"
	toolConsoleProduce = "org.apache.kafka.tools.ConsoleProducer"
	toolConsoleConsume = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	toolVerifiableProd = "org.apache.kafka.tools.VerifiableProducer"
	toolVerifiableCons = "org.apache.kafka.tools.VerifiableConsumer"
	toolLogDirs        = "org.apache.kafka.tools.LogDirsCommand"
	toolLeaderElection = "org.apache.kafka.tools.LeaderElectionCommand"
	toolCluster        = "org.apache.kafka.tools.ClusterTool"
	toolApiVersions    = "org.apache.kafka.tools.BrokerApiVersionsCommand"
)

// TestKafkaToolsTopicsAndConfigs: kafka-topics (create with a config,
// list, describe, add partitions, delete, describe of a missing topic) and
// kafka-configs (add, describe, delete a topic config).
func TestKafkaToolsTopicsAndConfigs(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		topic := topicName(t, "")
		bs := []string{"--bootstrap-server", addr}
		out := mustTool(t, "", toolTopics, append(bs, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000")...)
		if !strings.Contains(out, "Created topic "+topic) {
			t.Errorf("create: %q", out)
		}
		if out := mustTool(t, "", toolTopics, append(bs, "--list")...); !containsLine(out, topic) {
			t.Errorf("list lacks %s:\n%s", topic, out)
		}
		out = mustTool(t, "", toolTopics, append(bs, "--describe", "--topic", topic)...)
		for _, want := range []string{"PartitionCount: 2", "ReplicationFactor: 1", "retention.ms=3600000", "Partition: 0", "Partition: 1", "Leader: 1", "Replicas: 1", "Isr: 1"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe lacks %q:\n%s", want, out)
			}
		}
		mustTool(t, "", toolTopics, append(bs, "--alter", "--topic", topic, "--partitions", "3")...)
		if out := mustTool(t, "", toolTopics, append(bs, "--describe", "--topic", topic)...); !strings.Contains(out, "PartitionCount: 3") {
			t.Errorf("after --alter --partitions 3:\n%s", out)
		}

		cfg := append(bs, "--entity-type", "topics", "--entity-name", topic)
		mustTool(t, "", toolConfigs, append(cfg, "--alter", "--add-config", "retention.ms=5000,cleanup.policy=compact")...)
		out = mustTool(t, "", toolConfigs, append(cfg, "--describe")...)
		if !strings.Contains(out, "retention.ms=5000") || !strings.Contains(out, "cleanup.policy=compact") {
			t.Errorf("configs describe after alter:\n%s", out)
		}
		mustTool(t, "", toolConfigs, append(cfg, "--alter", "--delete-config", "retention.ms")...)
		if out := mustTool(t, "", toolConfigs, append(cfg, "--describe")...); strings.Contains(out, "retention.ms=") {
			t.Errorf("retention.ms still set after --delete-config:\n%s", out)
		}
		if r := kafkaTool(t, "", toolConfigs, append(cfg, "--alter", "--add-config", "retention.ms=banana")...); r.code == 0 {
			t.Errorf("an invalid config value was accepted: %s", r)
		}

		mustTool(t, "", toolTopics, append(bs, "--delete", "--topic", topic)...)
		waitFor(t, 30*time.Second, "topic gone from --list after --delete", func() string {
			if out := mustTool(t, "", toolTopics, append(bs, "--list")...); containsLine(out, topic) {
				return "still listed"
			}
			return ""
		})
		if r := kafkaTool(t, "", toolTopics, append(bs, "--describe", "--topic", topic)...); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "does not exist") {
			t.Errorf("describe of a deleted topic: %s", r)
		}
	})
}

// TestKafkaToolsConsoleAndGroups: kafka-console-producer with keys,
// kafka-console-consumer in a group, kafka-consumer-groups (list,
// describe with lag, reset-offsets dry run and execute, delete),
// kafka-get-offsets and kafka-delete-records.
func TestKafkaToolsConsoleAndGroups(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		topic := topicName(t, "")
		group := topicName(t, "group")
		bs := []string{"--bootstrap-server", addr}
		mustTool(t, "", toolTopics, append(bs, "--create", "--topic", topic, "--partitions", "1")...)
		var lines []string
		for i := range 10 {
			lines = append(lines, fmt.Sprintf("k%d:v%d", i, i))
		}
		mustTool(t, strings.Join(lines, "\n")+"\n", toolConsoleProduce, append(bs, "--topic", topic, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)

		out := mustTool(t, "", toolConsoleConsume, append(bs, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "10",
			"--formatter-property", "print.key=true", "--formatter-property", "key.separator=:", "--timeout-ms", "30000")...)
		if got := strings.Fields(out); strings.Join(got, " ") != strings.Join(lines, " ") {
			t.Fatalf("console consumer read %q, want %q", got, lines)
		}

		if out := mustTool(t, "", toolGetOffsets, append(bs, "--topic", topic)...); strings.TrimSpace(out) != topic+":0:10" {
			t.Errorf("get-offsets: %q, want %s:0:10", out, topic)
		}

		cg := append(bs, "--group", group)
		if out := mustTool(t, "", toolConsumerGroups, append(bs, "--list")...); !containsLine(out, group) {
			t.Errorf("groups --list lacks %s:\n%s", group, out)
		}
		out = mustTool(t, "", toolConsumerGroups, append(cg, "--describe")...)
		if row := describeRow(out, topic); row == nil || row["CURRENT-OFFSET"] != "10" || row["LOG-END-OFFSET"] != "10" || row["LAG"] != "0" {
			t.Errorf("groups --describe: row %v from:\n%s", row, out)
		}
		out = mustTool(t, "", toolConsumerGroups, append(cg, "--reset-offsets", "--to-earliest", "--topic", topic, "--dry-run")...)
		if row := describeRow(out, topic); row == nil || row["NEW-OFFSET"] != "0" {
			t.Errorf("reset --dry-run: row %v from:\n%s", row, out)
		}
		mustTool(t, "", toolConsumerGroups, append(cg, "--reset-offsets", "--to-offset", "4", "--topic", topic, "--execute")...)
		out = mustTool(t, "", toolConsumerGroups, append(cg, "--describe")...)
		if row := describeRow(out, topic); row == nil || row["CURRENT-OFFSET"] != "4" || row["LAG"] != "6" {
			t.Errorf("after reset to 4: row %v from:\n%s", row, out)
		}

		offsets := filepath.Join(t.TempDir(), "offsets.json")
		if err := os.WriteFile(offsets, fmt.Appendf(nil, `{"version":1,"partitions":[{"topic":%q,"partition":0,"offset":3}]}`, topic), 0o644); err != nil {
			t.Fatal(err)
		}
		out = mustTool(t, "", toolDeleteRecords, append(bs, "--offset-json-file", offsets)...)
		if !strings.Contains(out, "low_watermark: 3") {
			t.Errorf("delete-records: %q, want low_watermark: 3", out)
		}
		if out := mustTool(t, "", toolGetOffsets, append(bs, "--topic", topic, "--time", "-2")...); strings.TrimSpace(out) != topic+":0:3" {
			t.Errorf("get-offsets earliest after delete-records: %q, want %s:0:3", out, topic)
		}

		mustTool(t, "", toolConsumerGroups, append(cg, "--delete")...)
		if out := mustTool(t, "", toolConsumerGroups, append(bs, "--list")...); containsLine(out, group) {
			t.Errorf("group listed after --delete:\n%s", out)
		}
	})
}

// TestKafkaToolsVerifiable: the producer and consumer of Kafka's own
// system tests, acks=all, 1000 records: every send acknowledged, every
// record consumed by a group.
func TestKafkaToolsVerifiable(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		topic := topicName(t, "")
		bs := []string{"--bootstrap-server", addr}
		mustTool(t, "", toolTopics, append(bs, "--create", "--topic", topic, "--partitions", "2")...)
		out := mustTool(t, "", toolVerifiableProd, append(bs, "--topic", topic, "--max-messages", "1000", "--acks", "-1")...)
		if n := strings.Count(out, `"name":"producer_send_success"`); n != 1000 || strings.Contains(out, "producer_send_error") {
			t.Fatalf("verifiable producer: %d successes (want 1000); errors: %v", n, strings.Contains(out, "producer_send_error"))
		}
		out = mustTool(t, "", toolVerifiableCons, append(bs, "--topic", topic, "--group-id", topicName(t, "vgroup"), "--max-messages", "1000", "--reset-policy", "earliest")...)
		consumed := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"name":"records_consumed"`) {
				var n int
				if i := strings.Index(line, `"count":`); i >= 0 {
					fmt.Sscanf(line[i+len(`"count":`):], "%d", &n)
				}
				consumed += n
			}
		}
		if consumed != 1000 {
			t.Errorf("verifiable consumer consumed %d, want 1000:\n%s", consumed, tailString(out, 4000))
		}
	})
}

// TestKafkaToolsTransactionsAndCluster: kafka-transactions list and
// describe of an open transaction, find-hanging, and abort of it by
// partition and start offset; kafka-log-dirs, kafka-leader-election,
// kafka-cluster cluster-id and kafka-broker-api-versions.
func TestKafkaToolsTransactionsAndCluster(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		topic := topicName(t, "")
		bs := []string{"--bootstrap-server", addr}
		mustTool(t, "", toolTopics, append(bs, "--create", "--topic", topic, "--partitions", "1")...)
		id := topicName(t, "txn")
		// The open transaction must outlive three JVM tool runs on a loaded
		// machine: a 10 s timeout aborted it before the abort tool ran.
		cl := txnProducer(t, addr, id, topic, kgo.TransactionTimeout(2*time.Minute))
		produceTxn(t, cl, true, "a")
		ctx := testCtx(t, opTimeout)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if out := mustTool(t, "", toolTransactions, append(bs, "list")...); !strings.Contains(out, id) || !strings.Contains(out, "Ongoing") {
			t.Errorf("transactions list:\n%s", out)
		}
		if out := mustTool(t, "", toolTransactions, append(bs, "describe", "--transactional-id", id)...); !strings.Contains(out, "Ongoing") || !strings.Contains(out, topic+"-0") {
			t.Errorf("transactions describe:\n%s", out)
		}
		mustTool(t, "", toolTransactions, append(bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")...)
		if got := committedEnds(t, addr, topic)[0]; got != 4 {
			t.Errorf("LSO after kafka-transactions abort: %d, want 4", got)
		}

		if out := mustTool(t, "", toolLogDirs, append(bs, "--describe", "--topic-list", topic)...); !strings.Contains(out, topic) {
			t.Errorf("log-dirs:\n%s", out)
		}
		r := kafkaTool(t, "", toolLeaderElection, append(bs, "--election-type", "preferred", "--topic", topic, "--partition", "0")...)
		if !strings.Contains(r.stdout+r.stderr, "Valid replica already elected") {
			t.Errorf("leader-election: %s", r)
		}
		if out := mustTool(t, "", toolCluster, append([]string{"cluster-id"}, bs...)...); !strings.HasPrefix(out, "Cluster ID: ") {
			t.Errorf("cluster-id: %q", out)
		}
		if out := mustTool(t, "", toolApiVersions, bs...); !strings.Contains(out, "Produce(0):") || !strings.Contains(out, "Fetch(1):") {
			t.Errorf("broker-api-versions:\n%s", out)
		}
	})
}

func containsLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// describeRow parses the table kafka-consumer-groups prints and returns the
// row of topic (partition 0) by column name.
func describeRow(out, topic string) map[string]string {
	var header []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if f[0] == "GROUP" {
			header = f
			continue
		}
		if header != nil && len(f) >= 3 && f[1] == topic && f[2] == "0" {
			row := map[string]string{}
			for i, h := range header {
				if i < len(f) {
					row[h] = f[i]
				}
			}
			return row
		}
	}
	return nil
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
