package kafkaproto

// DescribeConfigs: v0-v4
//
// Behavior:
//   - Topic resources list every topic config the broker knows (Kafka's
//     non-internal LogConfig names), defaults included, with the effective
//     value and its source: DYNAMIC_TOPIC_CONFIG when set on the topic,
//     STATIC_BROKER_CONFIG when the broker's configuration sets the default,
//     DEFAULT_CONFIG otherwise. Values are reported as stored, so
//     cleanup.policy reads compact, delete or compact,delete as it was set
//     (Kafka Connect checks it). config_names (non-null) filters the list;
//     unknown names are left out, as Kafka does.
//   - Broker resources (name "" or this node's ID) list the broker-level
//     defaults of topic configs under their broker names (log.retention.ms,
//     message.max.bytes, ...) and a few broker settings, all read-only:
//     broker settings are static here.
//   - Group resources (KIP-932 group configs) list a share group's
//     share.auto.offset.reset, share.delivery.count.limit,
//     share.heartbeat.interval.ms, share.isolation.level,
//     share.record.lock.duration.ms and share.session.timeout.ms:
//     GROUP_CONFIG when set on the group, else
//     the broker's group-share-* or group-consumer-* setting as
//     DEFAULT_CONFIG.
//   - include_synonyms (v1+) lists, most specific first, the topic value,
//     the broker setting and Kafka's default (KIP-226);
//     include_documentation (v3+) adds each config's documentation.
//   - Unknown topics get UNKNOWN_TOPIC_OR_PARTITION, invalid topic names
//     INVALID_TOPIC_EXCEPTION, another node's ID and other resource types
//     INVALID_REQUEST.
//
// Version notes:
//   - v0 reports is_default instead of a source; v3 adds config types and
//     documentation (KIP-569); v4 is the flexible version.

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
)

func init() { register(kmsg.DescribeConfigs, 0, 4, (*Server).handleDescribeConfigs) }

func (s *Server) handleDescribeConfigs(r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType = rr.ResourceType
		res.ResourceName = rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		fail := func(code int16, msg string) {
			res.ErrorCode = code
			res.ErrorMessage = &msg
		}
		switch {
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic && !r.allowedTopic(auth.OpDescribeConfigs, rr.ResourceName):
			fail(kerr.TopicAuthorizationFailed.Code, "Authorization failed.")
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker && !r.allowedCluster(auth.OpDescribeConfigs):
			fail(kerr.ClusterAuthorizationFailed.Code, "Authorization failed.")
		case rr.ResourceType == kmsg.ConfigResourceTypeTopic:
			t, ok := s.topics.Topic(rr.ResourceName)
			if !ok {
				if err := topics.ValidateTopicName(rr.ResourceName); err != nil {
					fail(kerr.InvalidTopicException.Code, err.Error())
				} else {
					fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rr.ResourceName))
				}
				break
			}
			set := t.Configs()
			broker := s.topics.BrokerConfigEntries()
			for _, e := range t.EffectiveConfigs() {
				if !want(e.Def.Name) {
					continue
				}
				res.Configs = append(res.Configs, s.describeConfigEntry(req, e.Def.Name, e, set, broker))
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			if code, msg := s.checkBrokerResource(rr.ResourceName); code != 0 {
				fail(code, msg)
				break
			}
			broker := s.topics.BrokerConfigEntries()
			for _, e := range broker {
				if !want(e.Def.BrokerSynonym) {
					continue
				}
				c := s.describeConfigEntry(req, e.Def.BrokerSynonym, e, nil, broker)
				c.ReadOnly = true
				res.Configs = append(res.Configs, c)
			}
			for _, bc := range s.brokerOnlyConfigs() {
				if !want(bc.Name) {
					continue
				}
				res.Configs = append(res.Configs, bc)
			}
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig && !r.allowedGroup(auth.OpDescribeConfigs, rr.ResourceName):
			fail(kerr.GroupAuthorizationFailed.Code, "Authorization failed.")
		case rr.ResourceType == kmsg.ConfigResourceTypeGroupConfig:
			if s.cfg.Groups == nil || rr.ResourceName == "" {
				fail(kerr.InvalidRequest.Code, "a group resource needs a group name and the group coordinator")
				break
			}
			for _, e := range s.cfg.Groups.ShareGroupConfigs(rr.ResourceName) {
				if !want(e.Name) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = e.Name, kmsg.StringPtr(e.Value)
				c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, true
				if e.Set {
					c.Source, c.IsDefault = kmsg.ConfigSourceGroupConfig, false
				}
				c.ConfigType = kmsg.ConfigTypeInt
				if e.Name == groups.ShareAutoOffsetResetConfig {
					c.ConfigType = kmsg.ConfigTypeString
				}
				res.Configs = append(res.Configs, c)
			}
		default:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("config resource type %d is not supported", rr.ResourceType))
		}
		resp.Resources = append(resp.Resources, res)
	}
	return reply{resp: resp}, nil
}

