package compattests

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestVersionSweep sends one request at every advertised version of the
// APIs the broker serves and checks that the response decodes at that
// version and says the same thing at each: a per-version encoding slip
// (a field gated on the wrong version, a flexible header where none
// belongs) breaks exactly the clients that pin that version.
func TestVersionSweep(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t, "")
	createTopic(t, adm, topic, 2, nil)
	vs := apiVersions(t, b.Addr())
	c := dialRaw(t, b.Addr())
	host, portStr, _ := splitHostPort(b.Addr())
	port, _ := strconv.Atoi(portStr)
	versions := func(key kmsg.Key, floor int16) []int16 {
		r, ok := vs[int16(key)]
		if !ok {
			return nil
		}
		var out []int16
		for v := max(r[0], floor); v <= r[1]; v++ {
			out = append(out, v)
		}
		return out
	}

	// Metadata: topic ID, for later versions of other APIs.
	var topicID [16]byte
	leaderEpoch := int32(0)
	t.Run("Metadata", func(t *testing.T) {
		for _, v := range versions(kmsg.Metadata, 0) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.MetadataResponse)
			if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host || resp.Brokers[0].Port != int32(port) {
				t.Errorf("Metadata v%d: brokers %+v, want node 1 at %s", v, resp.Brokers, b.Addr())
			}
			if v >= 1 && resp.ControllerID != 1 {
				t.Errorf("Metadata v%d: controller %d, want 1", v, resp.ControllerID)
			}
			if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
				t.Errorf("Metadata v%d: no cluster ID", v)
			}
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
				t.Errorf("Metadata v%d: topics %+v", v, resp.Topics)
				continue
			}
			for _, p := range resp.Topics[0].Partitions {
				if v >= 7 && p.Partition == 0 {
					leaderEpoch = p.LeaderEpoch
				}
				if p.Leader != 1 || p.ErrorCode != 0 {
					t.Errorf("Metadata v%d: partition %d leader %d err %s", v, p.Partition, p.Leader, errName(p.ErrorCode))
				}
			}
			if v >= 10 {
				if resp.Topics[0].TopicID == ([16]byte{}) {
					t.Errorf("Metadata v%d: zero topic ID", v)
				} else if topicID == ([16]byte{}) {
					topicID = resp.Topics[0].TopicID
				} else if topicID != resp.Topics[0].TopicID {
					t.Errorf("Metadata v%d: topic ID changed", v)
				}
			}
		}
		// "All topics": v0 says so with an empty list, v1+ with null; an
		// empty list at v1+ asks for no topics.
		for _, v := range versions(kmsg.Metadata, 0) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			if v == 0 {
				req.Topics = []kmsg.MetadataRequestTopic{}
			} else {
				req.Topics = nil
			}
			resp := c.roundTrip(req).(*kmsg.MetadataResponse)
			if !slices.ContainsFunc(resp.Topics, func(mt kmsg.MetadataResponseTopic) bool { return deref(mt.Topic) == topic }) {
				t.Errorf("Metadata v%d all topics: %s missing (%d topics)", v, topic, len(resp.Topics))
			}
			if v >= 1 {
				req.Topics = []kmsg.MetadataRequestTopic{}
				resp = c.roundTrip(req).(*kmsg.MetadataResponse)
				if len(resp.Topics) != 0 {
					t.Errorf("Metadata v%d with an empty topic list: %d topics, want none", v, len(resp.Topics))
				}
			}
		}
	})

	ts := time.Now().Add(-time.Minute).UnixMilli()
	produced := int64(0)
	t.Run("Produce", func(t *testing.T) {
		for _, v := range versions(kmsg.Produce, 3) {
			p := c.produceRaw(v, topic, 0, rawBatch(-1, -1, -1, ts, valueRecords(fmt.Sprintf("produce-v%d", v))))
			if p.ErrorCode != 0 || p.BaseOffset != produced {
				t.Errorf("Produce v%d: %s at %d, want NONE at %d", v, errName(p.ErrorCode), p.BaseOffset, produced)
			}
			if v >= 2 && p.LogAppendTime != -1 {
				t.Errorf("Produce v%d: LogAppendTime %d on a CreateTime topic, want -1", v, p.LogAppendTime)
			}
			if v >= 5 && p.LogStartOffset != 0 {
				t.Errorf("Produce v%d: LogStartOffset %d, want 0", v, p.LogStartOffset)
			}
			if p.ErrorCode == 0 {
				produced = p.BaseOffset + 1
			}
		}
	})

	t.Run("Fetch", func(t *testing.T) {
		for _, v := range versions(kmsg.Fetch, 4) { // v0-v3: message sets, TestSaramaLegacyVersions
			req := kmsg.NewPtrFetchRequest()
			req.Version = v
			req.ReplicaID = -1
			req.MaxWaitMillis = 100
			req.MinBytes = 1
			req.MaxBytes = 1 << 20
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rt.TopicID = topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset = 0
			rp.PartitionMaxBytes = 1 << 20
			rp.CurrentLeaderEpoch = -1
			rp.LastFetchedEpoch = -1
			rp.LogStartOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.FetchResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Errorf("Fetch v%d: error %s, topics %d", v, errName(resp.ErrorCode), len(resp.Topics))
				continue
			}
			if v >= 13 && resp.Topics[0].TopicID != topicID {
				t.Errorf("Fetch v%d: response topic ID %x, want %x", v, resp.Topics[0].TopicID, topicID)
			}
			if v < 13 && resp.Topics[0].Topic != topic {
				t.Errorf("Fetch v%d: response topic %q, want %q", v, resp.Topics[0].Topic, topic)
			}
			p := resp.Topics[0].Partitions[0]
			n := int64(0)
			for _, bt := range parseBatches(t, p.RecordBatches) {
				n += int64(bt.NumRecords)
			}
			if p.ErrorCode != 0 || p.HighWatermark != produced || n != produced {
				t.Errorf("Fetch v%d: %s hwm %d, %d records; want NONE, hwm %d, %d records", v, errName(p.ErrorCode), p.HighWatermark, n, produced, produced)
			}
			if v >= 4 && p.LastStableOffset != produced {
				t.Errorf("Fetch v%d: last stable offset %d, want %d", v, p.LastStableOffset, produced)
			}
		}
	})

	t.Run("ListOffsets", func(t *testing.T) {
		for _, v := range versions(kmsg.ListOffsets, 1) {
			for _, cse := range []struct{ ts, want int64 }{{-2, 0}, {-1, produced}, {ts, 0}} {
				req := kmsg.NewPtrListOffsetsRequest()
				req.Version = v
				req.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = cse.ts
				rp.CurrentLeaderEpoch = -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
				if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
					t.Errorf("ListOffsets v%d: malformed response", v)
					continue
				}
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.Offset != cse.want {
					t.Errorf("ListOffsets v%d ts %d: %s offset %d, want %d", v, cse.ts, errName(p.ErrorCode), p.Offset, cse.want)
				}
			}
		}
	})

	t.Run("InitProducerID", func(t *testing.T) {
		seen := map[int64]bool{}
		for _, v := range versions(kmsg.InitProducerID, 0) {
			pid, _ := c.initProducerID(v)
			if seen[pid] {
				t.Errorf("InitProducerID v%d: producer id %d handed out twice", v, pid)
			}
			seen[pid] = true
		}
	})

	t.Run("DescribeConfigs", func(t *testing.T) {
		for _, v := range versions(kmsg.DescribeConfigs, 0) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version = v
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType = kmsg.ConfigResourceTypeTopic
			rr.ResourceName = topic
			req.Resources = append(req.Resources, rr)
			resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
			if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
				t.Errorf("DescribeConfigs v%d: %+v", v, resp.Resources)
				continue
			}
			if !slices.ContainsFunc(resp.Resources[0].Configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
				return c.Name == "retention.ms" && deref(c.Value) == "604800000"
			}) {
				t.Errorf("DescribeConfigs v%d: retention.ms default 604800000 not reported", v)
			}
		}
		// The broker resource answers too (node id as the name).
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = vs[int16(kmsg.DescribeConfigs)][1]
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType = kmsg.ConfigResourceTypeBroker
		rr.ResourceName = "1"
		req.Resources = append(req.Resources, rr)
		resp := c.roundTrip(req).(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) == 0 {
			t.Errorf("DescribeConfigs of broker 1: %+v", resp.Resources)
		}
	})

	t.Run("CreateDeleteTopics", func(t *testing.T) {
		for _, v := range versions(kmsg.CreateTopics, 0) {
			name := fmt.Sprintf("%s.create-v%d", topic, v)
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = v
			req.TimeoutMillis = 30000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = name
			rt.NumPartitions = 1
			rt.ReplicationFactor = 1
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic != name {
				t.Errorf("CreateTopics v%d: %+v", v, resp.Topics)
			}
			if v >= 7 && resp.Topics[0].TopicID == ([16]byte{}) {
				t.Errorf("CreateTopics v%d: zero topic ID", v)
			}
		}
		for _, v := range versions(kmsg.DeleteTopics, 0) {
			name := fmt.Sprintf("%s.delete-v%d", topic, v)
			createTopic(t, adm, name, 1, nil)
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version = v
			req.TimeoutMillis = 30000
			req.TopicNames = []string{name} // v0-v5
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name) // v6+
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || deref(resp.Topics[0].Topic) != name {
				t.Errorf("DeleteTopics v%d of %s: %+v", v, name, resp.Topics)
			}
		}
		var names []string
		for _, v := range versions(kmsg.CreateTopics, 0) {
			names = append(names, fmt.Sprintf("%s.create-v%d", topic, v))
		}
		for _, v := range versions(kmsg.DeleteTopics, 6) {
			// v6 deletes by topic ID as well.
			name := fmt.Sprintf("%s.delete-by-id-v%d", topic, v)
			id := createTopic(t, adm, name, 1, nil).ID
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version = v
			req.TimeoutMillis = 30000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.TopicID = id
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
				t.Errorf("DeleteTopics v%d by topic ID: %+v", v, resp.Topics)
			}
			names = append(names, name)
		}
		waitTopicGone(t, b.Addr(), names[len(names)-1])
		if _, err := adm.DeleteTopics(testCtx(t, opTimeout), names[:len(names)-1]...); err != nil {
			t.Errorf("cleanup DeleteTopics: %v", err)
		}
	})

	t.Run("DescribeCluster", func(t *testing.T) {
		for _, v := range versions(kmsg.DescribeCluster, 0) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version = v
			resp := c.roundTrip(req).(*kmsg.DescribeClusterResponse)
			if resp.ErrorCode != 0 || resp.ClusterID == "" || resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 {
				t.Errorf("DescribeCluster v%d: err %s cluster %q controller %d brokers %+v", v, errName(resp.ErrorCode), resp.ClusterID, resp.ControllerID, resp.Brokers)
			}
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		for _, v := range versions(kmsg.OffsetForLeaderEpoch, 2) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version = v
			req.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition = 0
			rp.CurrentLeaderEpoch = -1
			rp.LeaderEpoch = leaderEpoch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Errorf("OffsetForLeaderEpoch v%d: malformed %+v", v, resp.Topics)
				continue
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.EndOffset != produced {
				t.Errorf("OffsetForLeaderEpoch v%d epoch %d: %s end offset %d (epoch %d); want NONE, %d", v, leaderEpoch, errName(p.ErrorCode), p.EndOffset, p.LeaderEpoch, produced)
			}
		}
	})

	t.Run("ListOffsetsV0", func(t *testing.T) {
		for _, v := range versions(kmsg.ListOffsets, 0) {
			if v != 0 {
				continue
			}
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = 0
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp, rp.MaxNumOffsets = -1, 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				t.Fatalf("ListOffsets v0: malformed %+v", resp.Topics)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || !slices.Equal(p.OldStyleOffsets, []int64{produced}) {
				t.Errorf("ListOffsets v0 latest: %s %v, want [%d]", errName(p.ErrorCode), p.OldStyleOffsets, produced)
			}
		}
	})

	t.Run("DescribeLogDirs", func(t *testing.T) {
		for _, v := range versions(kmsg.DescribeLogDirs, 0) {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = v
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0, 1}
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
			if len(resp.Dirs) != 1 || resp.Dirs[0].ErrorCode != 0 || resp.Dirs[0].Dir == "" ||
				len(resp.Dirs[0].Topics) != 1 || len(resp.Dirs[0].Topics[0].Partitions) != 2 {
				t.Errorf("DescribeLogDirs v%d: %+v", v, resp.Dirs)
				continue
			}
			if v >= 4 && resp.Dirs[0].TotalBytes <= 0 {
				t.Errorf("DescribeLogDirs v%d: total bytes %d", v, resp.Dirs[0].TotalBytes)
			}
		}
	})

	t.Run("DescribeTopicPartitions", func(t *testing.T) {
		for _, v := range versions(kmsg.DescribeTopicPartitions, 0) {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.Version = v
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			req.ResponsePartitionLimit = 1
			resp := c.roundTrip(req).(*kmsg.DescribeTopicPartitionsResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 ||
				resp.NextCursor == nil || resp.NextCursor.Topic != topic || resp.NextCursor.Partition != 1 {
				t.Errorf("DescribeTopicPartitions v%d: %+v cursor %+v", v, resp.Topics, resp.NextCursor)
			}
		}
	})

	t.Run("ElectLeaders", func(t *testing.T) {
		for _, v := range versions(kmsg.ElectLeaders, 0) {
			req := kmsg.NewPtrElectLeadersRequest()
			req.Version = v
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0}
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.ElectLeadersResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.ElectionNotNeeded.Code {
				t.Errorf("ElectLeaders v%d: %+v", v, resp.Topics)
			}
		}
	})

	t.Run("PartitionReassignments", func(t *testing.T) {
		for _, v := range versions(kmsg.AlterPartitionAssignments, 0) {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			req.Version = v
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Replicas = []int32{1}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := c.roundTrip(req).(*kmsg.AlterPartitionAssignmentsResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Errorf("AlterPartitionAssignments v%d: %+v", v, resp)
			}
		}
		for _, v := range versions(kmsg.ListPartitionReassignments, 0) {
			req := kmsg.NewPtrListPartitionReassignmentsRequest()
			req.Version = v
			resp := c.roundTrip(req).(*kmsg.ListPartitionReassignmentsResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
				t.Errorf("ListPartitionReassignments v%d: %+v", v, resp)
			}
		}
	})
}

func splitHostPort(addr string) (string, string, error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return addr, "", fmt.Errorf("no port in %q", addr)
}
