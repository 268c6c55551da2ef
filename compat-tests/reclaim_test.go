package compattests

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sizes of the full-disk tests. The filesystem is small so that filling it
// takes seconds; the memtable is small so that Pebble's WAL files (up to
// about five memtables, preallocated) and flushes fit the margin.
const (
	smallFSBytes      = 300 << 20
	smallFSFreeMin    = "64MiB" // resume at 80 MiB free
	smallFSMemtable   = "4MiB"
	writesResumeBound = 30 * time.Second
)

// mountSmallFS mounts a tmpfs of size bytes on a new temp directory and
// returns it; it is unmounted when the test ends (after the broker, which
// is registered later, stopped). The test is skipped when it cannot mount
// (not root, no tmpfs).
func mountSmallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a small tmpfs for the full-disk test needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

func fsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // Bsize is uint32 on Darwin
}

// startSmallFSBroker starts the broker on a fresh small tmpfs.
func startSmallFSBroker(t *testing.T) (*brokerProc, string) {
	t.Helper()
	mnt := mountSmallFS(t, smallFSBytes)
	b := startBroker(t, withDataDir(filepath.Join(mnt, "data")),
		withArgs("--disk-free-min", smallFSFreeMin, "--memtable-size", smallFSMemtable, "--cache-size", "8MiB"))
	return b, mnt
}

