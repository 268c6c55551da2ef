package compattests

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Client quotas (issue 12 part 6): DescribeClientQuotas and
// AlterClientQuotas through kadm against both brokers, and producers and
// consumers throttled to their byte rates by our broker.

func quotaEntity(parts ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i+1 < len(parts); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: parts[i]}
		if parts[i+1] != "<default>" {
			c.Name = kmsg.StringPtr(parts[i+1])
		}
		e = append(e, c)
	}
	return e
}

// describedQuotas renders described quotas as sorted "entity: key=value"
// lines, with the entity's components sorted by type.
func describedQuotas(qs kadm.DescribedClientQuotas) []string {
	var out []string
	for _, q := range qs {
		ent := append(kadm.ClientQuotaEntity(nil), q.Entity...)
		sort.Slice(ent, func(i, j int) bool { return ent[i].Type < ent[j].Type })
		vals := append(kadm.ClientQuotaValues(nil), q.Values...)
		sort.Slice(vals, func(i, j int) bool { return vals[i].Key < vals[j].Key })
		var vs []string
		for _, v := range vals {
			vs = append(vs, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		out = append(out, ent.String()+": "+strings.Join(vs, ","))
	}
	sort.Strings(out)
	return out
}

// TestClientQuotasAdmin: kadm AlterClientQuotas, ValidateAlterClientQuotas
// and DescribeClientQuotas with exact, default and any matches and strict
// mode, Kafka's INVALID_REQUEST answers with their messages, and removal.
// The entities are scoped to this test's user names, since the reference
// broker is shared by every test of the run; the global defaults are only
// validated.
func TestClientQuotasAdmin(t *testing.T) {
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		adm := newAdmin(t, addr)
		ctx := testCtx(t, opTimeout)
		u1, u2 := topicName(t, "qu1"), topicName(t, "qu2")
		set := []kadm.AlterClientQuotaEntry{
			{Entity: quotaEntity("user", u1), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "consumer_byte_rate", Value: 2097152}}},
			{Entity: quotaEntity("user", u1, "client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 50.5}}},
			{Entity: quotaEntity("user", u2, "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 10}}},
		}
		t.Cleanup(func() {
			var rm []kadm.AlterClientQuotaEntry
			for _, e := range set {
				var ops []kadm.AlterClientQuotaOp
				for _, op := range e.Ops {
					ops = append(ops, kadm.AlterClientQuotaOp{Key: op.Key, Remove: true})
				}
				rm = append(rm, kadm.AlterClientQuotaEntry{Entity: e.Entity, Ops: ops})
			}
			_, _ = adm.AlterClientQuotas(context.Background(), rm)
		})
		res, err := adm.AlterClientQuotas(ctx, set)
		if err != nil || len(res) != len(set) {
			t.Fatalf("alter: %v %v", res, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
			}
		}
		// validate_only: accepted, nothing stored.
		res, err = adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
			{Entity: quotaEntity("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
			{Entity: quotaEntity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1}}},
		})
		if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("validate-only alter: %v %v", res, err)
		}

		describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
			t.Helper()
			qs, err := adm.DescribeClientQuotas(ctx, strict, comps)
			if err != nil {
				t.Fatalf("describe %v: %v", comps, err)
			}
			var mine []string
			for _, l := range describedQuotas(qs) {
				if strings.Contains(l, u1) || strings.Contains(l, u2) {
					mine = append(mine, l)
				}
			}
			return mine
		}
		exact := func(typ, name string) kadm.DescribeClientQuotaComponent {
			return kadm.DescribeClientQuotaComponent{Type: typ, MatchName: kmsg.StringPtr(name), MatchType: 0}
		}
		anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
			return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2}
		}
		defaultOf := func(typ string) kadm.DescribeClientQuotaComponent {
			return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1}
		}
		u1Line := "{user=" + u1 + "}: consumer_byte_rate=2.097152e+06,producer_byte_rate=1.048576e+06"
		u1DefLine := "{client-id=<default>, user=" + u1 + "}: request_percentage=50.5"
		u2Line := "{client-id=app, user=" + u2 + "}: controller_mutation_rate=10"
		checks := []struct {
			name   string
			strict bool
			comps  []kadm.DescribeClientQuotaComponent
			want   []string
		}{
			{"exact user", false, []kadm.DescribeClientQuotaComponent{exact("user", u1)}, []string{u1DefLine, u1Line}},
			{"exact user strict", true, []kadm.DescribeClientQuotaComponent{exact("user", u1)}, []string{u1Line}},
			{"exact user, default client", false, []kadm.DescribeClientQuotaComponent{exact("user", u1), defaultOf("client-id")}, []string{u1DefLine}},
			{"exact user, any client", false, []kadm.DescribeClientQuotaComponent{exact("user", u2), anyOf("client-id")}, []string{u2Line}},
			{"exact client", false, []kadm.DescribeClientQuotaComponent{exact("client-id", "app")}, []string{u2Line}},
			{"exact client strict", true, []kadm.DescribeClientQuotaComponent{exact("client-id", "app")}, nil},
			{"any user", false, []kadm.DescribeClientQuotaComponent{anyOf("user")}, []string{u1DefLine, u1Line, u2Line}},
			{"any user strict", true, []kadm.DescribeClientQuotaComponent{anyOf("user")}, []string{u1Line}},
			{"everything", false, nil, []string{u1DefLine, u1Line, u2Line}},
			{"strict nothing", true, nil, nil},
		}
		for _, c := range checks {
			if got := describeEventually(c.want, func() []string { return describe(c.strict, c.comps...) }); fmt.Sprint(got) != fmt.Sprint(sorted(c.want)) {
				t.Errorf("describe %s:\n got %q\nwant %q", c.name, got, sorted(c.want))
			}
		}

		// Refusals: Kafka's code and message, per entity.
		refusals := []struct {
			entry kadm.AlterClientQuotaEntry
			msg   string
		}{
			{kadm.AlterClientQuotaEntry{Entity: nil, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}, "Invalid empty client quota entity"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("group", "g"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}, "Unhandled client quota entity type: group"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", ""), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}, "Empty user not supported"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"x", "ip", "127.0.0.1"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"a"), Ops: []kadm.AlterClientQuotaOp{{Key: "fetch_byte_rate", Value: 1}}}, "Invalid configuration key fetch_byte_rate"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"b"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}}, "producer_byte_rate cannot be a fractional value."},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"c"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0}}}, "Quota request_percentage must be greater than 0"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"d"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1e300}}}, "Proposed value for consumer_byte_rate is too large for a LONG."},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "not an address!"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}}, "not an address! is not a valid IP or resolvable host."},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("ip", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}, "Invalid configuration key producer_byte_rate"},
			{kadm.AlterClientQuotaEntry{Entity: quotaEntity("user", u1+"e"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}, {Key: "producer_byte_rate", Value: 2}}}, "Ignoring duplicate entity ClientQuotaEntity(entries={user=" + u1 + "e})"},
		}
		for _, r := range refusals {
			res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{r.entry})
			if err != nil || len(res) != 1 {
				t.Fatalf("alter %v: %v %v", r.entry.Entity, res, err)
			}
			if !errors.Is(res[0].Err, kerr.InvalidRequest) || res[0].ErrMessage != r.msg {
				t.Errorf("alter %v: got %v %q, want INVALID_REQUEST %q", r.entry.Entity, res[0].Err, res[0].ErrMessage, r.msg)
			}
		}
		// An entity with one bad key changes nothing.
		if got := describe(true, exact("user", u1+"e")); len(got) != 0 {
			t.Errorf("a refused entity was stored: %v", got)
		}
		// Describe filters Kafka refuses.
		badFilters := []struct {
			comps []kadm.DescribeClientQuotaComponent
			code  error
			msg   string
		}{
			{[]kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: 2}}, kerr.UnsupportedVersion, "Unsupported entity type group"},
			{[]kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}, kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
			{[]kadm.DescribeClientQuotaComponent{anyOf("user"), anyOf("user")}, kerr.InvalidRequest, "Entity type user cannot appear more than once in the filter."},
			{[]kadm.DescribeClientQuotaComponent{anyOf("ip"), anyOf("client-id")}, kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
		}
		for _, f := range badFilters {
			_, err := adm.DescribeClientQuotas(ctx, false, f.comps)
			var em *kadm.ErrAndMessage
			if !errors.As(err, &em) || !errors.Is(em.Err, f.code) || em.ErrMessage != f.msg {
				t.Errorf("describe %v: got %v, want %v %q", f.comps, err, f.code, f.msg)
			}
		}

		// Removing the last key removes the entity; removing a key that is
		// not set is no error.
		res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
			{Entity: quotaEntity("user", u1), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}},
			{Entity: quotaEntity("user", u2, "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}}},
		})
		if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("remove: %v %v", res, err)
		}
		want := sorted([]string{u1DefLine, "{user=" + u1 + "}: consumer_byte_rate=2.097152e+06"})
		if got := describeEventually(want, func() []string { return describe(false, anyOf("user")) }); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after removal:\n got %q\nwant %q", got, want)
		}
	})
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// describeEventually describes until the answer is want, for up to 15 s:
// Apache Kafka's broker learns an alteration from the metadata log after
// the controller answered it.
func describeEventually(want []string, describe func() []string) []string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := describe()
		if fmt.Sprint(got) == fmt.Sprint(sorted(want)) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClientQuotasSurviveRestart: quotas are stored durably and enforced
