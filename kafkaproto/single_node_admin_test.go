package kafkaproto

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// produceN writes n one-record batches to topic/partition 0.
func produceN(t *testing.T, addr string, topic string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// pinnedClient is a client that sends key at version v at most.
func pinnedClient(t *testing.T, addr string, key kmsg.Key, v int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(int16(key), v)
	return newClient(t, addr, kgo.MaxVersions(vs))
}

func roundTrip[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Broker(1).Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

// TestDescribeLogDirs: the data directory is the one log directory, with
// every partition's stored bytes and the filesystem's size (v4).
func TestDescribeLogDirs(t *testing.T) {
	s, addr := startTestServer(t)
	cl := newClient(t, addr)
	if _, err := s.topics.CreateTopic("dirs", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, addr, "dirs", 3)
	p0, _ := s.topics.Topic("dirs")
	part, _ := p0.Partition(0)
	want := part.Stats().Bytes
	if want == 0 {
		t.Fatal("partition 0 holds no bytes after producing")
	}
	for _, v := range []int16{1, 4} {
		cl := pinnedClient(t, addr, kmsg.DescribeLogDirs, v)
		req := kmsg.NewPtrDescribeLogDirsRequest()
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic, rt.Partitions = "dirs", []int32{0, 1, 7}
		req.Topics = append(req.Topics, rt)
		unknown := kmsg.NewDescribeLogDirsRequestTopic()
		unknown.Topic, unknown.Partitions = "nope", []int32{0}
		req.Topics = append(req.Topics, unknown)
		resp := roundTrip[*kmsg.DescribeLogDirsResponse](t, cl, req)
		if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != s.topics.LogDir().Path || resp.Dirs[0].ErrorCode != 0 {
			t.Fatalf("v%d dirs: %+v", v, resp.Dirs)
		}
		d := resp.Dirs[0]
		if resp.Version != v {
			t.Fatalf("answered at v%d, want v%d", resp.Version, v)
		}
		if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes) {
			t.Errorf("v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
		}
		if len(d.Topics) != 1 || d.Topics[0].Topic != "dirs" || len(d.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d topics: %+v (want dirs with partitions 0 and 1 only)", v, d.Topics)
		}
		if got := d.Topics[0].Partitions[0]; got.Partition != 0 || got.Size != want {
			t.Errorf("v%d partition 0: %+v, want size %d", v, got, want)
		}
	}
	// A null topic list describes every partition, internal topics too.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 4
	resp := roundTrip[*kmsg.DescribeLogDirsResponse](t, cl, req)
	var names []string
	for _, dt := range resp.Dirs[0].Topics {
		names = append(names, dt.Topic)
	}
	if !slices.Contains(names, "dirs") {
		t.Errorf("all topics: %v lacks dirs", names)
	}
}

// TestDescribeTopicPartitions pages through topics with a partition limit
// and a cursor as KIP-966 describes.
func TestDescribeTopicPartitions(t *testing.T) {
	s, addr := startTestServer(t)
	cl := newClient(t, addr)
	for _, name := range []string{"dtp-a", "dtp-b"} {
		if _, err := s.topics.CreateTopic(name, 3, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	type key struct {
		topic string
		part  int32
	}
	var seen []key
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range []string{"dtp-b", "dtp-a", "dtp-missing"} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	req.ResponsePartitionLimit = 2
	pages := 0
	for {
		pages++
		if pages > 5 {
			t.Fatal("pagination did not end")
		}
		resp := roundTrip[*kmsg.DescribeTopicPartitionsResponse](t, cl, req)
		for _, rt := range resp.Topics {
			if *rt.Topic == "dtp-missing" {
				if rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Errorf("missing topic: %s", kerr.ErrorForCode(rt.ErrorCode))
				}
				continue
			}
			tp, _ := s.topics.Topic(*rt.Topic)
			if rt.ErrorCode != 0 || rt.TopicID != tp.ID || rt.AuthorizedOperations != topicOperationsAll {
				t.Errorf("topic %s: %+v", *rt.Topic, rt)
			}
			for _, p := range rt.Partitions {
				if p.LeaderID != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
					t.Errorf("%s/%d: %+v", *rt.Topic, p.Partition, p)
				}
				seen = append(seen, key{*rt.Topic, p.Partition})
			}
		}
		if resp.NextCursor == nil {
			break
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := []key{{"dtp-a", 0}, {"dtp-a", 1}, {"dtp-a", 2}, {"dtp-b", 0}, {"dtp-b", 1}, {"dtp-b", 2}}
	if !slices.Equal(seen, want) || pages != 3 {
		t.Errorf("pages %d, partitions %v; want 3 pages of %v", pages, seen, want)
	}

	// A cursor naming a topic the request does not list is INVALID_REQUEST.
	bad := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = "dtp-a"
	bad.Topics = append(bad.Topics, rt)
	bad.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "dtp-b"}
	resp := roundTrip[*kmsg.DescribeTopicPartitionsResponse](t, cl, bad)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("cursor outside the list: %+v", resp.Topics)
	}
}

// TestElectLeadersAndReassignments: on one node no election is ever
// needed and the only assignment is [this node].
func TestElectLeadersAndReassignments(t *testing.T) {
	s, addr := startTestServer(t)
	cl := newClient(t, addr)
	if _, err := s.topics.CreateTopic("el", 2, nil, false); err != nil {
		t.Fatal(err)
	}
	el := kmsg.NewPtrElectLeadersRequest()
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "el", []int32{0, 5}
	el.Topics = append(el.Topics, rt)
	eresp := roundTrip[*kmsg.ElectLeadersResponse](t, cl, el)
	if ps := eresp.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != kerr.ElectionNotNeeded.Code || ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("elect: %+v", ps)
	}
	el.Topics = nil
	if eresp := roundTrip[*kmsg.ElectLeadersResponse](t, cl, el); len(eresp.Topics) != 0 || eresp.ErrorCode != 0 {
		t.Errorf("elect all: %+v", eresp)
	}

	alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	for i, replicas := range [][]int32{{1}, {2}, {1, 1}, {}, nil} {
		ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		ap.Partition, ap.Replicas = 0, replicas
		if i == 0 {
			ap.Partition = 1
		}
		at.Partitions = append(at.Partitions, ap)
	}
	at.Topic = "el"
	alter.Topics = append(alter.Topics, at)
	aresp := roundTrip[*kmsg.AlterPartitionAssignmentsResponse](t, cl, alter)
	var codes []int16
	for _, p := range aresp.Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	wantCodes := []int16{0, kerr.InvalidReplicaAssignment.Code, kerr.InvalidReplicaAssignment.Code, kerr.InvalidReplicaAssignment.Code, kerr.NoReassignmentInProgress.Code}
	if !slices.Equal(codes, wantCodes) {
		t.Errorf("alter codes %v, want %v", codes, wantCodes)
	}

	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	if lresp := roundTrip[*kmsg.ListPartitionReassignmentsResponse](t, cl, list); lresp.ErrorCode != 0 || len(lresp.Topics) != 0 {
		t.Errorf("list: %+v", lresp)
	}
}

// TestListOffsetsV0 answers the old-style offset arrays that Burrow 1.2.1
// still asks for (it used to close the connection: v0 was not served).
func TestListOffsetsV0(t *testing.T) {
	s, addr := startTestServer(t)
	if _, err := s.topics.CreateTopic("lo0", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, addr, "lo0", 4)
	cl0 := pinnedClient(t, addr, kmsg.ListOffsets, 0)
	ask := func(ts int64, maxNum int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 0
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo0"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = ts, maxNum
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := roundTrip[*kmsg.ListOffsetsResponse](t, cl0, req)
		if resp.Version != 0 {
			t.Fatalf("answered at v%d, want v0", resp.Version)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, c := range []struct {
		ts     int64
		maxNum int32
		want   []int64
	}{
		{-1, 1, []int64{4}},
		{-1, 10, []int64{4, 0}},
		{-2, 10, []int64{0}},
		{-1, 0, nil},
		{1 << 50, 5, []int64{4}}, // later than every record: the high watermark
		{0, 5, []int64{0}},
	} {
		got := ask(c.ts, c.maxNum)
		if got.ErrorCode != 0 || !slices.Equal(got.OldStyleOffsets, c.want) {
			t.Errorf("ts %d max %d: %s %v, want %v", c.ts, c.maxNum, kerr.ErrorForCode(got.ErrorCode), got.OldStyleOffsets, c.want)
		}
	}
}

// TestAuthorizedOperationsWithoutAuthorizer: asked for them, Metadata and
// DescribeCluster report every operation, as Kafka does with no
// authorizer; they answered "not provided" and UIs showed nothing allowed.
func TestAuthorizedOperationsWithoutAuthorizer(t *testing.T) {
	s, addr := startTestServer(t)
	cl := newClient(t, addr)
	if _, err := s.topics.CreateTopic("authz", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("authz")
	md.Topics = append(md.Topics, rt)
	md.IncludeTopicAuthorizedOperations = true
	mresp := roundTrip[*kmsg.MetadataResponse](t, cl, md)
	if len(mresp.Topics) != 1 || mresp.Topics[0].AuthorizedOperations != topicOperationsAll {
		t.Errorf("topic authorized operations: %+v", mresp.Topics)
	}
	md.IncludeTopicAuthorizedOperations = false
	if mresp := roundTrip[*kmsg.MetadataResponse](t, cl, md); mresp.Topics[0].AuthorizedOperations != -2147483648 {
		t.Errorf("not asked for: %d, want INT32_MIN", mresp.Topics[0].AuthorizedOperations)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if dresp := roundTrip[*kmsg.DescribeClusterResponse](t, cl, dc); dresp.ClusterAuthorizedOperations != clusterOperationsAll {
		t.Errorf("cluster authorized operations: %d", dresp.ClusterAuthorizedOperations)
	}
}

// Every operation of a topic and of the cluster (KIP-430 bit sets), what
// the authorized-operations fields answer without an authorizer.
const (
	topicOperationsAll   = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	clusterOperationsAll = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)
