package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestPlaceReplicas(t *testing.T) {
	brokers := []int32{1, 2, 3}
	got := PlaceReplicas(brokers, 6, 1, 0)
	if want := "[[1] [2] [3] [1] [2] [3]]"; fmt.Sprint(got) != want {
		t.Fatalf("6 partitions RF 1 from 0: %v, want %s", got, want)
	}
	// start shifts the leaders (successive topics spread); followers are
	// the next brokers in order, never the leader twice.
	got = PlaceReplicas(brokers, 4, 3, 4)
	if want := "[[2 3 1] [3 1 2] [1 2 3] [2 3 1]]"; fmt.Sprint(got) != want {
		t.Fatalf("4 partitions RF 3 from 4: %v, want %s", got, want)
	}
	if got := PlaceReplicas(brokers, 3, 4, 0); got != nil {
		t.Fatalf("RF 4 on 3 brokers: %v, want nil", got)
	}
	if got := PlaceReplicas(nil, 3, 1, 0); got != nil {
		t.Fatalf("no brokers: %v, want nil", got)
	}
	if got := PlaceReplicas(brokers, 2, 1, -1); fmt.Sprint(got) != "[[3] [1]]" {
		t.Fatalf("negative start: %v", got)
	}
}

// applyAll applies records at indexes 1, 2, ... and returns their errors.
func applyAll(m *Metadata, records ...[]byte) []error {
	var errs []error
	for i, r := range records {
		errs = append(errs, m.Apply(Entry{Index: uint64(i + 1), Data: r}))
	}
	return errs
}

// TestMetadataTopicRecords: partition assignments, partitions added,
// configs changed by compare and set, and coordinator placement, each
// with the change it reports to the broker (in log order, the deleted
// topic's ID included), and a snapshot that restores all of it.
func TestMetadataTopicRecords(t *testing.T) {
	m := NewMetadata()
	var changes []TopicChange
	m.OnTopicsChanged(func(c TopicChange) { changes = append(changes, c) })
	id := [16]byte{1}
	errs := applyAll(m,
		RegisterBrokerRecord(Broker{NodeID: 1, KafkaAddr: "a:9092", ClusterID: "first"}),
		RegisterBrokerRecord(Broker{NodeID: 2, KafkaAddr: "b:9092", ClusterID: "second"}),
		CreateTopicRecord(Topic{Name: "t", ID: id, Partitions: 2, ReplicationFactor: 1, Assignments: [][]int32{{1}, {2}}, Configs: map[string]string{"retention.ms": "1"}}),
		CreateTopicRecord(Topic{Name: "bad", ID: id, Partitions: 2, Assignments: [][]int32{{1}}}),
		CreatePartitionsRecord("t", [][]int32{{2}}),
		CreatePartitionsRecord("missing", [][]int32{{2}}),
		CreatePartitionsRecord("t", [][]int32{{2, 2}}),
		AlterConfigsRecord("t", map[string]string{"retention.ms": "1"}, map[string]string{"retention.ms": "2"}),
		AlterConfigsRecord("t", map[string]string{"retention.ms": "1"}, map[string]string{"retention.ms": "3"}),
		PlaceCoordinatorRecord("__consumer_offsets", []int32{1, 2}),
		PlaceCoordinatorRecord("__consumer_offsets", []int32{2, 1}),
	)
	wantErrs := []error{nil, nil, nil, ErrBadRecord, nil, ErrTopicNotFound, ErrBadRecord, nil, ErrConfigsChanged, nil, ErrPlacementExists}
	for i, want := range wantErrs {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("record %d: %v, want %v", i+1, errs[i], want)
		}
	}
	replicas, ok := m.Replicas("t", 2)
	if !ok || !slices.Equal(replicas, []int32{2}) {
		t.Fatalf("partition 2 of t: %v %v", replicas, ok)
	}
	if _, ok := m.Replicas("t", 3); ok {
		t.Fatal("partition 3 of t exists")
	}
	tp, _ := m.Topic("t")
	if tp.Partitions != 3 || tp.Configs["retention.ms"] != "2" {
		t.Fatalf("t: %+v", tp)
	}
	if got := m.CoordinatorLeaders("__consumer_offsets"); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("coordinator leaders %v: the first placement stands", got)
	}
	if m.ClusterID() != "first" {
		t.Fatalf("cluster ID %q, want the first registration's", m.ClusterID())
	}
	// One change per applied topic record, none for the refused ones.
	if len(changes) != 3 || changes[0].Topic.Partitions != 2 || changes[1].Topic.Partitions != 3 || changes[2].Topic.Configs["retention.ms"] != "2" {
		t.Fatalf("changes: %+v", changes)
	}

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if errs := applyAll(m, DeleteTopicRecord("t")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if last := changes[len(changes)-1]; !last.Deleted || last.Topic.ID != id || last.Topic.Name != "t" {
		t.Fatalf("the deletion's change %+v lacks the deleted topic's ID", last)
	}
	r := NewMetadata()
	var restored []TopicChange
	r.OnTopicsChanged(func(c TopicChange) { restored = append(restored, c) })
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if len(restored) != 1 || !restored[0].Restored || len(restored[0].View.Topics) != 1 {
		t.Fatalf("restore reported %+v", restored)
	}
	if got, _ := r.Replicas("t", 2); !slices.Equal(got, []int32{2}) || r.ClusterID() != "first" || !slices.Equal(r.CoordinatorLeaders("__consumer_offsets"), []int32{1, 2}) {
		t.Fatalf("restored: replicas %v, cluster %q, coordinators %v", got, r.ClusterID(), r.CoordinatorLeaders("__consumer_offsets"))
	}
}