// after a restart.
func TestClientQuotasSurviveRestart(t *testing.T) {
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := testCtx(t, opTimeout)
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "<default>", "client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}},
		{Entity: quotaEntity("client-id", "restart"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 8192}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	b.Restart()
	adm = newAdmin(t, b.Addr())
	qs, err := adm.DescribeClientQuotas(testCtx(t, opTimeout), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"{client-id=<default>, user=<default>}: producer_byte_rate=4096", "{client-id=restart}: consumer_byte_rate=8192"}
	if got := describedQuotas(qs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart:\n got %q\nwant %q", got, want)
	}
}

// throttleHook counts the throttles a client's brokers answered.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// rateLog records bytes by the time they were acknowledged or consumed.
type rateLog struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
	bytes []int
}

func (l *rateLog) add(n int) {
	l.mu.Lock()
	l.at = append(l.at, time.Since(l.start))
	l.bytes = append(l.bytes, n)
	l.mu.Unlock()
}

// rate is the bytes per second logged in [from, to).
func (l *rateLog) rate(from, to time.Duration) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for i, at := range l.at {
		if at >= from && at < to {
			total += l.bytes[i]
		}
	}
	return float64(total) / (to - from).Seconds()
}

// randomValue is n random bytes. A quota counts the bytes on the wire,
// after the producer's compression: the test producers do not compress.
func randomValue(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// produceFor produces 8 KiB values as fast as the client may for d and
// logs the acknowledged value bytes.
func produceFor(t *testing.T, cl *kgo.Client, topic string, d time.Duration) *rateLog {
	t.Helper()
	log := &rateLog{start: time.Now()}
	value := randomValue(8 << 10)
	ctx := testCtx(t, d+opTimeout)
	var failed atomic.Value
	for time.Since(log.start) < d {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
				return
			}
			log.add(len(r.Value))
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return log
}

// The throttle tests measure over [quotaFrom, quotaTo) of each run: the
// first second is the burst a new client may make (one window) and is left
// out. The broker measures over 5 samples of 200 ms (quota-window-num,
// quota-window-size), so a burst is short next to the 5 s measured.
const (
	quotaLimit = 1 << 20
	quotaFrom  = 1 * time.Second
	quotaTo    = 7 * time.Second
)

func startQuotaBroker(t *testing.T) *brokerProc {
	return startBroker(t, withArgs("--quota-window-num", "5", "--quota-window-size", "100ms"))
}

// TestProducerQuotaThrottles: a producer whose client-id has
// producer_byte_rate 1 MiB/s is acknowledged at most 10 % above that over
// 5 s (and at no less than half of it), sees throttle_time_ms, while an
// unthrottled producer on the same broker goes clearly faster (issue 12,
// "Done means").
func TestProducerQuotaThrottles(t *testing.T) {
	b := startQuotaBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "q")
	createTopic(t, adm, topic, 1, nil)
	res, err := adm.AlterClientQuotas(testCtx(t, opTimeout), []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("client-id", "quota-producer"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quotaLimit}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}

	free := newClient(t, b.Addr(), kgo.ClientID("quota-free"), kgo.MaxBufferedRecords(256), kgo.ProducerBatchCompression(kgo.NoCompression()))
	freeLog := produceFor(t, free, topic, 2*time.Second)
	if r := freeLog.rate(0, 2*time.Second); r < 3*quotaLimit {
		t.Fatalf("an unthrottled producer made only %.0f B/s; the test needs it clearly above %d", r, quotaLimit)
	}

	hook := &throttleHook{}
	cl := newClient(t, b.Addr(), kgo.ClientID("quota-producer"), kgo.WithHooks(hook), kgo.MaxBufferedRecords(256), kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	log := produceFor(t, cl, topic, quotaTo)
	r := log.rate(quotaFrom, quotaTo)
	t.Logf("throttled producer: %.0f B/s (limit %d), %d throttles; unthrottled: %.0f B/s", r, quotaLimit, hook.n.Load(), freeLog.rate(0, 2*time.Second))
	if r > 1.10*quotaLimit || r < 0.5*quotaLimit {
		t.Errorf("throttled producer made %.0f B/s, want within [0.5, 1.1] x %d", r, quotaLimit)
	}
	if hook.n.Load() == 0 {
		t.Error("the producer was never answered a throttle time")
	}
}

// TestConsumerQuotaThrottles: a consumer whose client-id has
// consumer_byte_rate 1 MiB/s receives at most 10 % above that over 5 s
// (and no less than half of it), sees throttle_time_ms, while an
// unthrottled consumer of the same records goes clearly faster.
func TestConsumerQuotaThrottles(t *testing.T) {
	b := startQuotaBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "q")
	createTopic(t, adm, topic, 1, nil)
	filler := newClient(t, b.Addr(), kgo.ClientID("quota-filler"), kgo.MaxBufferedRecords(512),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := randomValue(8 << 10)
	ctx := testCtx(t, opTimeout)
	for i := 0; i < 12<<20/len(value); i++ {
		filler.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := filler.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("client-id", "quota-consumer"), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: quotaLimit}}},
	})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	consume := func(clientID string, d time.Duration, hook *throttleHook) *rateLog {
		cl := newClient(t, b.Addr(), kgo.ClientID(clientID), kgo.WithHooks(hook),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		log := &rateLog{start: time.Now()}
		for time.Since(log.start) < d {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) { log.add(len(r.Value)) })
		}
		return log
	}
	freeLog := consume("quota-free", 2*time.Second, &throttleHook{})
	if r := freeLog.rate(0, 2*time.Second); r < 3*quotaLimit {
		t.Fatalf("an unthrottled consumer made only %.0f B/s; the test needs it clearly above %d", r, quotaLimit)
	}
	hook := &throttleHook{}
	log := consume("quota-consumer", quotaTo, hook)
	r := log.rate(quotaFrom, quotaTo)
	t.Logf("throttled consumer: %.0f B/s (limit %d), %d throttles; unthrottled: %.0f B/s", r, quotaLimit, hook.n.Load(), freeLog.rate(0, 2*time.Second))
	if r > 1.10*quotaLimit || r < 0.5*quotaLimit {
		t.Errorf("throttled consumer received %.0f B/s, want within [0.5, 1.1] x %d", r, quotaLimit)
	}
	if hook.n.Load() == 0 {
		t.Error("the consumer was never answered a throttle time")
	}
}

