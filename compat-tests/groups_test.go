package compattests

// Consumer groups (issue 3): real clients (franz-go eager and
// cooperative-sticky, sarama, kafka-go, kcat -G) share a topic through
// member joins, graceful leaves and a member killed without leaving; offsets
// survive restarts; static membership; a "connect" group's opaque bytes;
// __consumer_offsets read as Kafka's records; bad input; the groups CLI.
//
// A record counts as consumed when its member processed it: for franz-go
// and kafka-go only once its offset commit succeeded (so a record polled by
// a member that is killed, or whose commit failed in a rebalance, must come
// to another member). Every produced record must be consumed exactly once.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	groupPartitions     = 8
	groupSessionTimeout = 6 * time.Second // the broker's minimum, Kafka's default
	groupWait           = 60 * time.Second
)

// groupBroker starts a broker whose new groups do not wait the initial
// rebalance delay.
func groupBroker(t *testing.T, extra ...string) *brokerProc {
	return startBroker(t, withArgs(append([]string{"--group-initial-rebalance-delay", "0s"}, extra...)...))
}

// ledger records which member consumed each value.
type ledger struct {
	mu       sync.Mutex
	seen     map[string]string
	dups     []string
	byMember map[string]int
}

func newLedger() *ledger { return &ledger{seen: map[string]string{}, byMember: map[string]int{}} }

func (l *ledger) add(member string, values ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range values {
		if first, ok := l.seen[v]; ok {
			l.dups = append(l.dups, fmt.Sprintf("%s (by %s, again by %s)", v, first, member))
			continue
		}
		l.seen[v] = member
		l.byMember[member]++
	}
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func (l *ledger) members() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.byMember {
		out[k] = v
	}
	return out
}

// check fails unless values v-000000 .. v-(n-1) were each consumed once.
func (l *ledger) check(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 {
		t.Errorf("%d records consumed twice, e.g. %v", len(l.dups), l.dups[:min(5, len(l.dups))])
	}
	var missing []string
	for i := range n {
		if _, ok := l.seen[groupValue(i)]; !ok {
			missing = append(missing, groupValue(i))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d records never consumed, e.g. %v", len(missing), n, missing[:min(5, len(missing))])
	}
	if len(l.seen) != n {
		t.Errorf("consumed %d distinct records, produced %d", len(l.seen), n)
	}
}

func groupValue(i int) string { return fmt.Sprintf("v-%06d", i) }

// groupScenario is one topic consumed by one group.
type groupScenario struct {
	t        *testing.T
	b        *brokerProc
	adm      *kadm.Client
	prod     *kgo.Client
	topic    string
	group    string
	led      *ledger
	produced int
}

func newGroupScenario(t *testing.T, b *brokerProc) *groupScenario {
	s := &groupScenario{t: t, b: b, adm: newAdmin(t, b.Addr()), topic: topicName(t, ""), led: newLedger()}
	s.group = "group." + s.topic
	createTopic(t, s.adm, s.topic, groupPartitions, nil)
	s.prod = newClient(t, b.Addr(), kgo.DefaultProduceTopic(s.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return s
}

// produce appends n records, spread over every partition.
func (s *groupScenario) produce(n int) {
	s.t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range n {
		v := s.produced + i
		rs[i] = &kgo.Record{Value: []byte(groupValue(v)), Partition: int32(v % groupPartitions)}
	}
	ctx := testCtx(s.t, opTimeout)
	if err := s.prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		s.t.Fatalf("produce: %v", err)
	}
	s.produced += n
}

// waitConsumed waits until every produced record was consumed.
func (s *groupScenario) waitConsumed(what string) {
	s.t.Helper()
	deadline := time.Now().Add(groupWait)
	for s.led.count() < s.produced {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: consumed %d of %d records in %v; per member %v", what, s.led.count(), s.produced, groupWait, s.led.members())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStable waits until the group is Stable with n members and every
// partition assigned.
func (s *groupScenario) waitStable(n int, what string) kadm.DescribedGroup {
	s.t.Helper()
	deadline := time.Now().Add(groupWait)
	var last kadm.DescribedGroup
	for time.Now().Before(deadline) {
		ctx := testCtx(s.t, opTimeout)
		d, err := s.adm.DescribeGroups(ctx, s.group)
		if err == nil {
			last = d[s.group]
			if last.State == "Stable" && len(last.Members) == n && len(last.AssignedPartitions()[s.topic]) == groupPartitions {
				return last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("%s: group %s is %s with %d members, want Stable with %d members owning all %d partitions",
		what, s.group, last.State, len(last.Members), n, groupPartitions)
	return last
}

// killableDialer dials TCP and can cut every connection at once and
// refuse new ones: to the broker, the client died.
type killableDialer struct {
	mu    sync.Mutex
	conns []net.Conn
	dead  bool
}

var errKilled = errors.New("member killed")

func (d *killableDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return nil, errKilled
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		c.Close()
		return nil, errKilled
	}
	d.conns = append(d.conns, c)
	return c, nil
}

// Dial is sarama's proxy.Dialer.
func (d *killableDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		c.Close()
	}
}

// groupMember is one consumer of a scenario.
type groupMember interface {
	leave()
	kill()
}

// ---------------------------------------------------------------------------
// franz-go: members commit synchronously after each poll and count only
// what they committed; membership changes happen while records flow.

type franzMember struct {
	name   string
	cl     *kgo.Client
	dialer *killableDialer
	stop   chan struct{} // leave
	killed chan struct{} // kill at the next safe point
	done   chan struct{}
	polls  atomic.Int64
}

func startFranzMember(t *testing.T, s *groupScenario, name string, balancer kgo.GroupBalancer, extra ...kgo.Opt) *franzMember {
	t.Helper()
	m := &franzMember{name: name, dialer: &killableDialer{}, stop: make(chan struct{}), killed: make(chan struct{}), done: make(chan struct{})}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.b.Addr()),
		kgo.ClientID("compat-" + name),
		kgo.Dialer(m.dialer.DialContext),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topic),
		kgo.Balancers(balancer),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(groupSessionTimeout),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryTimeout(10 * time.Second),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	m.cl = cl
	go m.loop(s.led)
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			close(m.stop)
			<-m.done
		}
		go cl.Close() // a killed member's client cannot reach the broker; do not wait for it
	})
	return m
}

func (m *franzMember) loop(led *ledger) {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			m.cl.AllowRebalance()
			return
		case <-m.killed:
			m.dialer.kill() // between polls: every record counted was committed
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := m.cl.PollRecords(ctx, 500)
		cancel()
		m.polls.Add(1)
		if rs := fs.Records(); len(rs) > 0 {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := m.cl.CommitRecords(cctx, rs...)
			ccancel()
			if err == nil {
				vals := make([]string, len(rs))
				for i, r := range rs {
					vals[i] = string(r.Value)
				}
				led.add(m.name, vals...)
			}
		}
		m.cl.AllowRebalance()
	}
}