// TestMetadataFenceRecords: the leader's fencing records fence and
// unfence registered brokers, survive a snapshot, leave a re-registration
// fenced, and refuse an unregistered broker.
func TestMetadataFenceRecords(t *testing.T) {
	m := NewMetadata()
	errs := applyAll(m,
		RegisterBrokerRecord(Broker{NodeID: 1, KafkaAddr: "a:9092"}),
		RegisterBrokerRecord(Broker{NodeID: 2, KafkaAddr: "b:9092"}),
		FenceBrokerRecord(2, true),
		FenceBrokerRecord(3, true),
		RegisterBrokerRecord(Broker{NodeID: 2, KafkaAddr: "b:9093"}),
	)
	wantErrs := []error{nil, nil, nil, ErrBadRecord, nil}
	for i, want := range wantErrs {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("record %d: %v, want %v", i+1, errs[i], want)
		}
	}
	if m.Fenced(1) || !m.Fenced(2) || m.Fenced(3) {
		t.Fatalf("fenced 1 %v 2 %v 3 %v; want only 2", m.Fenced(1), m.Fenced(2), m.Fenced(3))
	}
	r := snapshotCopy(t, m)
	if !r.Fenced(2) {
		t.Fatal("the snapshot lost broker 2's fencing")
	}
	if errs := applyAll(m, FenceBrokerRecord(2, false)); errs[0] != nil || m.Fenced(2) {
		t.Fatalf("unfencing 2: %v, fenced %v", errs[0], m.Fenced(2))
	}
}