// TestThrottleOldAndNewVersions (KIP-219): over its producer_byte_rate, a
// client of Produce v7 gets its answer at once with throttle_time_ms (and
// throttles itself); a client of Produce v5, which does not throttle
// itself, gets its answer only after the throttle time, as Kafka did
// before KIP-219.
func TestThrottleOldAndNewVersions(t *testing.T) {
	b := startQuotaBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "q")
	createTopic(t, adm, topic, 1, nil)
	var entries []kadm.AlterClientQuotaEntry
	for _, id := range []string{"quota-old", "quota-new"} {
		entries = append(entries, kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", id), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 50_000}}})
	}
	if res, err := adm.AlterClientQuotas(testCtx(t, opTimeout), entries); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	// 100 kB against 50 kB/s over at least 4 windows of 100 ms: the rate
	// is 250 kB/s, the throttle (250-50)/50 x 400 ms = 1.6 s.
	value := randomValue(100_000)
	produce := func(clientID string, opts ...kgo.Opt) (time.Duration, *throttleHook) {
		hook := &throttleHook{}
		cl := newClient(t, b.Addr(), append([]kgo.Opt{kgo.ClientID(clientID), kgo.WithHooks(hook), kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
		// The first request opens the connection and the session.
		if err := cl.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cl.ProduceSync(testCtx(t, opTimeout), &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start), hook
	}
	newTook, newHook := produce("quota-new")
	oldTook, _ := produce("quota-old", kgo.MaxVersions(kversion.V1_1_0()))
	t.Logf("Produce v7+: answered in %v (%d throttles); Produce v5: answered in %v", newTook, newHook.n.Load(), oldTook)
	if newHook.n.Load() == 0 || newTook > time.Second {
		t.Errorf("a current client was answered in %v with %d throttles; want at once, with a throttle time", newTook, newHook.n.Load())
	}
	if oldTook < 1200*time.Millisecond {
		t.Errorf("a Produce v5 client was answered in %v; want its answer held for the throttle time (about 1.6 s)", oldTook)
	}
}

// TestRequestPercentageThrottles: a client-id with request_percentage
// 0.01 (0.1 ms of request time per second) is throttled after a few
// Metadata requests; another client-id is not, until the default user gets
// the quota (an unauthenticated client is User:ANONYMOUS, a user without
// a quota of its own).
func TestRequestPercentageThrottles(t *testing.T) {
	b := startQuotaBroker(t)
	adm := newAdmin(t, b.Addr())
	if res, err := adm.AlterClientQuotas(testCtx(t, opTimeout), []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("client-id", "quota-requests"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.01}}},
	}); err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	throttles := func(clientID string) int64 {
		hook := &throttleHook{}
		cl := newClient(t, b.Addr(), kgo.ClientID(clientID), kgo.WithHooks(hook))
		ctx := testCtx(t, opTimeout)
		for i := 0; i < 200 && hook.n.Load() == 0; i++ {
			req := kmsg.NewPtrMetadataRequest()
			if _, err := req.RequestWith(ctx, cl); err != nil {
				t.Fatal(err)
			}
		}
		return hook.n.Load()
	}
	if n := throttles("quota-requests"); n == 0 {
		t.Error("200 Metadata requests were never throttled under request_percentage 0.01")
	}
	if n := throttles("quota-free"); n != 0 {
		t.Errorf("a client without a quota was throttled %d times", n)
	}
	// An unauthenticated client is the user ANONYMOUS: the default user's
	// quota applies to it, whatever its client ID.
	if res, err := adm.AlterClientQuotas(testCtx(t, opTimeout), []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.01}}},
	}); err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", res, err)
	}
	if n := throttles("quota-free"); n == 0 {
		t.Error("the default user's request_percentage did not apply to an unauthenticated client")
	}
}
