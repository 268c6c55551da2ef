package queues_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/pebblestore/crashfs"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// crashFS calls a hook after every write and sync (crashfs).
type crashFS = crashfs.FS

func openCrashEngine(t *testing.T, fs vfs.FS, now int64) (*pebblestore.Store, *queues.Engine) {
	s, _, e := openCrashEngineTopics(t, fs, now)
	return s, e
}

func openCrashEngineTopics(t *testing.T, fs vfs.FS, now int64) (*pebblestore.Store, *topics.Manager, *queues.Engine) {
	t.Helper()
	s, err := pebblestore.Open("data", pebblestore.Options{FS: fs, Logger: zerolog.Nop(), MemTableSize: 1 << 20, CacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(s, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := queues.Open(s, tm, queues.Config{Logger: zerolog.Nop(), Seed: 1}, time.UnixMilli(now))
	if err != nil {
		t.Fatalf("opening the queues of a crash image: %v", err)
	}
	return s, tm, e
}

// crashModel is what the workload was told, by calls that returned
// without error. Messages are named by their body, unique over the run.
type crashModel struct {
	now int64
	// sent: sends acknowledged. acked: acks acknowledged (status acked):
	// the message is gone for good. acking: acks in flight (either way).
	sent, acked, acking map[string]bool
	// deliveries["Q/ID"]: the delivery count a receive returned.
	deliveries map[string]uint32
}

func (m *crashModel) clone() crashModel {
	return crashModel{now: m.now, sent: maps.Clone(m.sent), acked: maps.Clone(m.acked), acking: maps.Clone(m.acking), deliveries: maps.Clone(m.deliveries)}
}

type crashImage struct {
	fs    *vfs.MemFS
	model crashModel
	op    string
}

// TestQueueSurvivesCrash runs a workload of send (over HTTP's path and
// as a Kafka producer's batch, produce.go), receive, ack, nack
// (requeue and reject), lease expiry, dead-lettering at max_receives and
// redrive on a filesystem that takes a crash image after every write and
// sync the store makes (each keeping a random share of unsynced data),
// and checks every image (STYLE.md rule 13). Opened, an image must hold:
//   - every acknowledged send, in the queue or its DLQ (or acked);
//   - no message whose ack was acknowledged;
//   - no message twice (in the queue and the DLQ, or twice in one);
//   - delivery counts at least those receives returned;
//   - exactly one index key per state row (its ready key at its priority
//     and due time, or its lease key at its lease end), and no index key
//     without a row: so no message is held by two leases;
//   - the engine's counters equal to the rows; a receive leases only
//     ready messages, never one still leased.
func TestQueueSurvivesCrash(t *testing.T) {
	seeds, ops := 6, 150
	switch {
	case testing.Short():
		seeds, ops = 2, 50
	case queues.RaceEnabled:
		// Under -race a seed takes about 15 s (1 s without): two seeds
		// keep the race detector on the crash path, and .ci/run runs
		// all six again without -race.
		seeds = 2
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { crashRun(t, seed, ops) })
	}
}

func crashRun(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	imgRng := rand.New(rand.NewPCG(seed, 17)) // the hook's, under fs.mu
	mem := vfs.NewCrashableMem()
	fs := &crashFS{FS: mem}
	now := start
	store, tm, e := openCrashEngineTopics(t, fs, now)
	patch := &queues.AttributesPatch{MaxReceives: ptr[int32](3), VisibilityTimeoutMs: ptr[int64](2000), ExpiryBackoffMs: ptr[int64](0),
		Backoff: &queues.BackoffPatch{InitialMs: ptr[int64](200), Jitter: ptr(0.0)}}
	if _, _, err := e.CreateQueue("q", patch, time.UnixMilli(now)); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex // guards model and images
	model := crashModel{sent: map[string]bool{}, acked: map[string]bool{}, acking: map[string]bool{}, deliveries: map[string]uint32{}}
	var images []crashImage
	op := "start"
	fs.SetHook(func() {
		mu.Lock()
		defer mu.Unlock()
		images = append(images, crashImage{fs: mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: imgRng.IntN(101), RNG: imgRng}), model: model.clone(), op: op})
	})
	update := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		f()
	}

	held := map[string]string{} // body -> receipt of its live lease (as the workload believes)
	next := 0
	seq := int32(0) // the next sequence of the idempotent producer of crashProduce
	for i := 0; i < ops; i++ {
		update(func() { model.now = now })
		switch k := rng.IntN(20); {
		case k < 4:
			var msgs []queues.SendMessage
			for n := 1 + rng.IntN(3); n > 0; n-- {
				b := fmt.Sprintf("m%d", next)
				next++
				msgs = append(msgs, queues.SendMessage{Body: []byte(b)})
			}
			if rng.IntN(2) == 0 {
				// The same messages produced over Kafka (an idempotent
				// producer's batch): state rows ride in the append.
				update(func() { op = "produce" })
				crashProduce(t, tm, e, msgs, &seq, now)
				update(func() {
					for _, m := range msgs {
						model.sent[string(m.Body)] = true
					}
				})
				continue
			}
			update(func() { op = "send" })
			res, err := e.Send("q", queues.SendRequest{Messages: msgs}, time.UnixMilli(now))
			if err != nil {
				t.Fatal(err)
			}
			update(func() {
				for i, r := range res {
					if r.Error != nil {
						t.Fatalf("send: %v", r.Error)
					}
					model.sent[string(msgs[i].Body)] = true
				}
			})
		case k < 10:
			vis := int64(1000 + rng.IntN(2000))
			req := queues.ReceiveRequest{MaxMessages: 1 + rng.IntN(3), VisibilityTimeout: pms(vis)}
			if _, err := e.CheckReceive("q", &req); err != nil {
				t.Fatal(err)
			}
			update(func() { op = "receive" })
			msgs, err := e.Receive("q", req, time.UnixMilli(now))
			if err != nil {
				t.Fatal(err)
			}
			update(func() {
				for _, m := range msgs {
					held[string(m.Body)] = m.Receipt
					model.deliveries["q/"+m.ID] = m.Deliveries
				}
			})
		case k < 12 && len(held) > 0:
			var bodies, receipts []string
			for b, r := range held {
				if rng.IntN(2) == 0 || len(bodies) == 0 {
					bodies, receipts = append(bodies, b), append(receipts, r)
				}
			}
			update(func() {
				op = "ack"
				for _, b := range bodies {
					model.acking[b] = true
				}
			})
			res, err := e.Ack("q", receipts, time.UnixMilli(now))
			if err != nil {
				t.Fatal(err)
			}
			update(func() {
				for i, r := range res {
					delete(model.acking, bodies[i])
					delete(held, bodies[i])
					if r.Status == "acked" {
						model.acked[bodies[i]] = true
					}
				}
			})
		case k < 15 && len(held) > 0:
			var bodies, receipts []string
			for b, r := range held {
				bodies, receipts = append(bodies, b), append(receipts, r)
				break
			}
			req := queues.NackRequest{Receipts: receipts, DeadLetter: rng.IntN(4) == 0, Reason: "crash-test"}
			update(func() { op = "nack" })
			if _, err := e.Nack("q", req, time.UnixMilli(now)); err != nil {
				t.Fatal(err)
			}
			delete(held, bodies[0])
		case k < 16:
			tasks := e.Tasks()
			if len(tasks) == 0 || tasks[0].State != "running" {
				update(func() { op = "redrive" })
				if _, err := e.Redrive("q.dlq", queues.RedriveRequest{}, time.UnixMilli(now)); err != nil {
					t.Fatal(err)
				}
			}
		default:
			now += int64(200 + rng.IntN(2000))
			update(func() { op = "tick"; model.now = now })
			if r := e.Tick(time.UnixMilli(now)); r.Errors > 0 {
				t.Fatalf("tick: %+v", r)
			}
		}
	}
	fs.SetHook(nil)
	st, _ := e.Stats("q", time.UnixMilli(now))
	dst, _ := e.Stats("q.dlq", time.UnixMilli(now))
	e.Close()
	_ = store.Close()

	byOp := map[string]int{}
	for _, img := range images {
		byOp[img.op]++
	}
	t.Logf("%d crash images by operation %v; totals of q %+v, of q.dlq %+v", len(images), byOp, st.Totals, dst.Totals)
	for i, img := range images {
		checkCrashImage(t, fmt.Sprintf("image %d/%d (during %s)", i, len(images), img.op), img)
	}
}