func (m *franzMember) leave() {
	close(m.stop)
	<-m.done
	m.cl.Close() // LeaveGroup
}

func (m *franzMember) kill() {
	close(m.killed)
	<-m.done
}

// runFranzGroup: four members join one by one while records are produced,
// one leaves gracefully and one is killed mid-stream; the survivors take
// over its partitions once its session expires.
func runFranzGroup(t *testing.T, balancer func() kgo.GroupBalancer) {
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	m1 := startFranzMember(t, s, "m1", balancer())
	s.produce(100)
	s.waitConsumed("one member")

	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for range 30 {
			s.produce(80)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	m2 := startFranzMember(t, s, "m2", balancer())
	time.Sleep(300 * time.Millisecond)
	m3 := startFranzMember(t, s, "m3", balancer())
	time.Sleep(300 * time.Millisecond)
	startFranzMember(t, s, "m4", balancer())
	time.Sleep(time.Second)
	m2.leave()
	time.Sleep(500 * time.Millisecond)
	m3.kill()
	<-producing
	s.waitConsumed("after joins, a leave and a kill")
	s.led.check(t, s.produced)
	if n := len(s.led.members()); n != 4 {
		t.Errorf("records consumed by %d members, want all 4: %v", n, s.led.members())
	}
	s.waitStable(2, "after the killed member expired")
	_ = m1
}

// TestGroupsFranzEager: franz-go with the eager range balancer.
func TestGroupsFranzEager(t *testing.T) {
	t.Parallel()
	runFranzGroup(t, kgo.RangeBalancer)
}

// TestGroupsFranzCooperative: franz-go with the cooperative-sticky
// balancer (incremental rebalances, KIP-429).
func TestGroupsFranzCooperative(t *testing.T) {
	t.Parallel()
	runFranzGroup(t, kgo.CooperativeStickyBalancer)
}

// runPhasedGroup drives a client library through 1 member, 4 members, a
// graceful leave and a kill, producing between membership changes.
func runPhasedGroup(t *testing.T, s *groupScenario, start func(name string) groupMember) {
	per := 160
	m1 := start("m1")
	s.waitStable(1, "first member")
	s.produce(per)
	s.waitConsumed("one member")

	m2, m3, m4 := start("m2"), start("m3"), start("m4")
	s.waitStable(4, "four members")
	s.produce(per)
	s.waitConsumed("four members")

	m2.leave()
	s.waitStable(3, "after a graceful leave")
	s.produce(per)
	s.waitConsumed("three members")

	s.waitCommitted() // auto-committing clients (kcat: every 5s) must have committed
	m3.kill()
	s.produce(per) // records for the killed member's partitions wait for its expiry
	s.waitStable(2, "after the killed member expired")
	s.waitConsumed("after a member was killed")
	s.led.check(t, s.produced)
	got := s.led.members()
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		if got[name] == 0 {
			t.Errorf("member %s consumed nothing: %v", name, got)
		}
	}
	m1.leave()
	m4.leave()
}

// ---------------------------------------------------------------------------
// sarama ConsumerGroup: counts what the handler processes and marks;
// offsets are auto-committed every 100 ms and when a session ends.

type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	dialer *killableDialer
	dead   atomic.Bool
}

type saramaHandler struct {
	name string
	led  *ledger
	m    *saramaMember
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		if h.m.dead.Load() {
			continue // a dying member processes nothing more
		}
		h.led.add(h.name, string(msg.Value))
		sess.MarkMessage(msg, "")
	}
	return nil
}

func startSaramaMember(t *testing.T, s *groupScenario, name string) groupMember {
	t.Helper()
	m := &saramaMember{done: make(chan struct{}), dialer: &killableDialer{}}
	cfg := saramaConfig(sarama.V2_8_0_0)
	cfg.ClientID = "compat-sarama-" + name
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = m.dialer
	cfg.Consumer.Group.Session.Timeout = groupSessionTimeout
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cg, err := sarama.NewConsumerGroup([]string{s.b.Addr()}, s.group, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	m.cg = cg
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		for range cg.Errors() {
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{s.topic}, saramaHandler{name: name, led: s.led, m: m}); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		go cg.Close()
	})
	return m
}

func (m *saramaMember) leave() {
	m.cancel()
	<-m.done
	_ = m.cg.Close() // LeaveGroup
}

func (m *saramaMember) kill() {
	m.dead.Store(true)
	m.dialer.kill()
	m.cancel()
}

// TestGroupsSarama: a sarama ConsumerGroup (range assignor) through
// joins, a graceful leave and a killed member.
func TestGroupsSarama(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	runPhasedGroup(t, s, func(name string) groupMember { return startSaramaMember(t, s, name) })
}

// ---------------------------------------------------------------------------
// segmentio/kafka-go Reader with a GroupID: batches of fetched messages are
// committed synchronously and counted once committed.

type kafkaGoMember struct {
	r      *kafka.Reader
	dialer *killableDialer
	stop   chan struct{}
	killed chan struct{}
	done   chan struct{}
}

func startKafkaGoMember(t *testing.T, s *groupScenario, name string) groupMember {
	t.Helper()
	m := &kafkaGoMember{dialer: &killableDialer{}, stop: make(chan struct{}), killed: make(chan struct{}), done: make(chan struct{})}
	m.r = kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{s.b.Addr()},
		GroupID:           s.group,
		Topic:             s.topic,
		Dialer:            &kafka.Dialer{ClientID: "compat-kafkago-" + name, Timeout: 10 * time.Second, DialFunc: m.dialer.DialContext},
		MinBytes:          1,
		MaxBytes:          1 << 20,
		MaxWait:           200 * time.Millisecond,
		ReadBackoffMax:    200 * time.Millisecond,
		SessionTimeout:    groupSessionTimeout,
		HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout:  20 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		StartOffset:       kafka.FirstOffset,
	})
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-m.killed:
				m.dialer.kill()
				return
			default:
			}
			var batch []kafka.Message
			for len(batch) < 200 {
				wait := 200 * time.Millisecond
				if len(batch) > 0 {
					wait = 20 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				msg, err := m.r.FetchMessage(ctx)
				cancel()
				if err != nil {
					break
				}
				batch = append(batch, msg)
			}
			if len(batch) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := m.r.CommitMessages(ctx, batch...)
			cancel()
			if err == nil {
				vals := make([]string, len(batch))
				for i, msg := range batch {
					vals[i] = string(msg.Value)
				}
				s.led.add(name, vals...)
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			close(m.stop)
			<-m.done
		}
		go m.r.Close()
	})
	return m
}

