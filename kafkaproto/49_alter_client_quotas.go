package kafkaproto

// AlterClientQuotas: v0-1
//
// Behavior:
//   - Sets or removes quota values of client quota entities (KIP-546,
//     Kafka's ClientQuotaControlManager): an entity is one or more of user,
//     client-id (each a name or, null, the type's default) or ip alone;
//     user and client-id entities take producer_byte_rate and
//     consumer_byte_rate (whole numbers), request_percentage and
//     controller_mutation_rate; ip entities connection_creation_rate.
//   - Each entity is answered on its own, with Kafka 4.2's INVALID_REQUEST
//     messages: empty entity, an unknown type, an empty name, ip with
//     user or client-id, an unknown key, a value not above 0, a fractional
//     or too large byte rate. A type named twice in one entity keeps the
//     last name (Kafka reads a map). An entity with a key twice changes
//     nothing and is answered "Ignoring duplicate entity"; an entity
//     repeated in the request gets that answer once while its first
//     alteration applies (one answer per distinct entity, as Kafka). A
//     removal of a key that is not set is no error.
//   - The accepted entities are written in one synced batch before the
//     answer (a removed entity's last key deletes its row); enforcement
//     sees them from the next request on. validate_only checks without
//     writing.
//   - Needs ALTER_CONFIGS on the cluster, else every entity is
//     CLUSTER_AUTHORIZATION_FAILED (ControllerApis.handleAlterClientQuotas).
//   - controller_mutation_rate and connection_creation_rate are stored and
//     described but not enforced (DESIGN.md, Deviations).
//
// Version notes:
//   - v1 is flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() {
	register(kmsg.AlterClientQuotas, 0, 1, (*Server).handleAlterClientQuotas)
}

func (s *Server) handleAlterClientQuotas(r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	alts := make([]auth.QuotaAlteration, len(req.Entries))
	for i, e := range req.Entries {
		for _, p := range e.Entity {
			alts[i].Entity = append(alts[i].Entity, auth.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			alts[i].Ops = append(alts[i].Ops, auth.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	code, msg := int16(0), ""
	switch {
	case !r.allowedCluster(auth.OpAlterConfigs):
		code, msg = kerr.ClusterAuthorizationFailed.Code, "Authorization failed: altering client quotas needs ALTER_CONFIGS on the cluster"
	case s.cfg.Quotas == nil:
		code, msg = kerr.UnknownServerError.Code, noQuotas
	}
	if code != 0 {
		for _, alt := range alts {
			resp.Entries = append(resp.Entries, alterQuotaEntry(auth.NormalizeQuotaEntity(alt.Entity), code, &msg))
		}
		return reply{resp: resp}, nil
	}
	// The write syncs: it runs on the writer, like the ACL changes.
	finish := func() {
		results, err := s.cfg.Quotas.Alter(alts, req.ValidateOnly)
		if err != nil {
			for _, alt := range alts {
				resp.Entries = append(resp.Entries, alterQuotaEntry(auth.NormalizeQuotaEntity(alt.Entity), errorCode(err), errorMessage(err)))
			}
			return
		}
		for _, res := range results {
			resp.Entries = append(resp.Entries, alterQuotaEntry(res.Entity, errorCode(res.Err), errorMessage(res.Err)))
		}
	}
	return reply{resp: resp, finish: finish}, nil
}

// alterQuotaEntry is one entity's answer.
func alterQuotaEntry(e auth.QuotaEntity, code int16, msg *string) kmsg.AlterClientQuotasResponseEntry {
	re := kmsg.NewAlterClientQuotasResponseEntry()
	re.ErrorCode, re.ErrorMessage = code, msg
	for _, p := range e {
		ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
		ent.Type, ent.Name = p.Type, p.Name
		re.Entity = append(re.Entity, ent)
	}
	return re
}
