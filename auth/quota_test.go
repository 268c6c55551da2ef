package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

func openTestQuotas(t testing.TB, dir string) (*Quotas, *pebblestore.Store) {
	t.Helper()
	store, err := pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	q, err := OpenQuotas(store, QuotasConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return q, store
}

func name(s string) *string { return &s }

func setQuota(t *testing.T, q *Quotas, key string, value float64, parts ...QuotaEntityPart) {
	t.Helper()
	res, err := q.Alter([]QuotaAlteration{{Entity: parts, Ops: []QuotaOp{{Key: key, Value: value}}}}, false)
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter %v: %v %v", parts, res, err)
	}
}

// TestQuotaResolutionOrder: the quota applied to a user and client ID is
// the first entity set in Kafka's order (ClientQuotaManager), and the
// sensor is shared as Kafka's metric tags say; an unauthenticated client
// is the user ANONYMOUS.
func TestQuotaResolutionOrder(t *testing.T) {
	q, store := openTestQuotas(t, t.TempDir())
	defer store.Close()
	user := func(n *string) QuotaEntityPart { return QuotaEntityPart{Type: QuotaEntityUser, Name: n} }
	client := func(n *string) QuotaEntityPart { return QuotaEntityPart{Type: QuotaEntityClientID, Name: n} }
	levels := []struct {
		parts  []QuotaEntityPart
		sensor sensorID
	}{
		{[]QuotaEntityPart{client(nil)}, sensorID{clientID: "app"}},
		{[]QuotaEntityPart{client(name("app"))}, sensorID{clientID: "app"}},
		{[]QuotaEntityPart{user(nil)}, sensorID{user: "alice"}},
		{[]QuotaEntityPart{user(nil), client(nil)}, sensorID{user: "alice", clientID: "app"}},
		{[]QuotaEntityPart{user(nil), client(name("app"))}, sensorID{user: "alice", clientID: "app"}},
		{[]QuotaEntityPart{user(name("alice"))}, sensorID{user: "alice"}},
		{[]QuotaEntityPart{user(name("alice")), client(nil)}, sensorID{user: "alice", clientID: "app"}},
		{[]QuotaEntityPart{user(name("alice")), client(name("app"))}, sensorID{user: "alice", clientID: "app"}},
	}
	if q.Enabled(QuotaKindProduce) || q.Any() {
		t.Fatal("quotas enabled with none set")
	}
	// Each level set (from the last in Kafka's order to the first) takes
	// over from the ones set before it.
	for i, l := range levels {
		setQuota(t, q, QuotaProducerByteRate, float64(1000+i), l.parts...)
		limit, id, ok := q.idx.Load().resolve(QuotaKindProduce, "alice", "app")
		if !ok || limit != float64(1000+i) || id != l.sensor {
			t.Fatalf("after setting %v: limit %v sensor %+v ok %v, want %d %+v", l.parts, limit, id, ok, 1000+i, l.sensor)
		}
	}
	if !q.Enabled(QuotaKindProduce) || q.Enabled(QuotaKindFetch) {
		t.Fatal("only the produce quota is set")
	}
	// Another user falls back to the default user and client ID.
	if limit, id, _ := q.idx.Load().resolve(QuotaKindProduce, "bob", "app"); limit != 1004 || id != (sensorID{user: "bob", clientID: "app"}) {
		t.Fatalf("bob: %v %+v", limit, id)
	}
	if got := QuotaUser(Anonymous); got != "ANONYMOUS" {
		t.Fatalf("anonymous user %q", got)
	}
	if s := q.Sensor(QuotaKindFetch, "User:alice", "app", time.Now()); s != nil {
		t.Fatal("a sensor without a consumer quota")
	}
}