func (m *kafkaGoMember) leave() {
	close(m.stop)
	<-m.done
	_ = m.r.Close() // LeaveGroup
}

func (m *kafkaGoMember) kill() {
	close(m.killed)
	<-m.done
}

// TestGroupsKafkaGo: kafka-go Readers in one group (range assignor)
// through joins, a graceful leave and a killed member.
func TestGroupsKafkaGo(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	runPhasedGroup(t, s, func(name string) groupMember { return startKafkaGoMember(t, s, name) })
}

// ---------------------------------------------------------------------------
// kcat -G (librdkafka's balanced consumer, auto commit every 5 s; kcat's
// -X auto.commit.interval.ms sets the topic-level alias, not the consumer's):
// SIGINT leaves gracefully (final commit, LeaveGroup), SIGKILL kills.

type kcatMember struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *bytes.Buffer
}

func startKcatMember(t *testing.T, s *groupScenario, name string) groupMember {
	t.Helper()
	bin := kcatPath(t)
	m := &kcatMember{done: make(chan struct{}), stderr: &bytes.Buffer{}}
	m.cmd = exec.Command(bin, "-b", s.b.Addr(), "-G", s.group,
		"-X", "client.id=compat-kcat-"+name,
		"-X", "auto.offset.reset=earliest",
		"-X", fmt.Sprintf("session.timeout.ms=%d", groupSessionTimeout.Milliseconds()),
		"-X", "heartbeat.interval.ms=300",
		"-X", "fetch.wait.max.ms=100",
		"-u", "-f", "%s\n", s.topic)
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start kcat: %v", err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.led.add(name, sc.Text())
		}
		_ = m.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("kcat %s stderr:\n%s", name, m.stderr.String())
		}
	})
	return m
}

func (m *kcatMember) leave() {
	_ = m.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

func (m *kcatMember) kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// TestGroupsKcat: kcat -G processes (librdkafka, range/roundrobin) through
// joins, a SIGINT leave and a kill -9.
func TestGroupsKcat(t *testing.T) {
	kcatPath(t)
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	runPhasedGroup(t, s, func(name string) groupMember { return startKcatMember(t, s, name) })
}

// ---------------------------------------------------------------------------

// TestGroupsOffsetsSurviveRestart: committed offsets and the group's
// generation and members survive a clean restart and a kill -9: the same
// consumer carries on without re-reading or skipping, and a new member of
// the group starts at the committed offsets.
func TestGroupsOffsetsSurviveRestart(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	startFranzMember(t, s, "m1", kgo.CooperativeStickyBalancer())
	s.produce(300)
	s.waitConsumed("before the restart")
	before := s.waitStable(1, "before the restart")

	b.Restart()
	after := s.waitStable(1, "after a clean restart")
	if before.Members[0].MemberID != after.Members[0].MemberID {
		t.Errorf("member %s after the restart, was %s: the group lost its members", after.Members[0].MemberID, before.Members[0].MemberID)
	}
	s.produce(300)
	s.waitConsumed("after a clean restart")

	b.Kill()
	b.Start()
	s.waitStable(1, "after kill -9")
	s.produce(300)
	s.waitConsumed("after kill -9")
	s.led.check(t, s.produced)

	ctx := testCtx(t, opTimeout)
	offsets, err := s.adm.FetchOffsets(ctx, s.group)
	if err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, s.adm, s.topic)
	for p, end := range ends {
		if o, ok := offsets.Lookup(s.topic, p); !ok || o.At != end {
			t.Errorf("partition %d committed %+v, want the end offset %d", p, o, end)
		}
	}
}

// TestGroupsStaticMembership pins KIP-345: a static member that restarts
// within its session timeout takes its old place and partitions, and the
// other member sees no rebalance.
func TestGroupsStaticMembership(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	var assignedB atomic.Int32
	countB := kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assignedB.Add(1) })
	a := startFranzMember(t, s, "a", kgo.RangeBalancer(), kgo.InstanceID("instance-a"))
	s.waitStable(1, "a alone")
	startFranzMember(t, s, "b", kgo.RangeBalancer(), kgo.InstanceID("instance-b"), countB)
	before := s.waitStable(2, "a and b")
	s.produce(200)
	s.waitConsumed("a and b")
	rebalances := assignedB.Load()

	a.leave() // a static member does not send LeaveGroup on close
	time.Sleep(500 * time.Millisecond)
	startFranzMember(t, s, "a2", kgo.RangeBalancer(), kgo.InstanceID("instance-a"))
	after := s.waitStable(2, "a restarted")
	s.produce(200)
	s.waitConsumed("a restarted")
	s.led.check(t, s.produced)
	if got := assignedB.Load(); got != rebalances {
		t.Errorf("b was assigned partitions %d times after a's restart, want no rebalance", got-rebalances)
	}
	assigned := func(d kadm.DescribedGroup, instance string) string {
		for _, m := range d.Members {
			if m.InstanceID != nil && *m.InstanceID == instance {
				c, _ := m.Assigned.AsConsumer()
				return fmt.Sprint(c.Topics)
			}
		}
		return "missing"
	}
	if assigned(before, "instance-a") != assigned(after, "instance-a") {
		t.Errorf("instance-a was assigned %s before and %s after its restart", assigned(before, "instance-a"), assigned(after, "instance-a"))
	}
	if s.led.members()["a2"] == 0 {
		t.Errorf("the restarted static member consumed nothing: %v", s.led.members())
	}
}

// ---------------------------------------------------------------------------
// Raw protocol helpers for goroutines (no testing.T inside).

type rawClient struct {
	conn net.Conn
	corr int32
}

func dialRawClient(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{conn: c}
}

