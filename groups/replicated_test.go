package groups

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vibemq/broker/topics"
)

// memOffsetsLog is an OffsetsLog kept in memory: a log of batches with
// contiguous offsets, as a replicated partition's applied log; failing
// refuses every append as a lost leadership does.
type memOffsetsLog struct {
	mu       sync.Mutex
	batches  [][]byte
	next     int64
	logStart int64 // reads below it fail, as a replicated log's do
	failing  bool
}

func (l *memOffsetsLog) Append(batch []byte) func() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return func() (int64, error) { return -1, fmt.Errorf("%w: leadership lost", ErrNotCoordinator) }
	}
	h, err := topics.ParseBatchHeader(batch)
	if err != nil {
		return func() (int64, error) { return -1, err }
	}
	b := append([]byte(nil), batch...)
	topics.SetBaseOffset(b, l.next)
	base := l.next
	l.next += int64(h.LastOffsetDelta) + 1
	l.batches = append(l.batches, b)
	return func() (int64, error) { return base, nil }
}

func (l *memOffsetsLog) ReadRange(offset int64, _ int, dst []byte) ([]byte, error) {
	l.mu.Lock()
	if offset < l.logStart {
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: %d is below the log start %d", topics.ErrOffsetOutOfRange, offset, l.logStart)
	}
	defer l.mu.Unlock()
	for _, b := range l.batches {
		h, _ := topics.ParseBatchHeader(b)
		if h.BaseOffset+int64(h.LastOffsetDelta) >= offset {
			dst = append(dst, b...)
		}
	}
	return dst, nil
}

func (l *memOffsetsLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func (l *memOffsetsLog) LogStart() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart
}