func ptr[T any](v T) *T { return &v }

// crashProduce appends msgs to queue q's topic as an idempotent Kafka
// producer's batch (producer ID 1) through AppendProduced and waits until
// it is durable.
func crashProduce(t *testing.T, tm *topics.Manager, e *queues.Engine, msgs []queues.SendMessage, seq *int32, now int64) {
	t.Helper()
	recs := make([]topics.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = topics.Record{OffsetDelta: int32(i), Value: m.Body}
	}
	raw, err := topics.EncodeBatch(topics.BatchHeader{BaseTimestamp: now, MaxTimestamp: now, ProducerID: 1, ProducerEpoch: 0, BaseSequence: *seq}, recs)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := tm.Topic("q")
	p, _ := tp.Partition(0)
	a := &topics.Append{Partition: p, Batch: raw}
	if err := e.AppendProduced([]*topics.Append{a}, time.UnixMilli(now)).Wait(); err != nil || a.Err != nil {
		t.Fatalf("produce: %v %v", err, a.Err)
	}
	*seq += int32(len(msgs))
}

type located struct {
	queue string
	msg   queues.Message
}

func checkCrashImage(t *testing.T, name string, img crashImage) {
	store, e := openCrashEngine(t, img.fs, img.model.now)
	defer func() {
		e.Close()
		_ = store.Close()
	}()
	where := map[string]located{}
	count := map[string]int64{}
	for _, q := range []string{"q", "q.dlq"} {
		after := ""
		for {
			msgs, next, err := e.Browse(q, queues.BrowseRequest{After: after, Limit: 1000}, time.UnixMilli(img.model.now))
			if err != nil {
				t.Fatalf("%s: browse %s: %v", name, q, err)
			}
			for _, m := range msgs {
				if m.Body == nil {
					t.Fatalf("%s: %s %s has no record", name, q, m.ID)
				}
				if prev, dup := where[string(m.Body)]; dup {
					t.Fatalf("%s: message %s is in %s as %s and in %s as %s", name, string(m.Body), prev.queue, prev.msg.ID, q, m.ID)
				}
				where[string(m.Body)] = located{queue: q, msg: m}
				count[q]++
				if d, ok := img.model.deliveries[q+"/"+m.ID]; ok && m.Deliveries < d {
					t.Fatalf("%s: %s %s has %d deliveries; a receive returned it with %d", name, q, m.ID, m.Deliveries, d)
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	for b := range img.model.sent {
		if _, ok := where[b]; !ok && !img.model.acked[b] && !img.model.acking[b] {
			t.Fatalf("%s: the acknowledged send of %s is lost", name, b)
		}
	}
	for b := range img.model.acked {
		if l, ok := where[b]; ok {
			t.Fatalf("%s: %s was acked, and is back in %s as %s (%s)", name, b, l.queue, l.msg.ID, l.msg.State)
		}
	}
	checkIndexes(t, name, store, where)
	for _, q := range []string{"q", "q.dlq"} {
		s, err := e.Stats(q, time.UnixMilli(img.model.now))
		if err != nil {
			t.Fatal(err)
		}
		if s.Available+s.Inflight != count[q] || s.Retained != 0 {
			t.Fatalf("%s: stats of %s say %d available, %d inflight; it holds %d messages", name, q, s.Available, s.Inflight, count[q])
		}
	}
	// The reopened engine leases only ready messages, each once.
	req := queues.ReceiveRequest{MaxMessages: 1000}
	if _, err := e.CheckReceive("q", &req); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.Receive("q", req, time.UnixMilli(img.model.now))
	if err != nil {
		t.Fatalf("%s: receive after the crash: %v", name, err)
	}
	for _, m := range msgs {
		l := where[string(m.Body)]
		if l.queue != "q" || l.msg.State != "ready" || l.msg.ID != m.ID {
			t.Fatalf("%s: a receive after the crash leased %s %s, which was %+v", name, string(m.Body), m.ID, l)
		}
		l.msg.State = "leased again"
		where[string(m.Body)] = l
	}
	for b, l := range where {
		if l.queue == "q" && l.msg.State == "ready" {
			t.Fatalf("%s: ready message %s was not leased by a receive of everything", name, b)
		}
	}
}

// checkIndexes reads the queue tables as pebblestore/keys.go lays them
// out (the file format): each state row has exactly one ready or lease
// key, matching what Browse says of it; no index key lacks its row.
func checkIndexes(t *testing.T, name string, store *pebblestore.Store, where map[string]located) {
	scan := func(prefix byte, f func(k, v []byte)) {
		it, err := store.NewIter([]byte{prefix}, []byte{prefix + 1})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.Value()
			if err != nil {
				t.Fatal(err)
			}
			f(append([]byte(nil), it.Key()...), v)
		}
	}
	qnames := map[uint32]string{}
	scan(pebblestore.PrefixQueueName, func(k, v []byte) { qnames[binary.BigEndian.Uint32(v)] = string(k[1:]) })
	byID := map[string]queues.Message{}
	for _, l := range where {
		byID[l.queue+"/"+l.msg.ID] = l.msg
	}
	msgOf := func(k []byte) string {
		n := len(k)
		return fmt.Sprintf("%s/%d:%d", qnames[binary.BigEndian.Uint32(k[1:])], int32(binary.BigEndian.Uint32(k[n-12:])), int64(binary.BigEndian.Uint64(k[n-8:])))
	}
	rows := map[string]int{}
	scan(pebblestore.PrefixQueueState, func(k, v []byte) {
		id := msgOf(k)
		if _, ok := byID[id]; !ok {
			t.Fatalf("%s: state row of %s, which Browse does not list", name, id)
		}
		rows[id] = 0
	})
	ms := func(tm time.Time) int64 { return tm.UnixMilli() }
	scan(pebblestore.PrefixQueueReady, func(k, v []byte) {
		id := msgOf(k)
		m, ok := byID[id]
		if !ok || (m.State != "ready" && m.State != "delayed") || k[5] != byte(255-m.Priority) || int64(binary.BigEndian.Uint64(k[6:])) != ms(m.VisibleAt) {
			t.Fatalf("%s: ready key %x of %s does not match the message %+v", name, k, id, m)
		}
		rows[id]++
	})
	scan(pebblestore.PrefixQueueLease, func(k, v []byte) {
		id := msgOf(k)
		m, ok := byID[id]
		if !ok || m.State != "inflight" || int64(binary.BigEndian.Uint64(k[5:])) != ms(m.LeaseUntil) {
			t.Fatalf("%s: lease key %x of %s does not match the message %+v", name, k, id, m)
		}
		rows[id]++
	})
	for id, n := range rows {
		if n != 1 {
			t.Fatalf("%s: message %s has %d index keys", name, id, n)
		}
	}
}
