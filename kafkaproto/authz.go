package kafkaproto

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

// Authorization (KIP-11): handlers ask allowed() with the connection's
// principal and address. Without an authorizer (Config.Authorizer nil,
// the default) every check is one nil comparison and allows, as Kafka
// without authorizer.class.name; the authorized-operations fields then
// report every operation of the resource type (KIP-430).

// allowed reports whether the request's principal may do op on the
// resource.
func (r *request) allowed(op auth.Operation, rt auth.ResourceType, name string) bool {
	a := r.c.s.cfg.Authorizer
	if a == nil {
		return true
	}
	return a.Authorize(r.c.principal, r.c.host, op, rt, name)
}

// allowedTopic is allowed on a topic.
func (r *request) allowedTopic(op auth.Operation, topic string) bool {
	return r.allowed(op, auth.ResourceTopic, topic)
}

// allowedGroup is allowed on a group.
func (r *request) allowedGroup(op auth.Operation, group string) bool {
	return r.allowed(op, auth.ResourceGroup, group)
}

// allowedCluster is allowed on the cluster.
func (r *request) allowedCluster(op auth.Operation) bool {
	return r.allowed(op, auth.ResourceCluster, auth.ClusterName)
}

// allowedTxn is allowed on a transactional ID.
func (r *request) allowedTxn(op auth.Operation, id string) bool {
	return r.allowed(op, auth.ResourceTransactionalID, id)
}

// allowedIdempotent is Kafka's check for an idempotent producer's
// InitProducerId (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on
// some topic.
func (r *request) allowedIdempotent() bool {
	a := r.c.s.cfg.Authorizer
	if a == nil {
		return true
	}
	return a.Authorize(r.c.principal, r.c.host, auth.OpIdempotentWrite, auth.ResourceCluster, auth.ClusterName) ||
		a.AuthorizeAny(r.c.principal, r.c.host, auth.OpWrite, auth.ResourceTopic)
}

// The operations each resource type supports, for the authorized
// operations fields (Kafka AclEntry.supportedOperations).
var (
	topicOperations   = []auth.Operation{auth.OpRead, auth.OpWrite, auth.OpCreate, auth.OpDelete, auth.OpAlter, auth.OpDescribe, auth.OpDescribeConfigs, auth.OpAlterConfigs}
	groupOperations   = []auth.Operation{auth.OpRead, auth.OpDescribe, auth.OpDelete}
	clusterOperations = []auth.Operation{auth.OpCreate, auth.OpAlter, auth.OpDescribe, auth.OpClusterAction, auth.OpDescribeConfigs, auth.OpAlterConfigs, auth.OpIdempotentWrite}
)

// authorizedOperations is the KIP-430 bit set of the operations of ops the
// principal may do on the resource.
func (r *request) authorizedOperations(rt auth.ResourceType, name string, ops []auth.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if r.allowed(op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

func (r *request) topicAuthorizedOperations(topic string) int32 {
	return r.authorizedOperations(auth.ResourceTopic, topic, topicOperations)
}

func (r *request) groupAuthorizedOperations(group string) int32 {
	return r.authorizedOperations(auth.ResourceGroup, group, groupOperations)
}

func (r *request) clusterAuthorizedOperations() int32 {
	return r.authorizedOperations(auth.ResourceCluster, auth.ClusterName, clusterOperations)
}

// deniedTopics is nil when the principal may do op on every named topic,
// else the message of the TOPIC_AUTHORIZATION_FAILED that Kafka answers a
// group heartbeat subscribing to them (KafkaApis
// handleConsumerGroupHeartbeat, handleShareGroupHeartbeat).
func (r *request) deniedTopics(op auth.Operation, names []string) *string {
	var hidden []string
	for _, name := range names {
		if !r.allowedTopic(op, name) {
			hidden = append(hidden, name)
		}
	}
	if len(hidden) == 0 {
		return nil
	}
	return kmsg.StringPtr("unauthorized topics: " + strings.Join(hidden, ", "))
}

// aclChangeRefusal is why CreateAcls or DeleteAcls (what: "creating ACLs")
// changes nothing: SECURITY_DISABLED without an authorizer, else
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster; code 0 when
// the change may go ahead.
func (s *Server) aclChangeRefusal(r *request, what string) (int16, string) {
	switch {
	case s.cfg.Authorizer == nil:
		return kerr.SecurityDisabled.Code, securityDisabled
	case !r.allowedCluster(auth.OpAlter):
		return kerr.ClusterAuthorizationFailed.Code, "Authorization failed: " + what + " needs ALTER on the cluster"
	}
	return 0, ""
}
