package kafkaproto

// DescribeCluster: v0-v2
//
// Behavior:
//   - The cluster is this one broker, which is also the controller; in a
//     cluster (cluster.go), every registered broker that is not fenced
//     and the metadata group's leader as controller. Fenced brokers
//     (KIP-631) are listed, with IsFenced, only when the request sets
//     IncludeFencedBrokers (KIP-1073).
//   - endpoint_type (v1+, KIP-919): only 1 (brokers) is served; 2
//     (controllers) gets UNSUPPORTED_ENDPOINT_TYPE.
//   - Cluster authorized operations, when asked for: every cluster
//     operation (no authorizer, as Kafka answers without one).
//
// Version notes:
//   - v2 adds IncludeFencedBrokers and IsFenced (KIP-1073); the field is
//     false in older requests, so they never list fenced brokers.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
)

func init() { register(kmsg.DescribeCluster, 0, 2, (*Server).handleDescribeCluster) }

func (s *Server) handleDescribeCluster(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "only broker endpoints (endpoint type 1) are served"
		resp.ErrorMessage = &msg
		return reply{resp: resp}, nil
	}
	if req.IncludeClusterAuthorizedOperations {
		// KafkaApis: the operations when the principal may DESCRIBE the
		// cluster, else none.
		resp.ClusterAuthorizedOperations = 0
		if r.allowedCluster(auth.OpDescribe) {
			resp.ClusterAuthorizedOperations = r.clusterAuthorizedOperations()
		}
	}
	resp.ClusterID = s.clusterID()
	resp.ControllerID = s.clusterController()
	brokers := []listedBroker{{MetadataResponseBroker: s.brokerEntry(r.c)}}
	if s.cfg.Cluster != nil {
		brokers = s.clusterBrokers(r.c, req.Version >= 2 && req.IncludeFencedBrokers)
	}
	for _, mb := range brokers {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack, b.IsFenced = mb.NodeID, mb.Host, mb.Port, mb.Rack, mb.fenced
		resp.Brokers = append(resp.Brokers, b)
	}
	return reply{resp: resp}, nil
}
