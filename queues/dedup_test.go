package queues

import (
	"encoding/json"
	"testing"
	"time"
)

// sendItems sends msgs and returns the per-item results without failing
// on item errors.
func (en *env) sendItems(name string, now int64, msgs ...SendMessage) []SendResult {
	en.t.Helper()
	res, err := en.e.Send(name, SendRequest{Messages: msgs}, time.UnixMilli(now))
	if err != nil {
		en.t.Fatalf("send: %v", err)
	}
	return res
}

func withID(b, id string) SendMessage { return SendMessage{Body: []byte(b), DedupID: pstr(id)} }

func itemCode(r SendResult) string {
	switch {
	case r.Error != nil:
		return r.Error.Code
	case r.Duplicate:
		return "duplicate"
	}
	return "new"
}

// TestDedupContent pins F20 (content): with content_dedup a message
// without a dedup_id is a duplicate of an earlier one with the same body
// within the window, a new message after it; content keys and dedup_id
// keys never meet.
func TestDedupContent(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{DedupWindowMs: p64(60000), ContentDedup: new(bool)})
	if _, err := en.e.UpdateQueue("q", &AttributesPatch{ContentDedup: func() *bool { v := true; return &v }()}, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	first := en.send("q", t0, body("a"))
	res := en.sendItems("q", t0+1000, body("a"), body("b"), body("b"), withID("abc", "a"), body("abc"))
	if got := []string{itemCode(res[0]), itemCode(res[1]), itemCode(res[2]), itemCode(res[3]), itemCode(res[4])}; got[0] != "duplicate" || got[1] != "new" || got[2] != "duplicate" || got[3] != "new" || got[4] != "new" {
		t.Fatalf("codes %v: %+v", got, res)
	}
	if res[0].ID != first[0].ID || res[2].ID != res[1].ID {
		t.Fatalf("duplicates answer the original: %+v %+v", first, res)
	}
	// The dedup_id "a" is not the body "a": a content key never equals an id key.
	if r := en.sendItems("q", t0+1000, withID("zzz", "a")); itemCode(r[0]) != "duplicate" || r[0].ID != res[3].ID {
		t.Fatalf("dedup id a: %+v", r)
	}
	en.e.Tick(time.UnixMilli(t0 + 60001))
	if r := en.sendItems("q", t0+60001, body("a")); itemCode(r[0]) != "new" {
		t.Fatalf("after the window: %+v", r)
	}
	if s := en.stats("q", t0+60001); s.Available != 5 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDedupConflict pins F20 (reject): under dedup_conflict reject a
// dedup_id sent again with another body is the item error dedup_conflict
// (409 class), also against an earlier message of the same request and
// after a restart; the same body is still a duplicate. Under accept it is
// a duplicate. An atomic request with a conflict writes nothing.
func TestDedupConflict(t *testing.T) {
	en := newEnv(t)
	en.create("strict", &AttributesPatch{DedupConflict: pstr(DedupConflictReject)})
	en.create("lax", nil)
	for _, q := range []string{"strict", "lax"} {
		en.send(q, t0, withID("a", "o-1"))
	}
	res := en.sendItems("strict", t0+1, withID("b", "o-1"), withID("a", "o-1"), withID("x", "o-2"), withID("y", "o-2"), withID("x", "o-2"))
	want := []string{CodeDedupConflict, "duplicate", "new", CodeDedupConflict, "duplicate"}
	for i, w := range want {
		if itemCode(res[i]) != w {
			t.Fatalf("strict item %d: %s, want %s: %+v", i, itemCode(res[i]), w, res)
		}
	}
	if res[0].Error.Code != CodeDedupConflict || res[0].Error.Details["id"] != "0:0" || res[0].Partition != -1 || res[4].ID != res[2].ID {
		t.Fatalf("conflict item: %+v %+v", res[0].Error, res)
	}
	if r := en.sendItems("lax", t0+1, withID("b", "o-1")); itemCode(r[0]) != "duplicate" || r[0].ID != "0:0" {
		t.Fatalf("accept: %+v", r)
	}
	before := en.stats("strict", t0+1)
	_, err := en.e.Send("strict", SendRequest{Atomic: true, Messages: []SendMessage{withID("new", "o-3"), withID("other", "o-1")}}, time.UnixMilli(t0+2))
	if e := AsError(err); e == nil || e.Code != CodeBatchRejected || e.Details["index"] != 1 || e.Details["code"] != CodeDedupConflict {
		t.Fatalf("atomic conflict: %v", err)
	}
	if after := en.stats("strict", t0+2); after.Available != before.Available || after.Partitions[0].HighWatermark != before.Partitions[0].HighWatermark {
		t.Fatalf("atomic conflict wrote: %+v -> %+v", before, after)
	}
	// o-3 was not remembered either.
	if r := en.sendItems("strict", t0+3, withID("o3", "o-3")); itemCode(r[0]) != "new" {
		t.Fatalf("o-3 after the rejected batch: %+v", r)
	}
	en.restart(t0 + 10)
	if r := en.sendItems("strict", t0+10, withID("b", "o-1"), withID("a", "o-1")); itemCode(r[0]) != CodeDedupConflict || itemCode(r[1]) != "duplicate" {
		t.Fatalf("after restart: %+v", r)
	}
}

// TestDedupScopeInQueue pins F21: with dedup_scope in_queue a dedup id is
// a duplicate while its original is queued, even long after the window
// (the sweep keeps the entry); once the original is acked the window from
// the send decides. A zero window dedups only while queued.
func TestDedupScopeInQueue(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{DedupWindowMs: p64(60000), DedupScope: pstr(DedupScopeInQueue)})
	en.create("w0", &AttributesPatch{DedupWindowMs: p64(0), DedupScope: pstr(DedupScopeInQueue)})
	en.send("q", t0, withID("long", "j"), withID("short", "k"))
	// k: acked inside the window, still a duplicate until the window ends.
	got := en.receive("q", 2, 0, t0+1000)
	if bodies(got) != "long,short" {
		t.Fatalf("receive %s", bodies(got))
	}
	en.ack("q", t0+1000, got[1].Receipt)
	if r := en.sendItems("q", t0+2000, withID("short", "k")); itemCode(r[0]) != "duplicate" {
		t.Fatalf("k inside the window after ack: %+v", r)
	}
	for now := t0 + 10000; now <= t0+200000; now += 10000 {
		en.e.Tick(time.UnixMilli(now))
	}
	if r := en.sendItems("q", t0+200000, withID("short", "k")); itemCode(r[0]) != "new" {
		t.Fatalf("k after the window: %+v", r)
	}
	// j: still held (its lease ran out and it is ready again), so still a duplicate.
	en.restart(t0 + 200000)
	en.e.Tick(time.UnixMilli(t0 + 260000))
	if r := en.sendItems("q", t0+260000, withID("long", "j")); itemCode(r[0]) != "duplicate" || r[0].ID != "0:0" {
		t.Fatalf("j while queued, after the window: %+v", r)
	}
	got = en.receive("q", 1, 0, t0+260000)
	if len(got) != 1 || got[0].ID != "0:0" {
		t.Fatalf("receive j: %+v", got)
	}
	en.ack("q", t0+260000, got[0].Receipt)
	if r := en.sendItems("q", t0+260001, withID("long", "j")); itemCode(r[0]) != "new" {
		t.Fatalf("j after ack, window over: %+v", r)
	}
	// The scope set back to window: the window alone decides.
	if _, err := en.e.UpdateQueue("q", &AttributesPatch{DedupScope: pstr(DedupScopeWindow)}, time.UnixMilli(t0)); err != nil {
		t.Fatal(err)
	}
	if r := en.sendItems("q", t0+400000, withID("long", "j")); itemCode(r[0]) != "new" {
		t.Fatalf("window scope, queued original, window over: %+v", r)
	}

	en.send("w0", t0, withID("x", "z"))
	if r := en.sendItems("w0", t0+500000, withID("x", "z")); itemCode(r[0]) != "duplicate" {
		t.Fatalf("zero window while queued: %+v", r)
	}
	got = en.receive("w0", 1, 0, t0+500000)
	en.ack("w0", t0+500000, got[0].Receipt)
	if r := en.sendItems("w0", t0+500000, withID("x", "z")); itemCode(r[0]) != "new" {
		t.Fatalf("zero window after ack: %+v", r)
	}
}

