package kafkaproto

// ApiVersions: v0-v4
//
// Behavior:
//   - The key list is built from the registry only, so the broker never
//     advertises an API it does not serve.
//   - A request at a version above the supported range gets a v0 response
//     with UNSUPPORTED_VERSION and the full key list (KIP-511), so the client
//     can retry at a version both sides know.
//   - v3+: client_software_name and client_software_version must match
//     Kafka's pattern [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?, else
//     INVALID_REQUEST (KIP-511).
//
// Version notes:
//   - The response header is never flexible, even at v3+ (KIP-511).
//   - v3+: two features are supported (0-1) and finalized at 1, as an
//     Apache Kafka 4.2 cluster advertises them: group.version 1, the
//     consumer group protocol of KIP-848 (ConsumerGroupHeartbeat,
//     ConsumerGroupDescribe), and share.version 1, share groups of KIP-932
//     (ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
//     ShareAcknowledge, the share-group offset APIs). transaction.version
//     2 (KIP-890) is not advertised: it is not implemented.
//   - v3: supported features whose minimum version is 0 are left out, as
//     Apache Kafka 4 does (KIP-1022: clients before v4 refuse a supported
//     range starting at 0), so v3 lists the finalized levels only; v4
//     lists both.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ApiVersions, 0, 4, (*Server).handleApiVersions) }

func (s *Server) handleApiVersions(r *request) (reply, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := apiVersionsList(req.ResponseKind().(*kmsg.ApiVersionsResponse))
	if req.Version >= 3 {
		addFeatures(resp, req.Version)
	}
	if req.Version >= 3 && (!validSoftwareField(req.ClientSoftwareName) || !validSoftwareField(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	return reply{resp: resp}, nil
}

// unsupportedApiVersions is the v0 answer to an ApiVersions request of a
// version this broker does not know: UNSUPPORTED_VERSION and the range of
// ApiVersions alone, from which the client picks a version to retry with
// (KIP-511; Apache Kafka lists only that key too).
func unsupportedApiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	reg := registry[int16(kmsg.ApiVersions)]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = reg.key, reg.minVersion, reg.maxVersion
	resp.ApiKeys = append(resp.ApiKeys, k)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return resp
}

func apiVersionsList(resp *kmsg.ApiVersionsResponse) *kmsg.ApiVersionsResponse {
	for _, reg := range sortedRegistrations() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = reg.key
		k.MinVersion = reg.minVersion
		k.MaxVersion = reg.maxVersion
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func validSoftwareField(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// Feature levels this broker serves (KIP-584 feature flags).
const (
	// groupVersion 1: the consumer group protocol of KIP-848.
	groupVersion = 1
	// shareVersion 1: share groups of KIP-932.
	shareVersion = 1
	// featuresEpoch is the epoch of the finalized features; they never
	// change while a broker runs.
	featuresEpoch = 1
)

// addFeatures lists the supported and finalized features (ApiVersions v3+);
// before v4 without the supported ranges starting at 0 (KIP-1022).
func addFeatures(resp *kmsg.ApiVersionsResponse, version int16) {
	for _, f := range []struct {
		name  string
		level int16
	}{{"group.version", groupVersion}, {"share.version", shareVersion}} {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, 0, f.level
		if version >= 4 {
			resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		}
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.level, f.level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
	resp.FinalizedFeaturesEpoch = featuresEpoch
}