// TestQuotaAlterDescribeDurable: alterations are validated per entity,
// stored durably (read back on reopen), described by filter, and removed
// with their last key.
func TestQuotaAlterDescribeDurable(t *testing.T) {
	dir := t.TempDir()
	q, store := openTestQuotas(t, dir)
	res, err := q.Alter([]QuotaAlteration{
		{Entity: []QuotaEntityPart{{Type: QuotaEntityUser, Name: name("a")}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 10}}},
		{Entity: []QuotaEntityPart{{Type: QuotaEntityClientID}}, Ops: []QuotaOp{{Key: QuotaRequestPercentage, Value: 25.5}}},
		{Entity: []QuotaEntityPart{{Type: QuotaEntityUser, Name: name("b")}}, Ops: []QuotaOp{{Key: "nope", Value: 1}}},
		{Entity: []QuotaEntityPart{{Type: QuotaEntityUser, Name: name("a")}}, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 1}}},
	}, false)
	if err != nil || len(res) != 3 {
		t.Fatalf("alter: %v %v", res, err)
	}
	if res[0].Err == nil || res[0].Err.Error() != "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})" || res[1].Err != nil || !errors.Is(res[2].Err, ErrInvalidQuota) {
		t.Fatalf("results: %v", res)
	}
	store.Close()
	q, store = openTestQuotas(t, dir)
	defer store.Close()
	all, err := q.Describe(QuotaFilter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("describe after reopen: %v %v", all, err)
	}
	if got := all[1]; got.Entity.String() != "ClientQuotaEntity(entries={user=a})" || got.Values[QuotaProducerByteRate] != 10 || len(got.Values) != 1 {
		t.Fatalf("user a: %+v", got)
	}
	defaults, _ := q.Describe(QuotaFilter{Components: []QuotaFilterComponent{{Type: QuotaEntityClientID, Match: QuotaMatchDefault}}})
	if len(defaults) != 1 || defaults[0].Values[QuotaRequestPercentage] != 25.5 {
		t.Fatalf("default client: %+v", defaults)
	}
	if _, err := q.Describe(QuotaFilter{Components: []QuotaFilterComponent{{Type: "group", Match: QuotaMatchAny}}}); !errors.Is(err, ErrUnsupportedQuotaEntity) {
		t.Fatalf("unknown type: %v", err)
	}
	res, err = q.Alter([]QuotaAlteration{{Entity: []QuotaEntityPart{{Type: QuotaEntityUser, Name: name("a")}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Remove: true}}}}, false)
	if err != nil || res[0].Err != nil {
		t.Fatalf("remove: %v %v", res, err)
	}
	if all, _ := q.Describe(QuotaFilter{}); len(all) != 1 {
		t.Fatalf("after removal: %+v", all)
	}
	// validate_only stores nothing.
	if _, err := q.Alter([]QuotaAlteration{{Entity: []QuotaEntityPart{{Type: QuotaEntityUser}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 5}}}}, true); err != nil {
		t.Fatal(err)
	}
	if all, _ := q.Describe(QuotaFilter{}); len(all) != 1 || q.Enabled(QuotaKindProduce) {
		t.Fatalf("validate-only stored: %+v", all)
	}
}

// TestFetchQuotaUnrecordAndWindow: a throttled fetch's bytes are taken
// back, and a fetch asks for at most the window's allowance.
func TestFetchQuotaUnrecordAndWindow(t *testing.T) {
	s := &QuotaSensor{rate: newSampledRate(11, time.Second), limit: 1000}
	if got := s.MaxValueInWindow(); got != 10_000 {
		t.Fatalf("window allowance %v, want 10000", got)
	}
	now := time.UnixMilli(5_000_000)
	if thr := s.Record(20_000, now); thr != 10*time.Second {
		t.Fatalf("throttle %v, want 10s", thr)
	}
	s.Unrecord(20_000, now)
	if thr := s.Record(5_000, now); thr != 0 {
		t.Fatalf("throttle after unrecord %v, want 0", thr)
	}
	// Request quotas are bounded to one window (ClientRequestQuotaManager).
	r := &QuotaSensor{rate: newSampledRate(11, time.Second), limit: 1, maxThrMs: 1000}
	if thr := r.Record(RequestPercentage(time.Second), now); thr != time.Second {
		t.Fatalf("request throttle %v, want 1s", thr)
	}
}