// TestDedupOldFormats: a dedup row of the 20-byte shape written before the
// body hash still deduplicates (a different body is accepted as a
// duplicate even under reject) and is swept; a catalog row written before
// dedup_conflict and dedup_scope reads as accept and window.
func TestDedupOldFormats(t *testing.T) {
	en := newEnv(t)
	en.create("q", &AttributesPatch{DedupConflict: pstr(DedupConflictReject)})
	en.send("q", t0, body("original"))
	q, _ := en.e.queueByName("q")
	h := dedupIDHash("legacy")
	old := encodeDedup(dedupEntry{m: msgKey{0, 0}, expires: t0 + 60000})[:dedupEntrySizeV1]
	b := en.store.NewBatch()
	b.Set(dedupKey(q.id, h), old)
	b.Set(dedupExpiryKey(q.id, t0+60000, h), nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := en.sendItems("q", t0+1, withID("not the original", "legacy")); itemCode(r[0]) != "duplicate" || r[0].ID != "0:0" {
		t.Fatalf("old-shape entry: %+v", r)
	}
	if rep := en.e.Tick(time.UnixMilli(t0 + 60000)); rep.DedupSwept != 1 {
		t.Fatalf("sweep: %+v", rep)
	}
	if _, err := en.store.Get(dedupKey(q.id, h)); err == nil {
		t.Fatal("the old-shape entry was not swept")
	}

	// A catalog row without the new attributes.
	raw, err := en.store.Get(queueKey(q.id))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	attrs := rec["attributes"].(map[string]any)
	for _, k := range []string{"content_dedup", "dedup_conflict", "dedup_scope", "max_unclaimed_age_ms"} {
		delete(attrs, k)
	}
	attrs["max_receives"] = 7 // so the row differs from a default create
	raw, _ = json.Marshal(rec)
	b = en.store.NewBatch()
	b.Set(queueKey(q.id), raw)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	en.restart(t0 + 60001)
	info, err := en.e.GetQueue("q")
	if err != nil {
		t.Fatal(err)
	}
	if a := info.Attributes; a.DedupConflict != DedupConflictAccept || a.DedupScope != DedupScopeWindow || a.ContentDedup || a.MaxUnclaimedAgeMs != 0 {
		t.Fatalf("old catalog row: %+v", a)
	}
	if _, created, err := en.e.CreateQueue("q", &AttributesPatch{MaxReceives: p32(7)}, time.UnixMilli(t0)); err != nil || created {
		t.Fatalf("create with the same attributes: %v %v", created, err)
	}
}

// TestDedupAttributesPersist: the new attributes are validated and survive
// a restart.
func TestDedupAttributesPersist(t *testing.T) {
	en := newEnv(t)
	yes := true
	for _, c := range []struct {
		patch AttributesPatch
		code  string
		field string
	}{
		{AttributesPatch{DedupConflict: pstr("maybe")}, CodeInvalidEnum, "dedup_conflict"},
		{AttributesPatch{DedupConflict: pstr("")}, CodeInvalidEnum, "dedup_conflict"},
		{AttributesPatch{DedupScope: pstr("forever")}, CodeInvalidEnum, "dedup_scope"},
		{AttributesPatch{MaxUnclaimedAgeMs: p64(-1)}, CodeOutOfRange, "max_unclaimed_age_ms"},
		{AttributesPatch{MaxUnclaimedAgeMs: p64(345600001)}, CodeOutOfRange, "max_unclaimed_age_ms"},
		{AttributesPatch{RetentionMs: p64(60000), MaxUnclaimedAgeMs: p64(60001)}, CodeOutOfRange, "max_unclaimed_age_ms"},
		{AttributesPatch{RetentionMs: p64(0), MaxUnclaimedAgeMs: p64(RetentionMaxMs + 1)}, CodeOutOfRange, "max_unclaimed_age_ms"},
	} {
		_, _, err := en.e.CreateQueue("bad", &c.patch, time.UnixMilli(t0))
		if e := AsError(err); e == nil || e.Code != c.code || e.Details["field"] != c.field {
			t.Errorf("%+v: %v, want %s on %s", c.patch, err, c.code, c.field)
		}
	}
	if _, err := en.e.GetQueue("bad"); AsError(err).Code != CodeQueueNotFound {
		t.Fatalf("a bad create left a queue: %v", err)
	}
	en.create("q", &AttributesPatch{ContentDedup: &yes, DedupConflict: pstr(DedupConflictReject), DedupScope: pstr(DedupScopeInQueue), MaxUnclaimedAgeMs: p64(345600000)})
	en.restart(t0)
	info, err := en.e.GetQueue("q")
	if err != nil {
		t.Fatal(err)
	}
	if a := info.Attributes; !a.ContentDedup || a.DedupConflict != DedupConflictReject || a.DedupScope != DedupScopeInQueue || a.MaxUnclaimedAgeMs != 345600000 {
		t.Fatalf("after restart: %+v", a)
	}
	if _, err := en.e.UpdateQueue("q", &AttributesPatch{RetentionMs: p64(60000)}, time.UnixMilli(t0)); AsError(err).Code != CodeOutOfRange {
		t.Fatalf("retention below max_unclaimed_age_ms: %v", err)
	}
}