// checkBrokerResource accepts "" (the cluster default, which on one node
// is this broker) and this node's ID.
func (s *Server) checkBrokerResource(name string) (int16, string) {
	if name != "" && name != strconv.Itoa(int(s.cfg.NodeID)) {
		return kerr.InvalidRequest.Code, fmt.Sprintf("broker %q is not this broker (node %d)", name, s.cfg.NodeID)
	}
	return 0, ""
}

func (s *Server) describeConfigEntry(req *kmsg.DescribeConfigsRequest, name string, e topics.ConfigEntry, topicSet map[string]string, broker []topics.ConfigEntry) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	v := e.Value
	c.Value = &v
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsDefault = e.Source == topics.SourceDefault
	c.ConfigType = kmsg.ConfigType(e.Def.Type)
	if req.IncludeDocumentation {
		doc := e.Def.Doc
		c.Documentation = &doc
	}
	if req.IncludeSynonyms {
		if tv, ok := topicSet[e.Def.Name]; ok {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = e.Def.Name, &tv, kmsg.ConfigSourceDynamicTopicConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
		synonym := e.Def.BrokerSynonym
		if synonym == "" {
			synonym = e.Def.Name
		}
		for _, be := range broker {
			if be.Def.Name == e.Def.Name && be.Source == topics.SourceStaticBroker {
				bv := be.Value
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = synonym, &bv, kmsg.ConfigSourceStaticBrokerConfig
				c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			}
		}
		if !e.Def.NoDefaultSynonym {
			dv := e.Def.Default
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = synonym, &dv, kmsg.ConfigSourceDefaultConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
		}
	}
	return c
}

// brokerOnlyConfigs are broker settings with no topic counterpart.
func (s *Server) brokerOnlyConfigs() []kmsg.DescribeConfigsResponseResourceConfig {
	entry := func(name, value string, typ kmsg.ConfigType) kmsg.DescribeConfigsResponseResourceConfig {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = name
		c.Value = &value
		c.ReadOnly = true
		c.Source = kmsg.ConfigSourceStaticBrokerConfig
		c.ConfigType = typ
		return c
	}
	return []kmsg.DescribeConfigsResponseResourceConfig{
		entry("broker.id", strconv.Itoa(int(s.cfg.NodeID)), kmsg.ConfigTypeInt),
		entry("node.id", strconv.Itoa(int(s.cfg.NodeID)), kmsg.ConfigTypeInt),
		entry("num.partitions", strconv.Itoa(int(s.topics.DefaultPartitions())), kmsg.ConfigTypeInt),
		entry("auto.create.topics.enable", strconv.FormatBool(s.topics.AutoCreate()), kmsg.ConfigTypeBoolean),
		entry("default.replication.factor", "1", kmsg.ConfigTypeInt),
		entry("offsets.topic.replication.factor", "1", kmsg.ConfigTypeShort),
		entry("transaction.state.log.replication.factor", "1", kmsg.ConfigTypeShort),
		entry("socket.request.max.bytes", strconv.Itoa(int(s.cfg.MaxRequestBytes)), kmsg.ConfigTypeInt),
	}
}
