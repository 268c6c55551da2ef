package compattests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kcatPath finds kcat (or its old name kafkacat) or skips the test.
func kcatPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("kcat not installed: apt-get install kcat")
	return ""
}

// runKcat runs kcat with stdin and returns stdout; a non-zero exit or an
// ERROR line on stderr fails the test.
func runKcat(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	bin := kcatPath(t)
	// Short: kcat finishes in well under a second when the broker behaves;
	// a consumer that never reaches the end of the partition would hang.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %v timed out; stderr:\n%s", args, stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %v: %v; stderr:\n%s", args, err, stderr.String())
	}
	if strings.Contains(stderr.String(), "ERROR") {
		t.Fatalf("kcat %v reported errors:\n%s", args, stderr.String())
	}
	return stdout.String()
}

type kcatMetadata struct {
	ControllerID int32 `json:"controllerid"`
	Brokers      []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcatMetadata: `kcat -L` lists the broker and the topics, in text and
// in JSON.
func TestKcatMetadata(t *testing.T) {
	kcatPath(t)
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	t1, t2 := topicName(t, "a"), topicName(t, "b")
	createTopic(t, adm, t1, 1, nil)
	createTopic(t, adm, t2, 4, nil)

	out := runKcat(t, "", "-L", "-b", b.Addr(), "-m", "10")
	for _, want := range []string{
		"broker 1 at " + b.Addr(),
		fmt.Sprintf("topic %q with 1 partitions:", t1),
		fmt.Sprintf("topic %q with 4 partitions:", t2),
		"partition 3, leader 1, replicas: 1, isrs: 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kcat -L output lacks %q:\n%s", want, out)
		}
	}

	var md kcatMetadata
	js := runKcat(t, "", "-L", "-J", "-b", b.Addr(), "-m", "10", "-t", t2)
	if err := json.Unmarshal([]byte(js), &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, js)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != b.Addr() {
		t.Errorf("kcat -L -J brokers %+v; want node 1 at %s", md.Brokers, b.Addr())
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != t2 || len(md.Topics[0].Partitions) != 4 || md.Topics[0].Error != "" {
		t.Fatalf("kcat -L -J -t %s: topics %+v", t2, md.Topics)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != 1 || p.Error != "" {
			t.Errorf("kcat -L -J %s/%d: leader %d error %q", t2, p.Partition, p.Leader, p.Error)
		}
	}
}

// TestKcatProduceConsume: `kcat -P` with keys (-K:) and headers (-H) under
// every compression codec (and once with enable.idempotence), then `kcat -C
// -o beginning -e` reads them back with '%k %s %h %o'.
func TestKcatProduceConsume(t *testing.T) {
	kcatPath(t)
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"none", []string{"-X", "compression.codec=none"}},
		{"gzip", []string{"-X", "compression.codec=gzip"}},
		{"snappy", []string{"-X", "compression.codec=snappy"}},
		{"lz4", []string{"-X", "compression.codec=lz4"}},
		{"zstd", []string{"-X", "compression.codec=zstd"}},
		{"idempotent-lz4", []string{"-X", "compression.codec=lz4", "-X", "enable.idempotence=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := topicName(t, "")
			createTopic(t, adm, topic, 1, nil)
			var in strings.Builder
			var want []string
			const n = 50
			for i := 0; i < n; i++ {
				fmt.Fprintf(&in, "key%d:value-%s-%d\n", i%3, c.name, i)
				want = append(want, fmt.Sprintf("key%d value-%s-%d h1=v1,h2=%s %d", i%3, c.name, i, c.name, i))
			}
			args := append([]string{"-P", "-b", b.Addr(), "-t", topic, "-p", "0", "-K:", "-H", "h1=v1", "-H", "h2=" + c.name,
				"-X", "acks=all", "-X", "linger.ms=5", "-m", "10"}, c.extra...)
			runKcat(t, in.String(), args...)

			out := runKcat(t, "", "-C", "-b", b.Addr(), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
				"-f", `%k %s %h %o\n`, "-m", "10")
			got := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("kcat -C output differs.\n got (%d lines):\n%s\nwant (%d lines):\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
			}
		})
	}
}

// TestKcatQueryOffsets: `kcat -Q -t topic:partition:ts` resolves a
// timestamp to an offset (ListOffsets by time through librdkafka).
func TestKcatQueryOffsets(t *testing.T) {
	kcatPath(t)
	t.Parallel()
	b := startBroker(t)
	cl := newClient(t, b.Addr())
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 1, nil)
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	produceTimestamps(t, cl, topic, []int64{t0, t0 + 10, t0 + 20, t0 + 30})
	out := runKcat(t, "", "-Q", "-b", b.Addr(), "-t", fmt.Sprintf("%s:0:%d", topic, t0+15), "-m", "10")
	want := regexp.MustCompile(regexp.QuoteMeta(topic) + `\s+\[0\]\s+offset 2\b`)
	if !want.MatchString(out) {
		t.Errorf("kcat -Q output %q; want %s [0] offset 2", out, topic)
	}
}
