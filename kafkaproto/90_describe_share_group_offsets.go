package kafkaproto

// DescribeShareGroupOffsets: v0-v1
//
// Behavior:
//   - For each share group (KIP-932), the share-partition start offset of
//     every partition it has read, or of the named topics and partitions:
//     the first offset not yet acknowledged or archived.
//   - Absence of state is no error, as Apache Kafka 4.2 answers it
//     (GroupCoordinatorService.describeShareGroupOffsets reads the share
//     coordinator's state without looking at the group; checked by
//     compat-tests TestShareGroupOffsetsDescribe against it): a partition
//     the group has not read, an unknown partition and an unknown topic
//     (topic ID zero) have start offset -1, leader epoch 0 and lag -1 with
//     error NONE; a group that does not exist or is a classic or consumer
//     group is answered so too, with no group error: -1 for each named
//     partition, no topics when all are asked for.
//   - Lag (v1, KIP-1226): the offsets from the start offset to the high
//     watermark that are not yet acknowledged or archived.
//   - DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
//     (its partitions TOPIC_AUTHORIZATION_FAILED when named, left out when
//     all are asked for), as KafkaApis.
//   - Leader epoch 0 (one replica, as Metadata answers).
//
// Version notes:
//   - v1 adds Lag.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() {
	register(kmsg.DescribeShareGroupOffsets, 0, 1, (*Server).handleDescribeShareGroupOffsets)
}

func (s *Server) handleDescribeShareGroupOffsets(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if s.cfg.Groups == nil {
			g.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if !r.allowedGroup(auth.OpDescribe, rg.GroupID) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if s.notGroupCoordinator(rg.GroupID) {
			g.ErrorCode = s.groupCoordinatorCode(rg.GroupID)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		// Not a share group (missing, classic or consumer): no state, so
		// the view without partitions answers it.
		v, _ := s.cfg.Groups.DescribeShareGroup(rg.GroupID)
		if rg.Topics == nil {
			g.Topics = s.shareOffsetsAll(v)
		} else {
			g.Topics = s.shareOffsetsNamed(v, rg.Topics)
		}
		// DESCRIBE on each topic: the partitions of others are left out
		// when all were asked for, refused when named.
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if !r.allowedTopic(auth.OpDescribe, t.Topic) {
				if rg.Topics == nil {
					continue
				}
				for i := range t.Partitions {
					t.Partitions[i].StartOffset, t.Partitions[i].Lag = -1, -1
					t.Partitions[i].ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
			}
			kept = append(kept, t)
		}
		g.Topics = kept
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}, nil
}

func shareOffsetPartition(index int32, pv *groups.SharePartitionView) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
	p := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	p.Partition, p.StartOffset, p.Lag = index, -1, -1
	if pv != nil {
		p.StartOffset, p.Lag = pv.StartOffset, pv.Lag
	}
	return p
}

// shareOffsetsAll lists every partition the group has read.
func (s *Server) shareOffsetsAll(v groups.ShareGroupView) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for i := range v.Partitions {
		pv := &v.Partitions[i]
		if n := len(out); n == 0 || out[n-1].Topic != pv.Topic {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic, t.TopicID = pv.Topic, pv.TopicID
			out = append(out, t)
		}
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, shareOffsetPartition(pv.Partition, pv))
	}
	return out
}

// shareOffsetsNamed answers the named topics and partitions; one without
// state, known or not, has start offset -1 and no error (as Kafka).
func (s *Server) shareOffsetsNamed(v groups.ShareGroupView, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	type key struct {
		topic     string
		partition int32
	}
	have := map[key]*groups.SharePartitionView{}
	for i := range v.Partitions {
		have[key{v.Partitions[i].Topic, v.Partitions[i].Partition}] = &v.Partitions[i]
	}
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, rt := range topics {
		t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		t.Topic = rt.Topic
		if lt, exists := s.topics.Topic(rt.Topic); exists {
			t.TopicID = lt.ID
		}
		for _, p := range rt.Partitions {
			t.Partitions = append(t.Partitions, shareOffsetPartition(p, have[key{rt.Topic, p}]))
		}
		out = append(out, t)
	}
	return out
}