func (r *rawClient) do(req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("compat-raw")).AppendRequest(nil, req, r.corr)
	_ = r.conn.SetDeadline(time.Now().Add(opTimeout))
	if _, err := r.conn.Write(buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, err
	}
	rd := kbin.Reader{Src: body}
	if corr := rd.Int32(); corr != r.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, r.corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *rawClient) must(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := r.do(req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func joinRequest(group, member, protocolType string, protocols map[string][]byte, order ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9
	req.Group = group
	req.MemberID = member
	req.ProtocolType = protocolType
	req.SessionTimeoutMillis = 10000
	req.RebalanceTimeoutMillis = 10000
	for _, name := range order {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, protocols[name]
		req.Protocols = append(req.Protocols, p)
	}
	return req
}

// rawJoin joins through MEMBER_ID_REQUIRED and returns the JoinGroup
// response of the second join.
func (r *rawClient) rawJoin(req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, error) {
	resp, err := r.do(req)
	if err != nil {
		return nil, err
	}
	jr := resp.(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != kerr.MemberIDRequired.Code {
		return jr, nil
	}
	req.MemberID = jr.MemberID
	resp, err = r.do(req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.JoinGroupResponse), nil
}

// TestGroupsConnectProtocol: a group of protocol type "connect" (Kafka
// Connect workers) with two members: the leader sees both members'
// metadata and every member gets the assignment the leader wrote, byte for
// byte, for a protocol the broker cannot parse.
func TestGroupsConnectProtocol(t *testing.T) {
	t.Parallel()
	b := startBroker(t, withArgs("--group-initial-rebalance-delay", "1s"))
	group := "connect-cluster-" + topicName(t, "")
	metaA, metaA2, metaB := randomBytes(2000), randomBytes(100), randomBytes(3000)
	reqs := []*kmsg.JoinGroupRequest{
		joinRequest(group, "", "connect", map[string][]byte{"sessioned": metaA, "compatible": metaA2}, "sessioned", "compatible"),
		joinRequest(group, "", "connect", map[string][]byte{"eager": randomBytes(10), "sessioned": metaB}, "sessioned", "eager"),
	}
	clients := []*rawClient{dialRawClient(t, b.Addr()), dialRawClient(t, b.Addr())}
	joins := make([]*kmsg.JoinGroupResponse, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			joins[i], errs[i] = clients[i].rawJoin(reqs[i])
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || joins[i].ErrorCode != 0 {
			t.Fatalf("join %d: %v %v", i, errs[i], errName(joins[i].ErrorCode))
		}
		if *joins[i].ProtocolType != "connect" || *joins[i].Protocol != "sessioned" || joins[i].Generation != joins[0].Generation {
			t.Fatalf("join %d: protocol %s/%s generation %d", i, *joins[i].ProtocolType, *joins[i].Protocol, joins[i].Generation)
		}
	}
	leader := 0
	if joins[1].LeaderID == joins[1].MemberID {
		leader = 1
	}
	sent := map[string][]byte{joins[0].MemberID: metaA, joins[1].MemberID: metaB}
	if len(joins[leader].Members) != 2 || len(joins[1-leader].Members) != 0 {
		t.Fatalf("leader got %d members, follower %d", len(joins[leader].Members), len(joins[1-leader].Members))
	}
	for _, m := range joins[leader].Members {
		if !bytes.Equal(m.ProtocolMetadata, sent[m.MemberID]) {
			t.Errorf("leader got %d metadata bytes for %s that differ from the %d sent", len(m.ProtocolMetadata), m.MemberID, len(sent[m.MemberID]))
		}
	}

	assign := map[string][]byte{joins[0].MemberID: randomBytes(5000), joins[1].MemberID: randomBytes(1)}
	syncs := make([]*kmsg.SyncGroupResponse, 2)
	for _, i := range []int{1 - leader, leader} { // the follower waits for the leader
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version = 5
			req.Group, req.Generation, req.MemberID = group, joins[i].Generation, joins[i].MemberID
			req.ProtocolType, req.Protocol = kmsg.StringPtr("connect"), kmsg.StringPtr("sessioned")
			if i == leader {
				for id, a := range assign {
					ga := kmsg.NewSyncGroupRequestGroupAssignment()
					ga.MemberID, ga.MemberAssignment = id, a
					req.GroupAssignment = append(req.GroupAssignment, ga)
				}
			}
			resp, err := clients[i].do(req)
			if err != nil {
				errs[i] = err
				return
			}
			syncs[i] = resp.(*kmsg.SyncGroupResponse)
		}()
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || syncs[i].ErrorCode != 0 {
			t.Fatalf("sync %d: %v %v", i, errs[i], errName(syncs[i].ErrorCode))
		}
		if !bytes.Equal(syncs[i].MemberAssignment, assign[joins[i].MemberID]) {
			t.Errorf("member %d got a %d-byte assignment that differs from the %d bytes the leader wrote", i, len(syncs[i].MemberAssignment), len(assign[joins[i].MemberID]))
		}
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version = 5
	dreq.Groups = []string{group}
	d := clients[0].must(t, dreq).(*kmsg.DescribeGroupsResponse).Groups[0]
	if d.State != "Stable" || d.ProtocolType != "connect" || d.Protocol != "sessioned" || len(d.Members) != 2 {
		t.Fatalf("described %s %s %s with %d members", d.State, d.ProtocolType, d.Protocol, len(d.Members))
	}
	for _, m := range d.Members {
		if !bytes.Equal(m.MemberAssignment, assign[m.MemberID]) || !bytes.Equal(m.ProtocolMetadata, sent[m.MemberID]) {
			t.Errorf("DescribeGroups changed the bytes of member %s", m.MemberID)
		}
	}
}

// TestGroupsConsumerOffsetsTopic reads __consumer_offsets with a plain
// consumer, as Burrow and lag exporters do, and decodes Kafka's commit and
// group metadata records from the partition Kafka's hash chooses.
func TestGroupsConsumerOffsetsTopic(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	startFranzMember(t, s, "m1", kgo.RangeBalancer())
	s.produce(80)
	s.waitConsumed("consumer")
	s.waitStable(1, "consumer")

	ctx := testCtx(t, opTimeout)
	topics, err := s.adm.ListTopicsWithInternal(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	td := topics["__consumer_offsets"]
	if td.Err != nil || !td.IsInternal || len(td.Partitions) != 50 {
		t.Fatalf("__consumer_offsets: err %v, internal %v, %d partitions; want internal with 50", td.Err, td.IsInternal, len(td.Partitions))
	}
	rc, err := s.adm.DescribeTopicConfigs(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "compact") {
			t.Errorf("__consumer_offsets cleanup.policy %v, want compact", c.Value)
		}
	}

	partition := javaHashPartition(s.group, 50)
	ends := endOffsets(t, s.adm, "__consumer_offsets")
	if ends[partition] == 0 {
		t.Fatalf("partition %d of __consumer_offsets (Kafka's choice for %q) is empty; ends %v", partition, s.group, ends)
	}
	recs := readPartitions(t, b.Addr(), "__consumer_offsets", map[int32]int64{partition: ends[partition]})[partition]
	commits := map[int32]int64{}
	sawMetadata := false
	for _, r := range recs {
		if len(r.Key) < 2 {
			t.Fatalf("record at %d has a %d-byte key", r.Offset, len(r.Key))
		}
		switch v := int16(binary.BigEndian.Uint16(r.Key)); v {
		case 0, 1:
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(r.Key); err != nil {
				t.Fatalf("offset commit key at %d: %v", r.Offset, err)
			}
			if k.Group != s.group || k.Topic != s.topic {
				t.Fatalf("commit key for %s/%s in the partition of %s", k.Group, k.Topic, s.group)
			}
			var val kmsg.OffsetCommitValue
			if err := val.ReadFrom(r.Value); err != nil {
				t.Fatalf("offset commit value at %d: %v", r.Offset, err)
			}
			if val.CommitTimestamp <= 0 {
				t.Errorf("commit timestamp %d", val.CommitTimestamp)
			}
			commits[k.Partition] = val.Offset
		case 2:
			var k kmsg.GroupMetadataKey
			var val kmsg.GroupMetadataValue
			if err := k.ReadFrom(r.Key); err != nil {
				t.Fatal(err)
			}
			if err := val.ReadFrom(r.Value); err != nil {
				t.Fatalf("group metadata value at %d: %v", r.Offset, err)
			}
			if k.Group != s.group || val.ProtocolType != "consumer" || val.Protocol == nil || *val.Protocol != "range" {
				t.Fatalf("group metadata %+v %+v", k, val)
			}
			if len(val.Members) == 1 {
				var a kmsg.ConsumerMemberAssignment
				if err := a.ReadFrom(val.Members[0].Assignment); err != nil || len(a.Topics) != 1 || a.Topics[0].Topic != s.topic || len(a.Topics[0].Partitions) != groupPartitions {
					t.Fatalf("stored assignment %+v: %v", a, err)
				}
				sawMetadata = true
			}
		default:
			t.Fatalf("record at %d has key version %d", r.Offset, v)
		}
	}
	if !sawMetadata {
		t.Error("no group metadata record with the member's assignment")
	}
	topicEnds := endOffsets(t, s.adm, s.topic)
	for p, end := range topicEnds {
		if commits[p] != end {
			t.Errorf("latest commit record for partition %d says %d, want %d", p, commits[p], end)
		}
	}
}

// javaHashPartition is Kafka's choice of __consumer_offsets partition:
// Utils.abs(group.hashCode()) % n, Java's hash over UTF-16.
func javaHashPartition(group string, n int32) int32 {
	var h int32
	for _, u := range utf16Units(group) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

// TestGroupsBadInput: each bad request gets Kafka's error code, and the
// group keeps its generation, member and assignment.
func TestGroupsBadInput(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 2, nil)
	group := "bad-input-" + topic
	c := dialRawClient(t, b.Addr())

	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join := joinRequest(group, "", "consumer", map[string][]byte{"range": meta.AppendTo(nil)}, "range")
	jr, err := c.rawJoin(join)
	if err != nil || jr.ErrorCode != 0 {
		t.Fatalf("join: %v %s", err, errName(jr.ErrorCode))
	}
	member, gen := jr.MemberID, jr.Generation
	assignment := randomBytes(40)
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version = 5
	sreq.Group, sreq.Generation, sreq.MemberID = group, gen, member
	ga := kmsg.NewSyncGroupRequestGroupAssignment()
	ga.MemberID, ga.MemberAssignment = member, assignment
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{ga}
	if r := c.must(t, sreq).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %s", errName(r.ErrorCode))
	}

	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		var code int16
		if want != nil {
			code = want.Code
		}
		if got != code {
			t.Errorf("%s: %s, want %s", what, errName(got), errName(code))
		}
	}
	joinErr := func(mut func(*kmsg.JoinGroupRequest)) int16 {
		req := joinRequest(group, "", "consumer", map[string][]byte{"range": meta.AppendTo(nil)}, "range")
		mut(req)
		return c.must(t, req).(*kmsg.JoinGroupResponse).ErrorCode
	}
	expect("join with an unknown member id", joinErr(func(r *kmsg.JoinGroupRequest) { r.MemberID = "ghost" }), kerr.UnknownMemberID)
	expect("join with another protocol type", joinErr(func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }), kerr.InconsistentGroupProtocol)
	expect("join with no common protocol", joinErr(func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Name = "roundrobin" }), kerr.InconsistentGroupProtocol)
	expect("join with 2 MiB of metadata", joinErr(func(r *kmsg.JoinGroupRequest) { r.Protocols[0].Metadata = make([]byte, 2<<20) }), kerr.InvalidRequest)
	expect("join with a 1s session timeout", joinErr(func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1000 }), kerr.InvalidSessionTimeout)
	expect("join with an empty group id", joinErr(func(r *kmsg.JoinGroupRequest) { r.Group = "" }), kerr.InvalidGroupID)
	expect("join an unknown group with a member id", joinErr(func(r *kmsg.JoinGroupRequest) { r.Group, r.MemberID = "nope-"+group, "ghost" }), kerr.UnknownMemberID)

	hb := func(g string, gen int32, m string) int16 {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = 4
		req.Group, req.Generation, req.MemberID = g, gen, m
		return c.must(t, req).(*kmsg.HeartbeatResponse).ErrorCode
	}
	expect("heartbeat of a stale generation", hb(group, gen-1, member), kerr.IllegalGeneration)
	expect("heartbeat of an unknown member", hb(group, gen, "ghost"), kerr.UnknownMemberID)
	expect("heartbeat to an unknown group", hb("nope-"+group, gen, member), kerr.UnknownMemberID)

	sync := func(g string, gen int32, m string) int16 {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = 5
		req.Group, req.Generation, req.MemberID = g, gen, m
		return c.must(t, req).(*kmsg.SyncGroupResponse).ErrorCode
	}
	expect("sync of a stale generation", sync(group, gen+3, member), kerr.IllegalGeneration)
	expect("sync of an unknown member", sync(group, gen, "ghost"), kerr.UnknownMemberID)
	expect("sync to an unknown group", sync("nope-"+group, gen, member), kerr.UnknownMemberID)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 5
	leave.Group = "nope-" + group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	expect("leave an unknown group", c.must(t, leave).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID)
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "ghost"}}
	lr := c.must(t, leave).(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode != 0 || len(lr.Members) != 1 {
		t.Fatalf("leave of an unknown member: %s with %d members", errName(lr.ErrorCode), len(lr.Members))
	}
	expect("leave of an unknown member", lr.Members[0].ErrorCode, kerr.UnknownMemberID)

	commit := func(version int16, g string, gen int32, m, tp string, metadata string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = version
		req.Group, req.Generation, req.MemberID = g, gen, m
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset, rp.Metadata = 1, &metadata
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		return c.must(t, req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	expect("commit of a stale generation", commit(8, group, gen-1, member, topic, ""), kerr.IllegalGeneration)
	expect("commit of an unknown member", commit(8, group, gen, "ghost", topic, ""), kerr.UnknownMemberID)
	expect("commit without a member to an active group", commit(8, group, -1, "", topic, ""), kerr.UnknownMemberID)
	expect("commit to an unknown topic", commit(8, group, gen, member, "nope-"+topic, ""), kerr.UnknownTopicOrPartition)
	expect("commit to an unknown group v9", commit(9, "nope-"+group, 4, "m", topic, ""), kerr.GroupIDNotFound)
	expect("commit to an unknown group v8", commit(8, "nope-"+group, 4, "m", topic, ""), kerr.IllegalGeneration)
	expect("commit with 5000 bytes of metadata", commit(8, group, gen, member, topic, strings.Repeat("m", 5000)), kerr.OffsetMetadataTooLarge)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 7
	fetch.Group = "nope-" + group
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	fr := c.must(t, fetch).(*kmsg.OffsetFetchResponse)
	if fr.ErrorCode != 0 || fr.Topics[0].Partitions[0].Offset != -1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("offsets of an unknown group: %+v, want -1 without error", fr)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version = 4
	fc.CoordinatorType = 7
	fc.CoordinatorKeys = []string{group}
	expect("find a coordinator of type 7", c.must(t, fc).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode, kerr.InvalidRequest)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{group, "nope-" + group}
	dr := c.must(t, del).(*kmsg.DeleteGroupsResponse)
	expect("delete an active group", dr.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	expect("delete an unknown group", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	// v10: a topic ID no topic has is UNKNOWN_TOPIC_ID (Kafka's KafkaApis).
	unknown := [16]byte{0xde, 0xad, 15: 1}
	uc := kmsg.NewPtrOffsetCommitRequest()
	uc.Version, uc.Group, uc.Generation = 10, group, -1
	uc.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: unknown, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	if r := c.must(t, uc).(*kmsg.OffsetCommitResponse); len(r.Topics) != 1 || r.Topics[0].TopicID != unknown || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("OffsetCommit v10 of an unknown topic ID: %+v, want UNKNOWN_TOPIC_ID", r.Topics)
	}
	uf := kmsg.NewPtrOffsetFetchRequest()
	uf.Version = 10
	uf.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: unknown, Partitions: []int32{0}}}}}
	if r := c.must(t, uf).(*kmsg.OffsetFetchResponse); len(r.Groups) != 1 || len(r.Groups[0].Topics) != 1 || r.Groups[0].Topics[0].TopicID != unknown ||
		r.Groups[0].Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code || r.Groups[0].Topics[0].Partitions[0].Offset != -1 {
		t.Errorf("OffsetFetch v10 of an unknown topic ID: %+v, want offset -1 and UNKNOWN_TOPIC_ID", r.Groups)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = group
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	odr := c.must(t, od).(*kmsg.OffsetDeleteResponse)
	if odr.ErrorCode != 0 || len(odr.Topics) != 1 {
		t.Fatalf("offset delete: %s", errName(odr.ErrorCode))
	}
	expect("delete the offsets of a subscribed topic", odr.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)

	// Static membership: an instance ID held by another member ID is fenced.
	static := joinRequest(group+"-static", "", "consumer", map[string][]byte{"range": meta.AppendTo(nil)}, "range")
	static.InstanceID = kmsg.StringPtr("instance-1")
	sj := c.must(t, static).(*kmsg.JoinGroupResponse)
	if sj.ErrorCode != 0 {
		t.Fatalf("static join: %s", errName(sj.ErrorCode))
	}
	static.MemberID = "instance-1-bogus"
	expect("join of a static member under another member id", c.must(t, static).(*kmsg.JoinGroupResponse).ErrorCode, kerr.FencedInstanceID)

	// The group did not change.
	expect("heartbeat after the bad input", hb(group, gen, member), nil)
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{group}
	d := c.must(t, dreq).(*kmsg.DescribeGroupsResponse).Groups[0]
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != member || !bytes.Equal(d.Members[0].MemberAssignment, assignment) {
		t.Fatalf("group after bad input: %s with %d members", d.State, len(d.Members))
	}
	expect("commit after the bad input", commit(8, group, gen, member, topic, "ok"), nil)
}

