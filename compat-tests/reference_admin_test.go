package compattests

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReferenceReplicaAdmin sends the replica and log-directory admin
// requests that a one-node cluster answers without moving anything, to
// our broker and to Apache Kafka, and expects the same error codes:
// ElectLeaders (ELECTION_NOT_NEEDED, nothing for all partitions),
// AlterPartitionAssignments ([this node] accepted; another node, a
// repeated node and an empty list INVALID_REPLICA_ASSIGNMENT; a cancel
// NO_REASSIGNMENT_IN_PROGRESS), ListPartitionReassignments (none),
// DescribeTopicPartitions paging (KIP-966) and DescribeLogDirs.
func TestReferenceReplicaAdmin(t *testing.T) {
	t.Parallel()
	bothBrokers(t, func(t *testing.T, addr string, ref bool) {
		ctx := testCtx(t, opTimeout)
		adm := newAdmin(t, addr)
		topic := topicName(t, "")
		createTopic(t, adm, topic, 3, nil)
		cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		request := func(req kmsg.Request) kmsg.Response {
			t.Helper()
			// Straight to node 1, the only broker and the controller.
			resp, err := cl.Broker(1).Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}

		el := kmsg.NewPtrElectLeadersRequest()
		et := kmsg.NewElectLeadersRequestTopic()
		et.Topic, et.Partitions = topic, []int32{0, 7}
		el.Topics = append(el.Topics, et)
		eresp := request(el).(*kmsg.ElectLeadersResponse)
		codes := map[int32]int16{}
		for _, rt := range eresp.Topics {
			for _, p := range rt.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
		if eresp.ErrorCode != 0 || codes[0] != kerr.ElectionNotNeeded.Code || codes[7] != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("ElectLeaders: top %s, by partition %v; want ELECTION_NOT_NEEDED for 0, UNKNOWN_TOPIC_OR_PARTITION for 7", errName(eresp.ErrorCode), codes)
		}

		for i, replicas := range [][]int32{{1}, {2}, {1, 1}, {}, nil} {
			ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			ap.Partition, ap.Replicas = int32(i%3), replicas
			if i >= 3 {
				ap.Partition = 0
			}
			aresp := request(&kmsg.AlterPartitionAssignmentsRequest{TimeoutMillis: 10000, AllowReplicationFactorChange: true,
				Topics: []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: topic, Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{ap}}}}).(*kmsg.AlterPartitionAssignmentsResponse)
			want := kerr.InvalidReplicaAssignment.Code
			switch i {
			case 0:
				want = 0
			case 4:
				want = kerr.NoReassignmentInProgress.Code
			}
			got := aresp.ErrorCode
			if got == 0 && len(aresp.Topics) == 1 && len(aresp.Topics[0].Partitions) == 1 {
				got = aresp.Topics[0].Partitions[0].ErrorCode
			}
			if got != want {
				t.Errorf("AlterPartitionAssignments replicas %v: %s, want %s", replicas, errName(got), errName(want))
			}
		}

		list := kmsg.NewPtrListPartitionReassignmentsRequest()
		if lresp := request(list).(*kmsg.ListPartitionReassignmentsResponse); lresp.ErrorCode != 0 || len(lresp.Topics) != 0 {
			t.Errorf("ListPartitionReassignments: %s %+v, want none", errName(lresp.ErrorCode), lresp.Topics)
		}

		var seen []int32
		dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
		dt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		dt.Topic = topic
		dtp.Topics = append(dtp.Topics, dt)
		dtp.ResponsePartitionLimit = 2
		for page := 0; page < 4; page++ {
			resp := request(dtp).(*kmsg.DescribeTopicPartitionsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("DescribeTopicPartitions: %+v", resp.Topics)
			}
			for _, p := range resp.Topics[0].Partitions {
				seen = append(seen, p.Partition)
				if p.LeaderID != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
					t.Errorf("DescribeTopicPartitions %d: %+v", p.Partition, p)
				}
			}
			if resp.NextCursor == nil {
				break
			}
			dtp.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		}
		if !slices.Equal(seen, []int32{0, 1, 2}) {
			t.Errorf("DescribeTopicPartitions pages: partitions %v, want [0 1 2]", seen)
		}

		dl := kmsg.NewPtrDescribeLogDirsRequest()
		dlt := kmsg.NewDescribeLogDirsRequestTopic()
		dlt.Topic, dlt.Partitions = topic, []int32{0, 1, 2}
		dl.Topics = append(dl.Topics, dlt)
		dresp := request(dl).(*kmsg.DescribeLogDirsResponse)
		if dresp.ErrorCode != 0 || len(dresp.Dirs) != 1 || dresp.Dirs[0].ErrorCode != 0 || dresp.Dirs[0].TotalBytes <= 0 {
			t.Fatalf("DescribeLogDirs: %+v", dresp)
		}
		sizes := map[int32]int64{}
		for _, dt := range dresp.Dirs[0].Topics {
			if dt.Topic != topic {
				continue
			}
			for _, p := range dt.Partitions {
				sizes[p.Partition] = p.Size
			}
		}
		if len(sizes) != 3 || sizes[1] <= 0 || sizes[0] != 0 {
			t.Errorf("DescribeLogDirs sizes %v: want 3 partitions, only partition 1 non-empty", sizes)
		}
	})
}