// replicatedHarness is a harness whose coordinator serves every partition
// of __consumer_offsets from logs (shared between harnesses: a second
// broker loading what the first wrote), with topic t (4 partitions) of
// one ID on both, as cluster topics are.
func replicatedHarness(t *testing.T, logs map[int32]*memOffsetsLog) *harness {
	t.Helper()
	h := newHarness(t, Config{OffsetsTopicPartitions: 4})
	if err := h.tm.ApplyClusterTopic(topics.ClusterTopic{Name: "t", ID: topics.TopicID{7}, Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	h.c.UseReplicatedOffsets()
	for p := range int32(4) {
		if logs[p] == nil {
			logs[p] = &memOffsetsLog{}
		}
		h.c.StartLoad(p, 1, logs[p])
	}
	return h
}

func (h *harness) loadAll() {
	h.t.Helper()
	for p := range int32(4) {
		if _, err := h.c.Load(p, 1, h.now); err != nil {
			h.t.Fatal(err)
		}
	}
}

func offsetOf(t *testing.T, c *Coordinator, group string, partition int32) int64 {
	t.Helper()
	f := c.FetchOffsets(FetchOffsetsRequest{Group: group, Topics: []FetchOffsetsTopic{{Topic: "t", Partitions: []int32{partition}}}})
	if f.Err != nil || len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch offsets of %s: %+v", group, f)
	}
	return f.Topics[0].Partitions[0].Offset
}

// TestReplicatedOffsetsLoad: what a coordinator writes to replicated
// partitions of __consumer_offsets (a classic group's metadata and
// offsets, a simple group's, a KIP-848 group's records, an offset
// deletion, a group deletion) is what another coordinator loading the
// same logs serves; loading answers COORDINATOR_LOAD_IN_PROGRESS first,
// unloading answers the waiting calls NOT_COORDINATOR, and an append
// that is not committed fails the commit without making it visible.
func TestReplicatedOffsetsLoad(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	wantErr(t, "serving while loading", h.c.Serves("g"), ErrCoordinatorLoadInProgress)
	h.loadAll()
	wantErr(t, "serving once loaded", h.c.Serves("g"), nil)

	ids, gen := h.stableGroup("g", 2)
	commit := func(group string, gen int32, member string, p int32, offset int64) error {
		req := CommitRequest{Group: group, Generation: gen, MemberID: member,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: p, Offset: offset, LeaderEpoch: -1}}}}}
		return result(t, h.c.Commit(req, h.now)).Topics[0][0]
	}
	for p, off := range []int64{10, 20, 30} {
		wantErr(t, "commit", commit("g", gen, ids[0], int32(p), off), nil)
	}
	wantErr(t, "commit again", commit("g", gen, ids[0], 0, 11), nil)
	wantErr(t, "simple commit", commit("simple", -1, "", 1, 4), nil)
	wantErr(t, "commit to be deleted", commit("gone", -1, "", 0, 9), nil)
	if errs := result(t, h.c.DeleteGroups([]string{"gone"}, h.now)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	del := result(t, h.c.DeleteOffsets("simple", []OffsetDeleteTopic{{Topic: "t", Partitions: []int32{1}}}, h.now))
	if del.Err != nil {
		t.Fatalf("offset delete: %+v", del)
	}
	cg := h.join("cg", "m1", "t")
	if count(cg.Assignment) != 4 {
		t.Fatalf("consumer group member got %d partitions", count(cg.Assignment))
	}

	// Another coordinator loads the same logs.
	h2 := replicatedHarness(t, logs)
	h2.loadAll()
	for p, want := range []int64{11, 20, 30} {
		if got := offsetOf(t, h2.c, "g", int32(p)); got != want {
			t.Fatalf("loaded offset of g/%d: %d, want %d", p, got, want)
		}
	}
	if got := offsetOf(t, h2.c, "simple", 1); got != -1 {
		t.Fatalf("a deleted offset was loaded: %d", got)
	}
	if g := h2.group("gone"); g != nil {
		t.Fatal("a deleted group was loaded")
	}
	if h2.state("g") != StateStable || h2.generation("g") != gen {
		t.Fatalf("loaded group: %v generation %d, want Stable %d", h2.state("g"), h2.generation("g"), gen)
	}
	for _, id := range ids {
		wantErr(t, "heartbeat on the new coordinator", h2.c.Heartbeat(HeartbeatRequest{Group: "g", Generation: gen, MemberID: id}, h2.now), nil)
	}
	if c := h2.consumerGroup("cg"); c == nil || c.members["m1"] == nil || c.members["m1"].assigned.count() != 4 {
		t.Fatalf("loaded consumer group: %+v", c)
	}

	// Unloading answers a waiting JoinGroup NOT_COORDINATOR and forgets
	// the partition's groups.
	_, join := h2.newMember("g", "meta-new")
	pending(t, join)
	h2.c.UnloadPartition(h2.c.PartitionFor("g"))
	wantErr(t, "waiting join after unloading", result(t, join).Err, ErrNotCoordinator)
	wantErr(t, "serving after unloading", h2.c.Serves("g"), ErrNotCoordinator)
	if h2.group("g") != nil {
		t.Fatal("an unloaded partition's group stayed")
	}

	// A lost leadership: the commit fails and is not visible.
	logs[h.c.PartitionFor("g")].failing = true
	wantErr(t, "commit without leadership", commit("g", gen, ids[0], 0, 99), ErrNotCoordinator)
	if got := offsetOf(t, h.c, "g", 0); got != 11 {
		t.Fatalf("offset after a failed commit: %d, want 11", got)
	}
	if err := h.c.CommitTransaction([]TxnCommit{{Group: "g"}}, nil, nil, h.now); err != ErrTxnOffsetsReplicated {
		t.Fatalf("transactional commit on replicated offsets: %v", err)
	}
}

// TestReplicatedOffsetsLoadFromLogStart: a partition whose log start was
// moved (DeleteRecords, retention) loads from there: the offsets written
// after it are served, the ones below are gone, and the load does not
// fail on the unreadable head of the log.
func TestReplicatedOffsetsLoadFromLogStart(t *testing.T) {
	logs := map[int32]*memOffsetsLog{}
	h := replicatedHarness(t, logs)
	h.loadAll()
	commit := func(group string, p int32, offset int64) {
		t.Helper()
		req := CommitRequest{Group: group, Generation: -1,
			Topics: []CommitTopic{{Topic: "t", Partitions: []CommitPartition{{Partition: p, Offset: offset, LeaderEpoch: -1}}}}}
		wantErr(t, "commit of "+group, result(t, h.c.Commit(req, h.now)).Topics[0][0], nil)
	}
	commit("early", 0, 5)
	log := logs[h.c.PartitionFor("early")]
	log.mu.Lock()
	log.logStart = log.next
	log.mu.Unlock()
	commit("early", 1, 7)

	h2 := replicatedHarness(t, logs)
	h2.loadAll()
	if got := offsetOf(t, h2.c, "early", 1); got != 7 {
		t.Fatalf("offset committed after the log start: %d, want 7", got)
	}
	if got := offsetOf(t, h2.c, "early", 0); got != -1 {
		t.Fatalf("offset committed below the log start: %d, want -1 (gone)", got)
	}
}
