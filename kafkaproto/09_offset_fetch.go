package kafkaproto

// OffsetFetch: v0-v10
//
// Behavior:
//   - Returns committed offsets that are durable. A partition without one,
//     and every partition of a group that does not exist, is offset -1,
//     leader epoch -1, metadata "" and no error (as Kafka answers). A null
//     topic list (v2+) returns every committed offset of the group.
//   - Offsets committed to a topic since deleted are not returned.
//   - require_stable (v7+): a partition whose latest commit is not yet
//     durable gets UNSTABLE_OFFSET_COMMIT, which clients retry.
//
// Version notes:
//   - v0 (ZooKeeper storage in Kafka) reads the same offsets.
//   - v8 batches groups (KIP-709); v0-v7 carry one group and its error at
//     the top level (v2+).
//   - v9's member ID and epoch (KIP-848) are checked against a consumer
//     group when the member ID is set (UNKNOWN_MEMBER_ID,
//     STALE_MEMBER_EPOCH); classic groups do not check them.
//   - v10 (KIP-848 follow-up, Kafka 4.1+) names topics by ID instead of
//     name: a topic ID no topic has is answered after the group's other
//     topics with each partition at offset -1 and UNKNOWN_TOPIC_ID (unless
//     the group itself fails); a null topic list answers every committed
//     topic that still exists with its ID (KafkaApis fetchOffsetsForGroup,
//     fetchAllOffsetsForGroup).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
)

func init() { register(kmsg.OffsetFetch, 0, 10, (*Server).handleOffsetFetch) }

// authorizeFetchedOffsets applies the DESCRIBE check on each topic
// (KafkaApis handleOffsetFetchRequest): a topic the request named is
// answered TOPIC_AUTHORIZATION_FAILED per partition, and one listed because
// the request asked for every topic is left out.
func (r *request) authorizeFetchedOffsets(res *groups.FetchOffsetsResult, named bool) {
	if r.c.s.cfg.Authorizer == nil {
		return
	}
	kept := res.Topics[:0]
	for _, t := range res.Topics {
		if r.allowedTopic(auth.OpDescribe, t.Topic) {
			kept = append(kept, t)
			continue
		}
		if !named {
			continue
		}
		for i := range t.Partitions {
			t.Partitions[i] = groups.FetchedOffset{Partition: t.Partitions[i].Partition, Offset: -1, LeaderEpoch: -1, Err: kerr.TopicAuthorizationFailed}
		}
		kept = append(kept, t)
	}
	res.Topics = kept
}

func (s *Server) handleOffsetFetch(r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)

	asks, unknownIDs := s.offsetFetchAsks(req)
	total := 0
	for _, a := range asks {
		total++
		for _, t := range a.Topics {
			total += len(t.Partitions)
		}
	}
	var fixed int16
	switch {
	case total > s.cfg.MaxPartitionsPerRequest:
		fixed = kerr.PolicyViolation.Code
	case s.cfg.Groups == nil:
		fixed = kerr.CoordinatorNotAvailable.Code
	}

	for i, a := range asks {
		fixed := fixed
		if fixed == 0 && !r.allowedGroup(auth.OpDescribe, a.Group) {
			fixed = kerr.GroupAuthorizationFailed.Code
		}
		if fixed == 0 && s.notGroupCoordinator(a.Group) {
			fixed = s.groupCoordinatorCode(a.Group)
		}
		var res groups.FetchOffsetsResult
		if fixed == 0 {
			res = s.cfg.Groups.FetchOffsets(a)
			r.authorizeFetchedOffsets(&res, a.Topics != nil)
		}
		if req.Version < 8 {
			resp.ErrorCode = fixed
			if fixed == 0 {
				resp.ErrorCode = errorCode(res.Err)
			}
			for _, t := range res.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
					rp.ErrorCode = errorCode(p.Err)
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			if fixed != 0 && req.Version < 2 {
				// No top-level error before v2: fail each partition.
				for _, t := range a.Topics {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						rp.Partition, rp.Offset, rp.ErrorCode = p, -1, fixed
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			continue
		}
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group = a.Group
		rg.ErrorCode = fixed
		if fixed == 0 {
			rg.ErrorCode = errorCode(res.Err)
		}
		for _, t := range res.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			if req.Version >= 10 {
				tp, ok := s.topics.Topic(t.Topic)
				if !ok {
					continue // deleted since: Kafka leaves out topics without an ID
				}
				rt.TopicID = tp.ID
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
				rp.ErrorCode = errorCode(p.Err)
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		if rg.ErrorCode == 0 && unknownIDs != nil {
			rg.Topics = append(rg.Topics, unknownTopicIDOffsets(unknownIDs[i])...)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{resp: resp}, nil
}

// unknownTopicIDOffsets answers the topics of an OffsetFetch v10 group
// whose IDs no topic has: each partition at offset -1 with
// UNKNOWN_TOPIC_ID (KafkaApis fetchOffsetsForGroup).
func unknownTopicIDOffsets(ts []kmsg.OffsetFetchRequestGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(ts))
	for _, t := range ts {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p, -1, kmsg.StringPtr(""), kerr.UnknownTopicID.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// offsetFetchAsks turns the request into one ask per group (v0-v7: the one
// group) with topics by name; at v10 the topic IDs no topic has are set
// aside per group (unknownIDs, nil before v8).
func (s *Server) offsetFetchAsks(req *kmsg.OffsetFetchRequest) (asks []groups.FetchOffsetsRequest, unknownIDs [][]kmsg.OffsetFetchRequestGroupTopic) {
	if req.Version < 8 {
		ask := groups.FetchOffsetsRequest{Group: req.Group, RequireStable: req.RequireStable}
		if req.Topics != nil || req.Version < 2 {
			ask.Topics = make([]groups.FetchOffsetsTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				ask.Topics = append(ask.Topics, groups.FetchOffsetsTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		asks = append(asks, ask)
	} else {
		unknownIDs = make([][]kmsg.OffsetFetchRequestGroupTopic, len(req.Groups))
		for i, g := range req.Groups {
			ask := groups.FetchOffsetsRequest{Group: g.Group, RequireStable: req.RequireStable, MemberID: g.MemberID, MemberEpoch: g.MemberEpoch}
			if g.Topics != nil {
				ask.Topics = make([]groups.FetchOffsetsTopic, 0, len(g.Topics))
				for _, t := range g.Topics {
					name := t.Topic
					if req.Version >= 10 {
						tp, ok := s.topics.TopicByID(t.TopicID)
						if !ok {
							unknownIDs[i] = append(unknownIDs[i], t)
							continue
						}
						name = tp.Name
					}
					ask.Topics = append(ask.Topics, groups.FetchOffsetsTopic{Topic: name, Partitions: t.Partitions})
				}
			}
			asks = append(asks, ask)
		}
	}
	return asks, unknownIDs
}
