package kafkaproto

// ListGroups: v0-v5
//
// Behavior:
//   - Every group this broker coordinates (all of them on a single node;
//     in a cluster those whose coordinator it is: a partition leader
//     holds share groups it does not coordinate), with its protocol type
//     ("" for a group that only holds offsets).
//   - states_filter (v4+, KIP-518) keeps the groups in one of the states,
//     compared case-insensitively; types_filter (v5+, KIP-848) keeps the
//     groups of one of the types: every group here is "classic".
//
// Version notes:
//   - v4 adds the group state, v5 the group type to each listed group.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.ListGroups, 0, 5, (*Server).handleListGroups) }

func (s *Server) handleListGroups(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{resp: resp}, nil
	}
	// Every group with DESCRIBE on the cluster, else those the principal
	// may DESCRIBE (KafkaApis handleListGroupsRequest).
	all := r.allowedCluster(auth.OpDescribe)
	for _, l := range s.cfg.Groups.ListGroups(req.StatesFilter, req.TypesFilter) {
		if !all && !r.allowedGroup(auth.OpDescribe, l.Group) {
			continue
		}
		// In a cluster a partition leader holds share groups it does not
		// coordinate (their share-partitions): the coordinator lists them.
		if s.notGroupCoordinator(l.Group) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group = l.Group
		g.ProtocolType = l.ProtocolType
		g.GroupState = l.State
		g.GroupType = l.Type
		resp.Groups = append(resp.Groups, g)
	}
	return reply{resp: resp}, nil
}
