package kafkaproto

// DeleteGroups: v0-v2
//
// Behavior:
//   - Deletes Empty groups: tombstones for their offsets and metadata are
//     appended to __consumer_offsets and the answer waits until they are
//     durable. A group with members: NON_EMPTY_GROUP; an unknown one:
//     GROUP_ID_NOT_FOUND.
//
// Version notes:
//   - v2 is the first flexible version. v3 (error messages) is not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.DeleteGroups, 0, 2, (*Server).handleDeleteGroups) }

func (s *Server) handleDeleteGroups(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		resp.Groups = append(resp.Groups, g)
	}
	if len(req.Groups) > s.cfg.MaxPartitionsPerRequest || s.cfg.Groups == nil {
		code := kerr.CoordinatorNotAvailable.Code
		if s.cfg.Groups != nil {
			code = kerr.PolicyViolation.Code
		}
		for i := range resp.Groups {
			resp.Groups[i].ErrorCode = code
		}
		return reply{resp: resp}, nil
	}
	// Groups the principal may not DELETE are answered
	// GROUP_AUTHORIZATION_FAILED and left alone (KafkaApis).
	var names []string
	var idx []int
	for i, name := range req.Groups {
		if !r.allowedGroup(auth.OpDelete, name) {
			resp.Groups[i].ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if s.notGroupCoordinator(name) {
			resp.Groups[i].ErrorCode = s.groupCoordinatorCode(name)
			continue
		}
		names = append(names, name)
		idx = append(idx, i)
	}
	fut := s.cfg.Groups.DeleteGroups(names, s.now())
	finish := func() {
		for i, err := range fut.Wait(nil) {
			resp.Groups[idx[i]].ErrorCode = errorCode(err)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
