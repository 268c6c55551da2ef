package topics

import (
	"fmt"
	"strconv"
	"strings"
)

// ConfigType is the type Kafka reports for a config in DescribeConfigs (KIP-569).
type ConfigType int8

// Config types, numbered as in Kafka's DescribeConfigsResponse.
const (
	ConfigTypeUnknown ConfigType = 0
	ConfigTypeBoolean ConfigType = 1
	ConfigTypeString  ConfigType = 2
	ConfigTypeInt     ConfigType = 3
	ConfigTypeShort   ConfigType = 4
	ConfigTypeLong    ConfigType = 5
	ConfigTypeDouble  ConfigType = 6
	ConfigTypeList    ConfigType = 7
	ConfigTypeClass   ConfigType = 8
)

// ConfigDef describes one topic-level config: its default, its type, the
// broker-level synonym that supplies the default, and how values are checked.
type ConfigDef struct {
	Name          string
	Default       string
	Type          ConfigType
	BrokerSynonym string
	Doc           string
	// Min and Max bound numeric values (inclusive) when HasRange is set.
	HasRange bool
	Min, Max float64
	// Allowed lists the accepted values of enumerations (for lists, of each element).
	Allowed []string
}

// topicConfigDefs is the table of topic configs the broker accepts, with
// Kafka's defaults (Kafka 4.x TopicConfig / LogConfig).
var topicConfigDefs = []ConfigDef{
	{Name: "cleanup.policy", Default: "delete", Type: ConfigTypeList, BrokerSynonym: "log.cleanup.policy", Allowed: []string{"delete", "compact"}, Doc: "delete: drop old data by retention.ms/retention.bytes; compact: keep the latest record per key."},
	{Name: "compression.type", Default: "producer", Type: ConfigTypeString, BrokerSynonym: "compression.type", Allowed: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, Doc: "Codec of stored batches; producer keeps what the producer sent."},
	{Name: "delete.retention.ms", Default: "86400000", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.delete.retention.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "How long tombstones survive on compacted topics."},
	{Name: "file.delete.delay.ms", Default: "60000", Type: ConfigTypeLong, BrokerSynonym: "log.segment.delete.delay.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "Accepted for compatibility; deletion is immediate."},
	{Name: "flush.messages", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.flush.interval.messages", HasRange: true, Min: 1, Max: 1<<63 - 1, Doc: "Accepted for compatibility; every acknowledged write is fsynced."},
	{Name: "flush.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.flush.interval.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "Accepted for compatibility; every acknowledged write is fsynced."},
	{Name: "index.interval.bytes", Default: "4096", Type: ConfigTypeInt, BrokerSynonym: "log.index.interval.bytes", HasRange: true, Min: 0, Max: 1<<31 - 1, Doc: "Accepted for compatibility."},
	{Name: "max.compaction.lag.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.max.compaction.lag.ms", HasRange: true, Min: 1, Max: 1<<63 - 1, Doc: "Longest time a record may stay uncompacted."},
	{Name: "max.message.bytes", Default: "1048588", Type: ConfigTypeInt, BrokerSynonym: "message.max.bytes", HasRange: true, Min: 0, Max: 1<<31 - 1, Doc: "Largest record batch the topic accepts."},
	{Name: "message.downconversion.enable", Default: "true", Type: ConfigTypeBoolean, BrokerSynonym: "log.message.downconversion.enable", Allowed: []string{"true", "false"}, Doc: "Accepted for compatibility."},
	{Name: "message.timestamp.after.max.ms", Default: "3600000", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.after.max.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "How far in the future a CreateTime timestamp may be."},
	{Name: "message.timestamp.before.max.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.before.max.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "How far in the past a CreateTime timestamp may be."},
	{Name: "message.timestamp.difference.max.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.difference.max.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "Deprecated: largest difference between a CreateTime timestamp and the broker's clock."},
	{Name: "message.timestamp.type", Default: "CreateTime", Type: ConfigTypeString, BrokerSynonym: "log.message.timestamp.type", Allowed: []string{"CreateTime", "LogAppendTime"}, Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's time."},
	{Name: "min.cleanable.dirty.ratio", Default: "0.5", Type: ConfigTypeDouble, BrokerSynonym: "log.cleaner.min.cleanable.ratio", HasRange: true, Min: 0, Max: 1, Doc: "Share of uncompacted data that triggers compaction."},
	{Name: "min.compaction.lag.ms", Default: "0", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.min.compaction.lag.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "Shortest time a record stays uncompacted."},
	{Name: "min.insync.replicas", Default: "1", Type: ConfigTypeInt, BrokerSynonym: "min.insync.replicas", HasRange: true, Min: 1, Max: 1<<31 - 1, Doc: "Single node: always satisfied."},
	{Name: "preallocate", Default: "false", Type: ConfigTypeBoolean, BrokerSynonym: "log.preallocate", Allowed: []string{"true", "false"}, Doc: "Accepted for compatibility."},
	{Name: "retention.bytes", Default: "-1", Type: ConfigTypeLong, BrokerSynonym: "log.retention.bytes", HasRange: true, Min: -1, Max: 1<<63 - 1, Doc: "Largest size of a partition before old data is deleted; -1 means no limit."},
	{Name: "retention.ms", Default: "604800000", Type: ConfigTypeLong, BrokerSynonym: "log.retention.ms", HasRange: true, Min: -1, Max: 1<<63 - 1, Doc: "How long data is kept; -1 means forever."},
	{Name: "segment.bytes", Default: "1073741824", Type: ConfigTypeInt, BrokerSynonym: "log.segment.bytes", HasRange: true, Min: 14, Max: 1<<31 - 1, Doc: "Size of a retention/compaction unit."},
	{Name: "segment.index.bytes", Default: "10485760", Type: ConfigTypeInt, BrokerSynonym: "log.index.size.max.bytes", HasRange: true, Min: 4, Max: 1<<31 - 1, Doc: "Accepted for compatibility."},
	{Name: "segment.jitter.ms", Default: "0", Type: ConfigTypeLong, BrokerSynonym: "log.roll.jitter.ms", HasRange: true, Min: 0, Max: 1<<63 - 1, Doc: "Accepted for compatibility."},
	{Name: "segment.ms", Default: "604800000", Type: ConfigTypeLong, BrokerSynonym: "log.roll.ms", HasRange: true, Min: 1, Max: 1<<63 - 1, Doc: "Age of a retention/compaction unit before it is closed."},
	{Name: "unclean.leader.election.enable", Default: "false", Type: ConfigTypeBoolean, BrokerSynonym: "unclean.leader.election.enable", Allowed: []string{"true", "false"}, Doc: "Single node: no effect."},
}

var topicConfigIndex = func() map[string]*ConfigDef {
	m := make(map[string]*ConfigDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].Name] = &topicConfigDefs[i]
	}
	return m
}()

// TopicConfigDefs returns every topic config the broker knows, sorted by name.
func TopicConfigDefs() []ConfigDef { return topicConfigDefs }

// LookupConfigDef returns the definition of a topic config.
func LookupConfigDef(name string) (*ConfigDef, bool) {
	d, ok := topicConfigIndex[name]
	return d, ok
}

// ValidateConfigValue checks one topic config value against its definition.
// A nil value (a config set to null) is rejected.
func ValidateConfigValue(name string, value *string) error {
	d, ok := topicConfigIndex[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
	}
	if value == nil {
		return fmt.Errorf("%w: %s must have a value", ErrInvalidConfig, name)
	}
	v := *value
	bad := func(why string) error {
		return fmt.Errorf("%w: invalid value %q for %s: %s", ErrInvalidConfig, v, name, why)
	}
	switch d.Type {
	case ConfigTypeInt, ConfigTypeLong, ConfigTypeShort:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return bad("not an integer")
		}
		if d.Type == ConfigTypeInt && (n < -1<<31 || n > 1<<31-1) {
			return bad("out of the int32 range")
		}
		if d.HasRange && (float64(n) < d.Min || float64(n) > d.Max) {
			return bad(fmt.Sprintf("must be between %.0f and %.0f", d.Min, d.Max))
		}
	case ConfigTypeDouble:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return bad("not a number")
		}
		if d.HasRange && (f < d.Min || f > d.Max) {
			return bad(fmt.Sprintf("must be between %g and %g", d.Min, d.Max))
		}
	case ConfigTypeBoolean:
		if l := strings.ToLower(strings.TrimSpace(v)); l != "true" && l != "false" {
			return bad("must be true or false")
		}
	case ConfigTypeList:
		parts := strings.Split(v, ",")
		for _, p := range parts {
			if !contains(d.Allowed, strings.TrimSpace(p)) {
				return bad("allowed values are " + strings.Join(d.Allowed, ", "))
			}
		}
	default:
		if len(d.Allowed) > 0 && !contains(d.Allowed, v) {
			return bad("allowed values are " + strings.Join(d.Allowed, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ConfigValue returns the effective value of config name on a topic whose
// explicit configs are set, falling back to overrides then to the default.
func effectiveConfig(set, brokerDefaults map[string]string, name string) string {
	if v, ok := set[name]; ok {
		return v
	}
	if v, ok := brokerDefaults[name]; ok {
		return v
	}
	if d, ok := topicConfigIndex[name]; ok {
		return d.Default
	}
	return ""
}