// TestMetadataReplicatedPartitions: a topic with a replication factor
// above 1 gets one Raft group per partition from the state's counter
// (a proposer's groups ignored), added partitions the next ones, RF 1
// topics none; leader records (8) of an older epoch are refused, a
// deletion drops its groups' leaders, and the counter and leaders survive
// a snapshot (group IDs are never reused).
func TestMetadataReplicatedPartitions(t *testing.T) {
	m := NewMetadata()
	a, b := [16]byte{1}, [16]byte{2}
	rf3 := [][]int32{{1, 2, 3}, {2, 3, 1}}
	errs := applyAll(m,
		CreateTopicRecord(Topic{Name: "one", ID: [16]byte{9}, Partitions: 1, ReplicationFactor: 1, Assignments: [][]int32{{1}}}),
		CreateTopicRecord(Topic{Name: "a", ID: a, Partitions: 2, ReplicationFactor: 3, Assignments: rf3, Groups: []uint64{77, 78}}),
		CreatePartitionsRecord("a", [][]int32{{3, 1, 2}}),
		CreateTopicRecord(Topic{Name: "b", ID: b, Partitions: 1, ReplicationFactor: 3, Assignments: rf3[:1]}),
		PartitionLeaderRecord(PartitionLeader{TopicID: a, Partition: 1, Leader: 2, Epoch: 4, ISR: []int32{1, 2, 3}}),
		PartitionLeaderRecord(PartitionLeader{TopicID: a, Partition: 1, Leader: 3, Epoch: 3, ISR: []int32{3}}),
		PartitionLeaderRecord(PartitionLeader{TopicID: a, Partition: 1, Leader: 2, Epoch: 4, ISR: []int32{2, 3}}),
		PartitionLeaderRecord(PartitionLeader{TopicID: b, Partition: 0, Leader: 1, Epoch: 1, ISR: []int32{1}}),
		PartitionLeaderRecord(PartitionLeader{TopicID: [16]byte{9}, Partition: 0, Leader: 1, Epoch: 1}),
		DeleteTopicRecord("b"),
	)
	for i, want := range []error{nil, nil, nil, nil, nil, ErrStaleLeader, nil, nil, ErrTopicNotFound, nil} {
		if !errors.Is(errs[i], want) {
			t.Fatalf("record %d: %v, want %v", i+1, errs[i], want)
		}
	}
	if _, ok := m.PartitionGroup("one", 0); ok {
		t.Fatal("an RF 1 partition has a raft group")
	}
	for p, want := range []uint64{1, 2, 3} {
		if g, ok := m.PartitionGroup("a", int32(p)); !ok || g != want {
			t.Fatalf("a/%d: group %d %v, want %d", p, g, ok, want)
		}
	}
	if l, ok := m.Leader(2); !ok || l.Leader != 2 || l.Epoch != 4 || !slices.Equal(l.ISR, []int32{2, 3}) {
		t.Fatalf("leader of a/1: %+v %v", l, ok)
	}
	if _, ok := m.Leader(4); ok {
		t.Fatal("the deleted topic's leader record stayed")
	}
	if got := m.ReplicatedPartitions(3); len(got) != 3 {
		t.Fatalf("broker 3 is a replica of %d partitions, want 3", len(got))
	}
	r := snapshotCopy(t, m)
	if err := r.Apply(Entry{Index: 20, Data: CreateTopicRecord(Topic{Name: "c", ID: [16]byte{3}, Partitions: 1, ReplicationFactor: 3, Assignments: rf3[:1]})}); err != nil {
		t.Fatal(err)
	}
	if g, _ := r.PartitionGroup("c", 0); g != 5 {
		t.Fatalf("after a snapshot the next group is %d, want 5 (4 was the deleted topic's)", g)
	}
	if l, ok := r.Leader(2); !ok || l.Epoch != 4 {
		t.Fatalf("leader after restore: %+v %v", l, ok)
	}
}

// snapshotCopy is a new Metadata restored from m's snapshot.
func snapshotCopy(t *testing.T, m *Metadata) *Metadata {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := NewMetadata()
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMetadataReplicatedCoordinator: a coordinator topic placed with
// replicas gets Raft groups at apply, leader records name it by name,
// and both survive a snapshot.
func TestMetadataReplicatedCoordinator(t *testing.T) {
	m := NewMetadata()
	errs := applyAll(m,
		CreateTopicRecord(Topic{Name: "a", ID: [16]byte{1}, Partitions: 1, ReplicationFactor: 3, Assignments: [][]int32{{1, 2, 3}}}),
		PlaceReplicatedCoordinatorRecord("__consumer_offsets", [][]int32{{1, 2, 3}, {2, 3, 1}}),
		PlaceReplicatedCoordinatorRecord("__consumer_offsets", [][]int32{{3, 1, 2}}),
		PartitionLeaderRecord(PartitionLeader{Coordinator: "__consumer_offsets", Partition: 1, Leader: 3, Epoch: 2, ISR: []int32{3, 1}}),
		PartitionLeaderRecord(PartitionLeader{Coordinator: "__consumer_offsets", Partition: 2, Leader: 3, Epoch: 2}),
	)
	for i, want := range []error{nil, nil, ErrPlacementExists, nil, ErrTopicNotFound} {
		if !errors.Is(errs[i], want) {
			t.Fatalf("record %d: %v, want %v", i+1, errs[i], want)
		}
	}
	if got := m.CoordinatorLeaders("__consumer_offsets"); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("preferred leaders %v", got)
	}
	r := snapshotCopy(t, m)
	for _, md := range []*Metadata{m, r} {
		if g, ok := md.CoordinatorGroup("__consumer_offsets", 1); !ok || g != 3 {
			t.Fatalf("group of partition 1: %d %v, want 3", g, ok)
		}
		if l, ok := md.Leader(3); !ok || l.Leader != 3 || l.Epoch != 2 {
			t.Fatalf("leader of partition 1: %+v %v", l, ok)
		}
		if rs, _ := md.CoordinatorReplicas("__consumer_offsets", 0); !slices.Equal(rs, []int32{1, 2, 3}) {
			t.Fatalf("replicas of partition 0: %v", rs)
		}
		var coordinator int
		for _, rp := range md.ReplicatedPartitions(2) {
			if rp.Coordinator && rp.Topic == "__consumer_offsets" {
				coordinator++
			}
		}
		if coordinator != 2 {
			t.Fatalf("broker 2 is a replica of %d coordinator partitions, want 2", coordinator)
		}
	}
}

