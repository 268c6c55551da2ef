package compattests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Black-box tests of `broker storage` (VibeMQ's storage management
// contract: stats, backup, restore, compact; and verify, after the CRC per
// record of an append-only log): online through the HTTP API and offline on
// a stopped broker's data directory.

// produceNumbered writes values prefix-0 .. prefix-(n-1) to partition 0 of
// topic, one batch each, and fails the test on any error.
func produceNumbered(t *testing.T, addr, topic, prefix string, from, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation())
	ctx := testCtx(t, opTimeout)
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: 0}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// consumeAll reads partition 0 of topic from offset 0 until the end.
func consumeAll(t *testing.T, addr, topic string, want int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var out []string
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(out), want, topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(out)) {
				t.Fatalf("record at offset %d, want %d", r.Offset, len(out))
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}

var (
	corruptOnce sync.Once
	corruptBin  string
	corruptErr  error
)

// corruptBatch damages the batch of topic/0 holding offset in a stopped
// broker's data dir, through the test-only internal/testtools/corruptbatch
// helper (it rewrites the stored value via pebblestore with one byte
// flipped). It returns the damaged batch's base offset.
func corruptBatch(t *testing.T, dataDir, topic string, offset int64) string {
	t.Helper()
	corruptOnce.Do(func() {
		dir, err := os.MkdirTemp("", "compat-tests-corrupt-")
		if err != nil {
			corruptErr = err
			return
		}
		corruptBin = filepath.Join(dir, "corruptbatch")
		out, err := exec.Command("go", "build", "-o", corruptBin, "github.com/vibemq/broker/internal/testtools/corruptbatch").CombinedOutput()
		if err != nil {
			corruptErr = fmt.Errorf("build corruptbatch: %v\n%s", err, out)
		}
	})
	if corruptErr != nil {
		t.Fatal(corruptErr)
	}
	out, err := exec.Command(corruptBin, "-data-dir", dataDir, "-topic", topic, "-offset", fmt.Sprint(offset)).CombinedOutput()
	if err != nil {
		t.Fatalf("corruptbatch: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// copyDir copies a stopped broker's data directory.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// TestStorageBackupRestore: an online backup taken while the broker serves,
// restored offline into a new directory, starts a broker with exactly the
// data acknowledged before the backup: Kafka records and events. Restore
// refuses a non-empty target, a running broker's directory and a directory
// that is not a backup, changing nothing.
func TestStorageBackupRestore(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	produceNumbered(t, b.Addr(), topic, "v", 0, 50)
	for i := range 10 {
		expected := any(i - 1)
		if i == 0 {
			expected = "no_stream"
		}
		esMust(t, b, "POST", "/v1/stores/ledger/streams/acct/events", esAppendBody(expected, map[string]any{"type": "T", "data": i}), 201)
	}
	eventsBefore := esReadAll(t, b, "ledger")

	root := t.TempDir()
	backup := filepath.Join(root, "backup")
	code, out, errOut := brokerCLI(t, "storage", "backup", "--server", b.HTTPAddr(), "--to", backup)
	if code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	// Written after the backup: must not be in it.
	produceNumbered(t, b.Addr(), topic, "v", 50, 5)
	esMust(t, b, "POST", "/v1/stores/ledger/streams/acct/events", esAppendBody("any", map[string]any{"type": "Later"}), 201)

	if code, _, _ := brokerCLI(t, "storage", "backup", "--server", b.HTTPAddr(), "--to", backup); code != 4 {
		t.Fatalf("backup over a backup: exit %d, want 4", code)
	}
	restored := filepath.Join(root, "restored")
	code, out, errOut = brokerCLI(t, "storage", "restore", "--from", backup, "--data-dir", restored)
	if code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		name, from, to string
		want           int
	}{
		{"non-empty target", backup, restored, 4},
		{"running broker's dir", backup, b.DataDir(), 4},
		{"not a backup", root, filepath.Join(root, "other"), 1},
	} {
		code, _, errOut := brokerCLI(t, "storage", "restore", "--from", c.from, "--data-dir", c.to)
		if code != c.want {
			t.Fatalf("restore %s: exit %d, want %d: %s", c.name, code, c.want, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "other")); err == nil {
		t.Fatalf("a refused restore created its target")
	}

	b2 := startBroker(t, withDataDir(restored))
	values := consumeAll(t, b2.Addr(), topic, 50)
	for i, v := range values {
		if v != fmt.Sprintf("v-%d", i) {
			t.Fatalf("restored record %d = %q", i, v)
		}
	}
	if end := listEndOffset(t, b2.Addr(), topic); end != 50 {
		t.Fatalf("restored topic ends at %d, want 50 (records after the backup leaked in)", end)
	}
	if got := esReadAll(t, b2, "ledger"); esJSON(got) != esJSON(eventsBefore) {
		t.Fatalf("restored events differ:\nwant %v\ngot  %v", eventsBefore, got)
	}
	esMust(t, b2, "POST", "/v1/stores/ledger/streams/acct/events", esAppendBody(9, map[string]any{"type": "AfterRestore"}), 201)
	if code, out, _ := brokerCLI(t, "storage", "verify", "--server", b2.HTTPAddr()); code != 0 {
		t.Fatalf("verify of the restored broker: exit %d\n%s", code, out)
	}
}

// listEndOffset is the high watermark of topic/0.
func listEndOffset(t *testing.T, addr, topic string) int64 {
	t.Helper()
	ends, err := newAdmin(t, addr).ListEndOffsets(testCtx(t, opTimeout), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// TestStorageVerifyDetectsCorruption: verify passes on intact data, online
// and offline; after one stored batch of a copy is rewritten with a byte
// flipped, offline verify of the copy exits 7 naming the topic, partition
// and offset, and so does online verify of a broker running on the copy.
// The original stays clean.
func TestStorageVerifyDetectsCorruption(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	produceNumbered(t, b.Addr(), topic, "r", 0, 20)
	esMust(t, b, "POST", "/v1/stores/audit/streams/x/events", esAppendBody("any", map[string]any{"type": "T"}), 201)
	code, out, errOut := brokerCLI(t, "storage", "verify", "--server", b.HTTPAddr())
	if code != 0 || !strings.Contains(out, "no damage found") {
		t.Fatalf("online verify of intact data: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := brokerCLI(t, "storage", "verify", "--data-dir", b.DataDir()); code != 6 || !strings.Contains(errOut, "--server") {
		t.Fatalf("offline verify of a running broker's dir: exit %d, want 6: %s", code, errOut)
	}
	b.Stop()

	damaged := filepath.Join(t.TempDir(), "copy")
	copyDir(t, b.DataDir(), damaged)
	base := corruptBatch(t, damaged, topic, 7)
	if base != "7" {
		t.Fatalf("corruptbatch damaged the batch at %s, want 7 (one record per batch)", base)
	}
	code, out, errOut = brokerCLI(t, "storage", "verify", "--data-dir", damaged)
	if code != 7 || !strings.Contains(out, topic) || !strings.Contains(errOut, "1 damaged") {
		t.Fatalf("offline verify of damaged data: exit %d, want 7\n%s%s", code, out, errOut)
	}
	code, out, _ = brokerCLI(t, "storage", "verify", "--data-dir", damaged, "-o", "json")
	var res struct {
		OK      bool `json:"ok"`
		Damaged []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Key       string `json:"key"`
			Reason    string `json:"reason"`
		} `json:"damaged"`
	}
	if code != 7 || json.Unmarshal([]byte(out), &res) != nil || res.OK || len(res.Damaged) != 1 {
		t.Fatalf("verify -o json: exit %d: %s", code, out)
	}
	d := res.Damaged[0]
	if d.Topic != topic || d.Partition != 0 || d.Offset != 7 || d.Key == "" || !strings.Contains(d.Reason, "CRC") {
		t.Fatalf("damage report %+v", d)
	}
	if code, out, _ := brokerCLI(t, "storage", "verify", "--data-dir", b.DataDir()); code != 0 {
		t.Fatalf("the original was damaged too: exit %d\n%s", code, out)
	}
	b2 := startBroker(t, withDataDir(damaged))
	if code, out, _ := brokerCLI(t, "storage", "verify", "--server", b2.HTTPAddr()); code != 7 || !strings.Contains(out, topic) {
		t.Fatalf("online verify of damaged data: exit %d, want 7\n%s", code, out)
	}
}

// TestStorageStatsCompact: stats count topics, messages and events online
// and offline alike; compact runs online and offline; offline commands
// refuse a running broker's directory and a directory that is not broker
// data.
func TestStorageStatsCompact(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := topicName(t, "")
	produceNumbered(t, b.Addr(), topic, "s", 0, 30)
	esMust(t, b, "POST", "/v1/stores/metrics/streams/x/events", esAppendBody("any",
		map[string]any{"type": "T"}, map[string]any{"type": "T"}), 201)
	type statsJSON struct {
		Topics      int    `json:"topics"`
		Messages    int64  `json:"messages"`
		Queues      *int64 `json:"queues"`
		EventStores *int   `json:"event_stores"`
		Events      *int64 `json:"events"`
		Bytes       int64  `json:"bytes"`
	}
	stats := func(args ...string) statsJSON {
		t.Helper()
		code, out, errOut := brokerCLI(t, append([]string{"storage", "stats", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("stats %v: exit %d\n%s%s", args, code, out, errOut)
		}
		var s statsJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("stats json: %v\n%s", err, out)
		}
		return s
	}
	online := stats("--server", b.HTTPAddr())
	if online.Topics < 2 || online.Messages != 32 || online.Queues == nil || online.EventStores == nil || *online.Events != 2 || online.Bytes <= 0 {
		t.Fatalf("online stats %+v", online)
	}
	if code, out, errOut := brokerCLI(t, "storage", "compact", "--server", b.HTTPAddr()); code != 0 || !strings.Contains(out, "compacted") {
		t.Fatalf("online compact: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := brokerCLI(t, "storage", "stats", "--data-dir", b.DataDir()); code != 6 {
		t.Fatalf("offline stats of a running broker: exit %d, want 6", code)
	}
	b.Stop()
	offline := stats("--data-dir", b.DataDir())
	if offline.Topics != online.Topics || offline.Messages != 32 || *offline.Events != 2 {
		t.Fatalf("offline stats %+v", offline)
	}
	if code, out, errOut := brokerCLI(t, "storage", "compact", "--data-dir", b.DataDir()); code != 0 {
		t.Fatalf("offline compact: exit %d\n%s%s", code, out, errOut)
	}
	empty := t.TempDir()
	if code, _, _ := brokerCLI(t, "storage", "stats", "--data-dir", empty); code != 3 {
		t.Fatalf("offline stats of an empty dir: exit %d, want 3", code)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("offline stats wrote into a directory that is not broker data")
	}
	b.Start()
	if got := esReadAll(t, b, "metrics"); len(got) != 2 {
		t.Fatalf("events after offline compact: %v", got)
	}
	if v := consumeAll(t, b.Addr(), topic, 30); v[29] != "s-29" {
		t.Fatalf("records after offline compact: %v", v[29])
	}
}