// ---------------------------------------------------------------------------

// runCLI runs `broker groups ARGS` against the broker and returns stdout,
// stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, brokerBin, append([]string{"groups"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("broker groups %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// TestGroupsCLIAndMetrics: `broker groups list|describe|lag|delete|
// reset-offsets` with table and JSON output and their exit codes, and the
// group metrics on /metrics.
func TestGroupsCLIAndMetrics(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	s := newGroupScenario(t, b)
	m := startFranzMember(t, s, "m1", kgo.RangeBalancer())
	s.produce(160)
	s.waitConsumed("consumer")
	s.waitStable(1, "consumer")
	s.produce(40)
	s.waitConsumed("consumer")

	bs := "--bootstrap-server=" + b.Addr()
	out, errOut, code := runCLI(t, "list", bs, "-o", "json")
	var listed []struct{ Group, State, ProtocolType string }
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
		t.Fatalf("list: exit %d, %s %s", code, out, errOut)
	}
	if !slices.ContainsFunc(listed, func(g struct{ Group, State, ProtocolType string }) bool {
		return g.Group == s.group && g.State == "Stable"
	}) {
		t.Errorf("list does not show %s as Stable: %s", s.group, out)
	}
	out, _, code = runCLI(t, "describe", bs, s.group)
	if code != 0 || !strings.Contains(out, "Stable") || !strings.Contains(out, "compat-m1") || !strings.Contains(out, s.topic+":0,1,2,3,4,5,6,7") {
		t.Errorf("describe: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, "lag", bs, "-o", "json", s.group)
	var lags []struct {
		Topic     string
		Partition int32
		Committed int64
		End       int64
		Lag       int64
	}
	if code != 0 || json.Unmarshal([]byte(out), &lags) != nil || len(lags) != groupPartitions {
		t.Fatalf("lag: exit %d:\n%s", code, out)
	}
	for _, l := range lags {
		if l.Lag != 0 || l.Committed != l.End {
			t.Errorf("lag of partition %d: %+v, want 0", l.Partition, l)
		}
	}
	metrics := httpGet(t, "http://"+b.HTTPAddr()+"/metrics")
	for _, want := range []string{`broker_groups{state="Stable"} 1`, fmt.Sprintf(`broker_group_lag{group=%q,partition="0",topic=%q} 0`, s.group, s.topic), "broker_group_rebalances_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if _, _, code = runCLI(t, "delete", bs, s.group); code != 4 {
		t.Errorf("delete of an active group: exit %d, want 4", code)
	}
	if _, errOut, code = runCLI(t, "reset-offsets", bs, "--topic", s.topic, "--to-earliest", "--execute", s.group); code != 4 {
		t.Errorf("reset-offsets of an active group: exit %d, want 4 (%s)", code, errOut)
	}
	m.leave()
	s.waitEmpty()

	out, _, code = runCLI(t, "reset-offsets", bs, "--topic", s.topic, "--to-earliest", s.group)
	if code != 0 || !strings.Contains(out, "dry run") {
		t.Errorf("dry run: exit %d:\n%s", code, out)
	}
	s.checkCommitted(func(p int32, end int64) int64 { return end }, "after a dry run")
	if out, errOut, code = runCLI(t, "reset-offsets", bs, "--topic", s.topic+":0,1", "--to-offset", "7", "--execute", s.group); code != 0 {
		t.Fatalf("reset to offset: exit %d: %s %s", code, out, errOut)
	}
	s.checkCommitted(func(p int32, end int64) int64 {
		if p < 2 {
			return 7
		}
		return end
	}, "after --to-offset 7 on partitions 0 and 1")
	if _, errOut, code = runCLI(t, "reset-offsets", bs, "--all-topics", "--to-datetime", "2000-01-01T00:00:00Z", "--execute", s.group); code != 0 {
		t.Fatalf("reset to a datetime: exit %d: %s", code, errOut)
	}
	s.checkCommitted(func(int32, int64) int64 { return 0 }, "after --to-datetime 2000")
	if _, errOut, code = runCLI(t, "reset-offsets", bs, "--all-topics", "--to-latest", "--execute", s.group); code != 0 {
		t.Fatalf("reset to latest: exit %d: %s", code, errOut)
	}
	s.checkCommitted(func(p int32, end int64) int64 { return end }, "after --to-latest")

	if _, _, code = runCLI(t, "reset-offsets", bs, "--to-latest", s.group); code != 2 {
		t.Errorf("reset without topics: exit %d, want 2", code)
	}
	if _, errOut, code = runCLI(t, "describe", bs, s.group, "-o", "json"); code != 2 || !strings.Contains(errOut, "put flags first") {
		t.Errorf("a flag after the group: exit %d, want 2: %s", code, errOut)
	}
	if out, _, code = runCLI(t, "delete", bs, s.group); code != 0 || !strings.Contains(out, "deleted") {
		t.Errorf("delete: exit %d: %s", code, out)
	}
	if _, _, code = runCLI(t, "describe", bs, s.group); code != 3 {
		t.Errorf("describe of a deleted group: exit %d, want 3", code)
	}
	if _, _, code = runCLI(t, "delete", bs, s.group); code != 3 {
		t.Errorf("delete of a deleted group: exit %d, want 3", code)
	}
	if _, _, code = runCLI(t, "list", "--bootstrap-server="+freeAddr(t), "--timeout=3s"); code != 6 {
		t.Errorf("list against nothing: exit %d, want 6", code)
	}
}

// waitCommitted waits until the group's committed offsets reach the end
// of every partition.
func (s *groupScenario) waitCommitted() {
	s.t.Helper()
	deadline := time.Now().Add(groupWait)
	for {
		ends := endOffsets(s.t, s.adm, s.topic)
		got, err := s.adm.FetchOffsets(testCtx(s.t, opTimeout), s.group)
		behind := 0
		for p, end := range ends {
			if o, ok := got.Lookup(s.topic, p); err != nil || !ok || o.At != end {
				behind++
			}
		}
		if behind == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the group's commits did not reach the end of %d partitions in %v", behind, groupWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitEmpty waits until the group has no members.
func (s *groupScenario) waitEmpty() {
	s.t.Helper()
	deadline := time.Now().Add(groupWait)
	for time.Now().Before(deadline) {
		d, err := s.adm.DescribeGroups(testCtx(s.t, opTimeout), s.group)
		if err == nil && d[s.group].State == "Empty" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("group %s did not become Empty", s.group)
}

// checkCommitted compares the group's committed offsets with want(p, end).
func (s *groupScenario) checkCommitted(want func(p int32, end int64) int64, what string) {
	s.t.Helper()
	ctx := testCtx(s.t, opTimeout)
	got, err := s.adm.FetchOffsets(ctx, s.group)
	if err != nil {
		s.t.Fatalf("%s: FetchOffsets: %v", what, err)
	}
	ends := endOffsets(s.t, s.adm, s.topic)
	ps := make([]int32, 0, len(ends))
	for p := range ends {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		o, ok := got.Lookup(s.topic, p)
		if w := want(p, ends[p]); !ok || o.At != w {
			s.t.Errorf("%s: partition %d committed %d (present %v), want %d", what, p, o.At, ok, w)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestGroupsVersionSweep runs the group APIs at every advertised version:
// a member joins, syncs, heartbeats, is described, listed and leaves at
// each JoinGroup version; offsets are committed and fetched back at every
// OffsetCommit and OffsetFetch version. A field gated on the wrong version
// breaks exactly the clients that pin it.
func TestGroupsVersionSweep(t *testing.T) {
	t.Parallel()
	b := groupBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 2, nil)
	vs := apiVersions(t, b.Addr())
	c := dialRawClient(t, b.Addr())
	host, portStr, _ := net.SplitHostPort(b.Addr())
	versions := func(key kmsg.Key) []int16 {
		r, ok := vs[int16(key)]
		if !ok {
			t.Fatalf("%s is not advertised", kmsg.NameForKey(int16(key)))
		}
		var out []int16
		for v := r[0]; v <= r[1]; v++ {
			out = append(out, v)
		}
		return out
	}
	capped := func(key kmsg.Key, v int16) int16 { return min(v, vs[int16(key)][1]) }

	for _, v := range versions(kmsg.FindCoordinator) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g"
		req.CoordinatorKeys = []string{"g", "h"}
		resp := c.must(t, req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host != host || fmt.Sprint(resp.Port) != portStr {
				t.Errorf("FindCoordinator v%d: %s node %d at %s:%d", v, errName(resp.ErrorCode), resp.NodeID, resp.Host, resp.Port)
			}
			continue
		}
		if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "h" || resp.Coordinators[1].NodeID != 1 || resp.Coordinators[1].Host != host {
			t.Errorf("FindCoordinator v%d: %+v", v, resp.Coordinators)
		}
	}

	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	for _, v := range versions(kmsg.JoinGroup) {
		group := fmt.Sprintf("sweep-%s-v%d", topic, v)
		join := joinRequest(group, "", "consumer", map[string][]byte{"range": meta.AppendTo(nil)}, "range")
		join.Version = v
		jr, err := c.rawJoin(join)
		if err != nil || jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 ||
			!bytes.Equal(jr.Members[0].ProtocolMetadata, meta.AppendTo(nil)) || jr.Protocol == nil || *jr.Protocol != "range" {
			t.Errorf("JoinGroup v%d: %v %+v", v, err, jr)
			continue
		}
		if v >= 7 && (jr.ProtocolType == nil || *jr.ProtocolType != "consumer") {
			t.Errorf("JoinGroup v%d: protocol type %v", v, jr.ProtocolType)
		}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = capped(kmsg.SyncGroup, v)
		sync.Group, sync.Generation, sync.MemberID = group, jr.Generation, jr.MemberID
		sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("assignment")}}
		if sr := c.must(t, sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "assignment" {
			t.Errorf("SyncGroup v%d: %s %q", sync.Version, errName(sr.ErrorCode), sr.MemberAssignment)
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version = capped(kmsg.Heartbeat, v)
		hb.Group, hb.Generation, hb.MemberID = group, jr.Generation, jr.MemberID
		if r := c.must(t, hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
			t.Errorf("Heartbeat v%d: %s", hb.Version, errName(r.ErrorCode))
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Version = capped(kmsg.DescribeGroups, v)
		dg.Groups = []string{group}
		d := c.must(t, dg).(*kmsg.DescribeGroupsResponse)
		if len(d.Groups) != 1 || d.Groups[0].State != "Stable" || d.Groups[0].Protocol != "range" || len(d.Groups[0].Members) != 1 ||
			string(d.Groups[0].Members[0].MemberAssignment) != "assignment" || !strings.HasPrefix(d.Groups[0].Members[0].ClientHost, "/") {
			t.Errorf("DescribeGroups v%d: %+v", dg.Version, d.Groups)
		}
		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version = capped(kmsg.ListGroups, v)
		if lg.Version >= 4 {
			lg.StatesFilter = []string{"stable"}
		}
		l := c.must(t, lg).(*kmsg.ListGroupsResponse)
		if !slices.ContainsFunc(l.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return g.Group == group && g.ProtocolType == "consumer" && (lg.Version < 4 || g.GroupState == "Stable") && (lg.Version < 5 || g.GroupType == "classic")
		}) {
			t.Errorf("ListGroups v%d does not list %s: %+v", lg.Version, group, l.Groups)
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version = capped(kmsg.LeaveGroup, v)
		leave.Group, leave.MemberID = group, jr.MemberID
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: jr.MemberID}}
		if r := c.must(t, leave).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 || (leave.Version >= 3 && (len(r.Members) != 1 || r.Members[0].ErrorCode != 0)) {
			t.Errorf("LeaveGroup v%d: %+v", leave.Version, r)
		}
	}

	group := "sweep-commits-" + topic
	id := topicID(t, adm, topic) // OffsetCommit and OffsetFetch v10 name topics by ID
	for _, cv := range versions(kmsg.OffsetCommit) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = cv
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 1, 100+int64(cv), 0, kmsg.StringPtr(fmt.Sprintf("v%d", cv))
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		r := c.must(t, req).(*kmsg.OffsetCommitResponse)
		if len(r.Topics) != 1 || (cv < 10 && r.Topics[0].Topic != topic) || (cv >= 10 && r.Topics[0].TopicID != id) || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("OffsetCommit v%d: %+v", cv, r.Topics)
			continue
		}
		for _, fv := range versions(kmsg.OffsetFetch) {
			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version = fv
			f.Group = group
			f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0, 1}}}
			f.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, TopicID: id, Partitions: []int32{0, 1}}}}}
			resp := c.must(t, f).(*kmsg.OffsetFetchResponse)
			var offsets []int64
			var metadata string
			if fv < 8 {
				for _, tp := range resp.Topics {
					for _, p := range tp.Partitions {
						offsets = append(offsets, p.Offset)
						if p.Partition == 1 && p.Metadata != nil {
							metadata = *p.Metadata
						}
					}
				}
			} else if len(resp.Groups) == 1 {
				for _, tp := range resp.Groups[0].Topics {
					if fv >= 10 && tp.TopicID != id {
						t.Errorf("OffsetFetch v%d answered topic ID %x, want %x", fv, tp.TopicID, id)
					}
					for _, p := range tp.Partitions {
						offsets = append(offsets, p.Offset)
						if p.Partition == 1 && p.Metadata != nil {
							metadata = *p.Metadata
						}
					}
				}
			}
			if fmt.Sprint(offsets) != fmt.Sprint([]int64{-1, 100 + int64(cv)}) || metadata != fmt.Sprintf("v%d", cv) {
				t.Errorf("OffsetFetch v%d after OffsetCommit v%d: offsets %v metadata %q", fv, cv, offsets, metadata)
			}
		}
	}
	// v10: a topic ID no topic has is UNKNOWN_TOPIC_ID (Kafka's KafkaApis).
	unknown := [16]byte{0xde, 0xad, 15: 1}
	uc := kmsg.NewPtrOffsetCommitRequest()
	uc.Version, uc.Group, uc.Generation = 10, group, -1
	uc.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: unknown, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	if r := c.must(t, uc).(*kmsg.OffsetCommitResponse); len(r.Topics) != 1 || r.Topics[0].TopicID != unknown || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("OffsetCommit v10 of an unknown topic ID: %+v, want UNKNOWN_TOPIC_ID", r.Topics)
	}
	uf := kmsg.NewPtrOffsetFetchRequest()
	uf.Version = 10
	uf.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: unknown, Partitions: []int32{0}}}}}
	if r := c.must(t, uf).(*kmsg.OffsetFetchResponse); len(r.Groups) != 1 || len(r.Groups[0].Topics) != 1 || r.Groups[0].Topics[0].TopicID != unknown ||
		r.Groups[0].Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code || r.Groups[0].Topics[0].Partitions[0].Offset != -1 {
		t.Errorf("OffsetFetch v10 of an unknown topic ID: %+v, want offset -1 and UNKNOWN_TOPIC_ID", r.Groups)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = group
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 1}}}}
	if r := c.must(t, od).(*kmsg.OffsetDeleteResponse); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("OffsetDelete: %+v", r)
	}
	for _, v := range versions(kmsg.DeleteGroups) {
		dg := kmsg.NewPtrDeleteGroupsRequest()
		dg.Version = v
		dg.Groups = []string{fmt.Sprintf("sweep-%s-v%d", topic, v)}
		if r := c.must(t, dg).(*kmsg.DeleteGroupsResponse); len(r.Groups) != 1 || r.Groups[0].ErrorCode != 0 {
			t.Errorf("DeleteGroups v%d: %+v", v, r.Groups)
		}
	}
}