// TestMetadataGroupConfigs: record 9 sets a group's configs compare and
// set (a change computed from stale configs is refused and changes
// nothing), empty configs remove them, each applied record is reported,
// and they survive a snapshot; a snapshot without them (written before
// record 9) restores none.
func TestMetadataGroupConfigs(t *testing.T) {
	m := NewMetadata()
	var changes []GroupConfigsChange
	m.OnGroupConfigsChanged(func(c GroupConfigsChange) { changes = append(changes, c) })
	set := map[string]string{"share.auto.offset.reset": "earliest"}
	errs := applyAll(m,
		AlterGroupConfigsRecord("g", nil, set),
		AlterGroupConfigsRecord("g", nil, map[string]string{"share.auto.offset.reset": "latest"}),
		AlterGroupConfigsRecord("h", nil, map[string]string{"share.isolation.level": "read_committed"}),
		AlterGroupConfigsRecord("h", map[string]string{"share.isolation.level": "read_committed"}, nil),
		AlterGroupConfigsRecord("", nil, set),
		append([]byte{recordAlterGroupConfigs}, "{"...),
	)
	wantErrs := []error{nil, ErrConfigsChanged, nil, nil, ErrBadRecord, ErrBadRecord}
	for i, want := range wantErrs {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("record %d: %v, want %v", i+1, errs[i], want)
		}
	}
	if got := m.GroupConfigs("g"); len(got) != 1 || got["share.auto.offset.reset"] != "earliest" {
		t.Fatalf("configs of g %v: the refused change must not apply", got)
	}
	if got := m.GroupConfigs("h"); len(got) != 0 {
		t.Fatalf("configs of h %v, want none after the change to empty", got)
	}
	if len(changes) != 3 || changes[0].Group != "g" || changes[1].Group != "h" || changes[2].Group != "h" || len(changes[2].Configs) != 0 {
		t.Fatalf("changes: %+v", changes)
	}
	r := NewMetadata()
	var restored []GroupConfigsChange
	r.OnGroupConfigsChanged(func(c GroupConfigsChange) { restored = append(restored, c) })
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if len(restored) != 1 || !restored[0].Restored || len(restored[0].All) != 1 || restored[0].All["g"]["share.auto.offset.reset"] != "earliest" {
		t.Fatalf("restore reported %+v", restored)
	}
	// The restored copy goes on with compare and set from its configs.
	if err := r.Apply(Entry{Index: 10, Data: AlterGroupConfigsRecord("g", set, map[string]string{"share.auto.offset.reset": "latest"})}); err != nil {
		t.Fatal(err)
	}
	if got := r.GroupConfigs("g")["share.auto.offset.reset"]; got != "latest" {
		t.Fatalf("after the change on the restored copy: %q", got)
	}
	old := NewMetadata()
	if err := old.Restore([]byte(`{"applied":3,"brokers":{},"topics":{}}`)); err != nil || len(old.GroupConfigs("g")) != 0 {
		t.Fatalf("a snapshot from before record 9: %v %v", err, old.GroupConfigs("g"))
	}
}