// waitDiskNotLow polls /metrics until broker_disk_low is 0 and returns how
// long after since that was; it fails the test past writesResumeBound.
func waitDiskNotLow(t *testing.T, b *brokerProc, since time.Time) time.Duration {
	t.Helper()
	for {
		metrics := httpGet(t, "http://"+b.HTTPAddr()+"/metrics")
		if strings.Contains(metrics, "\nbroker_disk_low 0") {
			return time.Since(since)
		}
		if time.Since(since) > writesResumeBound {
			t.Fatalf("broker_disk_low still 1 %s after the deletion (broker_disk_free_bytes: %s)", writesResumeBound, metricLine(metrics, "broker_disk_free_bytes"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func metricLine(metrics, name string) string {
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return "absent"
}

func letters(rng *rand.Rand, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = 'a' + byte(rng.IntN(26))
	}
	return out
}

// TestDiskFullTopicDeleteResumesWrites pins issue 17: on an almost full
// disk the broker refused writes advising to "delete records, topics or
// queues to make room", but deleting a topic freed nothing (a Pebble range
// deletion is a tombstone; the data stayed until Pebble's own compactions
// reached it) and writes stayed refused. On a 300 MiB tmpfs with
// disk-free-min 64 MiB, a topic is filled until Produce is refused with
// KAFKA_STORAGE_ERROR; once it is deleted, Produce must be accepted again
// within 30 s, and every record acknowledged before in another topic is
// still there.
func TestDiskFullTopicDeleteResumesWrites(t *testing.T) {
	b, mnt := startSmallFSBroker(t)
	ctx := testCtx(t, 3*time.Minute)
	adm := newAdmin(t, b.Addr())
	keep, fill := topicName(t, "keep"), topicName(t, "fill")
	createTopic(t, adm, keep, 1, nil)
	createTopic(t, adm, fill, 2, nil)
	cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1))
	rng := rand.New(rand.NewPCG(17, 3))

	var kept [][]byte
	for range 40 {
		v := letters(rng, 16<<10)
		kept = append(kept, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: keep, Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", keep, err)
		}
	}

	// Fill until refused: 32 KiB records, 2 MiB per round.
	value := letters(rng, 32<<10)
	refused := false
	var written int64
	for round := 0; round < 400 && !refused; round++ {
		recs := make([]*kgo.Record, 64)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: fill, Partition: int32(i % 2), Value: value}
		}
		for _, r := range cl.ProduceSync(ctx, recs...) {
			switch {
			case r.Err == nil:
				written += int64(len(value))
			case errors.Is(r.Err, kerr.KafkaStorageError):
				refused = true
			default:
				t.Fatalf("produce to %s: %v", fill, r.Err)
			}
		}
	}
	if !refused {
		t.Fatalf("%d bytes written to a %d-byte filesystem and Produce was never refused", written, smallFSBytes)
	}
	freeFull := fsFree(t, mnt)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: keep, Value: []byte("refused?")}).FirstErr(); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to another topic on the full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}

	deleted := time.Now()
	if resp, err := adm.DeleteTopics(ctx, fill); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteTopics: %v %v", err, resp.Error())
	}
	guardResumed := waitDiskNotLow(t, b, deleted)
	var resumed time.Duration
	for {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: keep, Value: []byte("after")}).FirstErr()
		if err == nil {
			resumed = time.Since(deleted)
			break
		}
		if !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce after the deletion: %v", err)
		}
		if time.Since(deleted) > writesResumeBound {
			t.Fatalf("Produce still refused %s after deleting a topic of %d MB: free %d -> %d bytes",
				writesResumeBound, written>>20, freeFull, fsFree(t, mnt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// franz-go refreshes its metadata after KAFKA_STORAGE_ERROR, at most
	// every 5 s (MetadataMinAge): its produce can lag the broker's resume.
	t.Logf("filled %d MB; free space %d MB at refusal, %d MB after the deletion; the broker accepted writes %s after DeleteTopics, franz-go's produce succeeded after %s",
		written>>20, freeFull>>20, fsFree(t, mnt)>>20, guardResumed.Round(time.Millisecond), resumed.Round(time.Millisecond))

	got := readPartitions(t, b.Addr(), keep, map[int32]int64{0: int64(len(kept)) + 1})[0]
	if len(got) != len(kept)+1 {
		t.Fatalf("%s holds %d records, want %d", keep, len(got), len(kept)+1)
	}
	for i, v := range kept {
		if got[i].Offset != int64(i) || !bytes.Equal(got[i].Value, v) {
			t.Fatalf("%s record %d (offset %d) differs from what was acknowledged", keep, i, got[i].Offset)
		}
	}
	if string(got[len(kept)].Value) != "after" {
		t.Fatalf("last record %q", got[len(kept)].Value)
	}
}

// TestDiskFullQueueDeleteResumesWrites is TestDiskFullTopicDeleteResumesWrites
// for the native queue: a queue filled over HTTP until sends are answered
// 507 storage_full, then deleted; sends must be accepted again within 30 s,
// and the messages sent before to another queue are all there.
func TestDiskFullQueueDeleteResumesWrites(t *testing.T) {
	b, mnt := startSmallFSBroker(t)
	rng := rand.New(rand.NewPCG(17, 5))
	qMust(t, b, "PUT", "/v1/queues/keepq", map[string]any{}, 201)
	qMust(t, b, "PUT", "/v1/queues/fillq", map[string]any{}, 201)
	var kept []string
	for range 20 {
		kept = append(kept, string(letters(rng, 16<<10)))
	}
	qSend(t, b, "keepq", kept...)

	body := string(letters(rng, 32<<10))
	var msgs []map[string]any
	for range 32 {
		msgs = append(msgs, map[string]any{"body": body})
	}
	refused := false
	var written int64
	for round := 0; round < 400 && !refused; round++ {
		r := qCall(t, b, "POST", "/v1/queues/fillq/messages", map[string]any{"messages": msgs})
		switch {
		case r.Status == 200 && !strings.Contains(r.Raw, `"error"`):
			written += int64(len(msgs) * len(body))
		case r.Status == 507 && r.Body["code"] == "storage_full":
			refused = true
		case r.Status == 200 && strings.Contains(r.Raw, `"storage_full"`):
			// The guard tripped inside the request (the inline probe
			// after 16 MiB): the items from there on are refused.
			refused = true
		default:
			t.Fatalf("send to fillq: %d %.400s", r.Status, r.Raw)
		}
	}
	if !refused {
		t.Fatalf("%d bytes sent to a %d-byte filesystem and sends were never refused", written, smallFSBytes)
	}
	freeFull := fsFree(t, mnt)
	one := map[string]any{"messages": []any{map[string]any{"body": "after"}}}
	if r := qCall(t, b, "POST", "/v1/queues/keepq/messages", one); r.Status != 507 {
		t.Fatalf("send to another queue on the full disk: %d %s, want 507", r.Status, r.Raw)
	}

	deleted := time.Now()
	qMust(t, b, "DELETE", "/v1/queues/fillq?force=true", nil, 204)
	guardResumed := waitDiskNotLow(t, b, deleted)
	var resumed time.Duration
	for {
		r := qCall(t, b, "POST", "/v1/queues/keepq/messages", one)
		if r.Status == 200 && !strings.Contains(r.Raw, `"error"`) {
			resumed = time.Since(deleted)
			break
		}
		if r.Status != 507 {
			t.Fatalf("send after the deletion: %d %s", r.Status, r.Raw)
		}
		if time.Since(deleted) > writesResumeBound {
			t.Fatalf("sends still refused %s after deleting a queue of %d MB: free %d -> %d bytes",
				writesResumeBound, written>>20, freeFull, fsFree(t, mnt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("filled %d MB; free space %d MB at refusal, %d MB after the deletion; the broker accepted writes %s after the queue's DELETE, a send succeeded after %s",
		written>>20, freeFull>>20, fsFree(t, mnt)>>20, guardResumed.Round(time.Millisecond), resumed.Round(time.Millisecond))

	got := qReceive(t, b, "keepq", 100, 60_000, 0)
	if len(got) != len(kept)+1 {
		t.Fatalf("keepq delivered %d messages, want %d", len(got), len(kept)+1)
	}
	want := map[string]int{"after": 1}
	for _, k := range kept {
		want[k]++
	}
	for _, m := range got {
		want[m.Body]--
	}
	for body, n := range want {
		if n != 0 {
			t.Fatalf("keepq: message %.20q... delivered %d times too few", body, n)
		}
	}
}
