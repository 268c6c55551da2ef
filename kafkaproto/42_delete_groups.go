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
	fut := s.cfg.Groups.DeleteGroups(req.Groups, s.now())
	finish := func() {
		for i, err := range fut.Wait(nil) {
			resp.Groups[i].ErrorCode = errorCode(err)
		}
	}
	return reply{resp: resp, finish: finish}, nil
}
