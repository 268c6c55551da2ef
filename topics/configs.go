package topics

import (
	"fmt"
	"math"
	"sort"
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
	// Internal configs (Kafka's defineInternal) are accepted but never
	// listed by DescribeConfigs.
	Internal bool
	// Removed configs (dropped by Kafka 4.0) are accepted from 3.x clients
	// and listed by DescribeConfigs only where set on the topic, as Kafka 4
	// lists no such config.
	Removed bool
	// NoDefaultSynonym: DescribeConfigs lists no DEFAULT_CONFIG synonym
	// for the config, as Kafka lists none where the config has no broker
	// counterpart (remote.*, *.replication.throttled.replicas) or the
	// counterpart has no default of its own (log.retention.ms and
	// log.roll.ms defer to their hours settings; log.flush.interval.ms and
	// log.roll.jitter.ms are null by default).
	NoDefaultSynonym bool
	// check, when set, replaces the generic checks after the type is
	// parsed: it returns "" or why the value is wrong.
	check func(v string) string
}

const maxLong = 1<<63 - 1

// topicConfigDefs is the table of topic configs the broker accepts, with the
// defaults of Kafka 4.x (storage LogConfig, TopicConfig), sorted by name.
// Configs removed in Kafka 4.0 that 3.x clients still send
// (message.timestamp.difference.max.ms, message.downconversion.enable) are
// accepted too (Removed).
var topicConfigDefs = []ConfigDef{
	{Name: "cleanup.policy", Default: "delete", Type: ConfigTypeList, BrokerSynonym: "log.cleanup.policy", Allowed: []string{"delete", "compact"}, Doc: "A comma-separated list of delete (drop old segments by retention.ms and retention.bytes) and compact (keep the latest record per key); an empty list keeps everything."},
	{Name: "compression.gzip.level", Default: "-1", Type: ConfigTypeInt, BrokerSynonym: "compression.gzip.level", check: checkLevel(1, 9, -1), Doc: "Accepted for compatibility; batches are stored as the producer compressed them."},
	{Name: "compression.lz4.level", Default: "9", Type: ConfigTypeInt, BrokerSynonym: "compression.lz4.level", HasRange: true, Min: 1, Max: 17, Doc: "Accepted for compatibility; batches are stored as the producer compressed them."},
	{Name: "compression.type", Default: "producer", Type: ConfigTypeString, BrokerSynonym: "compression.type", Allowed: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}, Doc: "Codec of stored batches: producer keeps what the producer sent; a codec name makes the broker recompress batches sent in another codec."},
	{Name: "compression.zstd.level", Default: "3", Type: ConfigTypeInt, BrokerSynonym: "compression.zstd.level", HasRange: true, Min: -131072, Max: 22, Doc: "Accepted for compatibility; batches are stored as the producer compressed them."},
	{Name: "delete.retention.ms", Default: "86400000", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.delete.retention.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "How long a tombstone stays readable on a compacted topic after the first compaction that keeps it."},
	{Name: "file.delete.delay.ms", Default: "60000", Type: ConfigTypeLong, BrokerSynonym: "log.segment.delete.delay.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "Accepted for compatibility; deleted data is removed at once."},
	{Name: "flush.messages", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.flush.interval.messages", HasRange: true, Min: 1, Max: maxLong, Doc: "Accepted for compatibility; every acknowledged write is fsynced."},
	{Name: "flush.ms", NoDefaultSynonym: true, Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.flush.interval.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "Accepted for compatibility; every acknowledged write is fsynced."},
	{Name: "follower.replication.throttled.replicas", NoDefaultSynonym: true, Default: "", Type: ConfigTypeList, BrokerSynonym: "follower.replication.throttled.replicas", check: checkThrottledReplicas, Doc: "Accepted for compatibility; a single broker does not replicate."},
	{Name: "index.interval.bytes", Default: "4096", Type: ConfigTypeInt, BrokerSynonym: "log.index.interval.bytes", HasRange: true, Min: 0, Max: math.MaxInt32, Doc: "Accepted for compatibility."},
	{Name: "internal.segment.bytes", Default: "", Type: ConfigTypeInt, Internal: true, HasRange: true, Min: 1, Max: math.MaxInt32, Doc: "segment.bytes without its lower bound, for tests (Kafka's internal.segment.bytes)."},
	{Name: "leader.replication.throttled.replicas", NoDefaultSynonym: true, Default: "", Type: ConfigTypeList, BrokerSynonym: "leader.replication.throttled.replicas", check: checkThrottledReplicas, Doc: "Accepted for compatibility; a single broker does not replicate."},
	{Name: "local.retention.bytes", Default: "-2", Type: ConfigTypeLong, BrokerSynonym: "log.local.retention.bytes", HasRange: true, Min: -2, Max: maxLong, Doc: "Tiered storage is not available; accepted for compatibility."},
	{Name: "local.retention.ms", Default: "-2", Type: ConfigTypeLong, BrokerSynonym: "log.local.retention.ms", HasRange: true, Min: -2, Max: maxLong, Doc: "Tiered storage is not available; accepted for compatibility."},
	{Name: "max.compaction.lag.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.max.compaction.lag.ms", HasRange: true, Min: 1, Max: maxLong, Doc: "Longest time a record may stay uncompacted; segments of compacted topics also close after it."},
	{Name: "max.message.bytes", Default: "1048588", Type: ConfigTypeInt, BrokerSynonym: "message.max.bytes", HasRange: true, Min: 0, Max: math.MaxInt32, Doc: "Largest record batch the topic accepts."},
	{Name: "message.downconversion.enable", Default: "true", Type: ConfigTypeBoolean, BrokerSynonym: "log.message.downconversion.enable", Removed: true, Doc: "Removed in Kafka 4.0; accepted for 3.x clients and ignored: Fetch v0-v3 are always answered with converted message sets."},
	{Name: "message.timestamp.after.max.ms", Default: "3600000", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.after.max.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "How far after the broker's clock a CreateTime timestamp may be; later records get INVALID_TIMESTAMP."},
	{Name: "message.timestamp.before.max.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.before.max.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "How far before the broker's clock a CreateTime timestamp may be; earlier records get INVALID_TIMESTAMP."},
	{Name: "message.timestamp.difference.max.ms", Default: "9223372036854775807", Type: ConfigTypeLong, BrokerSynonym: "log.message.timestamp.difference.max.ms", Removed: true, HasRange: true, Min: 0, Max: maxLong, Doc: "Removed in Kafka 4.0 (KIP-937); accepted for 3.x clients and applied as a bound in both directions on top of the before and after limits."},
	{Name: "message.timestamp.type", Default: "CreateTime", Type: ConfigTypeString, BrokerSynonym: "log.message.timestamp.type", Allowed: []string{"CreateTime", "LogAppendTime"}, Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's time."},
	{Name: "min.cleanable.dirty.ratio", Default: "0.5", Type: ConfigTypeDouble, BrokerSynonym: "log.cleaner.min.cleanable.ratio", HasRange: true, Min: 0, Max: 1, Doc: "Share of not yet compacted bytes above which a compacted partition is cleaned."},
	{Name: "min.compaction.lag.ms", Default: "0", Type: ConfigTypeLong, BrokerSynonym: "log.cleaner.min.compaction.lag.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "Shortest time a record stays uncompacted."},
	{Name: "min.insync.replicas", Default: "1", Type: ConfigTypeInt, BrokerSynonym: "min.insync.replicas", HasRange: true, Min: 1, Max: math.MaxInt32, Doc: "Single node: always satisfied."},
	{Name: "preallocate", Default: "false", Type: ConfigTypeBoolean, BrokerSynonym: "log.preallocate", Doc: "Accepted for compatibility."},
	{Name: "remote.log.copy.disable", NoDefaultSynonym: true, Default: "false", Type: ConfigTypeBoolean, Doc: "Tiered storage is not available; accepted for compatibility."},
	{Name: "remote.log.delete.on.disable", NoDefaultSynonym: true, Default: "false", Type: ConfigTypeBoolean, Doc: "Tiered storage is not available; accepted for compatibility."},
	{Name: "remote.storage.enable", NoDefaultSynonym: true, Default: "false", Type: ConfigTypeBoolean, check: checkRemoteStorage, Doc: "Tiered storage is not available: only false is accepted."},
	{Name: "retention.bytes", Default: "-1", Type: ConfigTypeLong, BrokerSynonym: "log.retention.bytes", HasRange: true, Min: math.MinInt64, Max: maxLong, Doc: "Largest size of a partition before its oldest segments are deleted; negative means no limit."},
	{Name: "retention.ms", NoDefaultSynonym: true, Default: "604800000", Type: ConfigTypeLong, BrokerSynonym: "log.retention.ms", HasRange: true, Min: -1, Max: maxLong, Doc: "How long a segment is kept after its newest record's timestamp; -1 means forever."},
	{Name: "segment.bytes", Default: "1073741824", Type: ConfigTypeInt, BrokerSynonym: "log.segment.bytes", HasRange: true, Min: 1 << 20, Max: math.MaxInt32, Doc: "Size at which a segment, the unit of retention and compaction, is closed."},
	{Name: "segment.index.bytes", Default: "10485760", Type: ConfigTypeInt, BrokerSynonym: "log.index.size.max.bytes", HasRange: true, Min: 4, Max: math.MaxInt32, Doc: "Accepted for compatibility."},
	{Name: "segment.jitter.ms", NoDefaultSynonym: true, Default: "0", Type: ConfigTypeLong, BrokerSynonym: "log.roll.jitter.ms", HasRange: true, Min: 0, Max: maxLong, Doc: "Accepted for compatibility; segments close without jitter."},
	{Name: "segment.ms", NoDefaultSynonym: true, Default: "604800000", Type: ConfigTypeLong, BrokerSynonym: "log.roll.ms", HasRange: true, Min: 1, Max: maxLong, Doc: "Time after its first record's timestamp at which a segment is closed by the next append."},
	{Name: "unclean.leader.election.enable", Default: "false", Type: ConfigTypeBoolean, BrokerSynonym: "unclean.leader.election.enable", Doc: "Single node: no effect."},
}

var topicConfigIndex = func() map[string]*ConfigDef {
	m := make(map[string]*ConfigDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		d := &topicConfigDefs[i]
		if d.Type == ConfigTypeBoolean && d.Allowed == nil {
			d.Allowed = []string{"true", "false"}
		}
		m[d.Name] = d
	}
	return m
}()

// TopicConfigDefs returns every topic config the broker knows, sorted by
// name, internal ones included.
func TopicConfigDefs() []ConfigDef { return topicConfigDefs }

// LookupConfigDef returns the definition of a topic config.
func LookupConfigDef(name string) (*ConfigDef, bool) {
	d, ok := topicConfigIndex[name]
	return d, ok
}

// ValidateConfigValue checks one topic config value against its definition:
// a known name, a value of the config's type, in range or among the allowed
// values. A nil value (a config set to null) is rejected. Errors wrap
// ErrInvalidConfig and say what is wrong, as Kafka's messages do.
func ValidateConfigValue(name string, value *string) error {
	d, ok := topicConfigIndex[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config name: %s", ErrInvalidConfig, name)
	}
	if value == nil {
		return fmt.Errorf("%w: null value not supported for topic config %s", ErrInvalidConfig, name)
	}
	if why := d.problem(*value); why != "" {
		return fmt.Errorf("%w: invalid value %s for configuration %s: %s", ErrInvalidConfig, *value, name, why)
	}
	return nil
}

// problem returns "" or why v is not a valid value of d.
func (d *ConfigDef) problem(v string) string {
	t := strings.TrimSpace(v)
	switch d.Type {
	case ConfigTypeInt, ConfigTypeLong, ConfigTypeShort:
		bits := 64
		if d.Type == ConfigTypeInt {
			bits = 32
		} else if d.Type == ConfigTypeShort {
			bits = 16
		}
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return fmt.Sprintf("not a %d-bit integer", bits)
			}
			return "not a number"
		}
		if d.check != nil {
			return d.check(t)
		}
		if d.HasRange && float64(n) < d.Min {
			return fmt.Sprintf("value must be at least %.0f", d.Min)
		}
		if d.HasRange && float64(n) > d.Max {
			return fmt.Sprintf("value must be no more than %.0f", d.Max)
		}
	case ConfigTypeDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "not a number"
		}
		if d.HasRange && (f < d.Min || f > d.Max) {
			return fmt.Sprintf("value must be between %g and %g", d.Min, d.Max)
		}
	case ConfigTypeBoolean:
		if l := strings.ToLower(t); l != "true" && l != "false" {
			return "expected value to be either true or false"
		}
		if d.check != nil {
			return d.check(strings.ToLower(t))
		}
	case ConfigTypeList:
		if d.check != nil {
			return d.check(t)
		}
		seen := map[string]bool{}
		for _, p := range splitList(t) {
			if !contains(d.Allowed, p) {
				return "string must be one of: " + strings.Join(d.Allowed, ", ")
			}
			if seen[p] {
				return "values must not be duplicated"
			}
			seen[p] = true
		}
		if strings.Contains(t, ",") && len(splitList(t)) != strings.Count(t, ",")+1 {
			return "the list has an empty element"
		}
	default:
		if d.check != nil {
			return d.check(v)
		}
		if len(d.Allowed) > 0 && !contains(d.Allowed, v) {
			return "string must be one of: " + strings.Join(d.Allowed, ", ")
		}
	}
	return ""
}

func checkLevel(low, high, special int64) func(string) string {
	return func(v string) string {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n == special || (n >= low && n <= high) {
			return ""
		}
		return fmt.Sprintf("value must be %d or between %d and %d", special, low, high)
	}
}

// checkThrottledReplicas accepts "", "*", or partition:broker pairs, as
// Kafka's ThrottledReplicaListValidator.
func checkThrottledReplicas(v string) string {
	if v == "" || v == "*" {
		return ""
	}
	for _, p := range strings.Split(v, ",") {
		part, broker, ok := strings.Cut(strings.TrimSpace(p), ":")
		_, err1 := strconv.ParseInt(part, 10, 32)
		_, err2 := strconv.ParseInt(broker, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return "must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..."
		}
	}
	return ""
}

func checkRemoteStorage(v string) string {
	if v == "true" {
		return "tiered storage functionality is disabled in the broker; the topic cannot be configured with remote log storage"
	}
	return ""
}

// ValidateTopicConfigs checks a topic's complete set of explicit configs:
// every value, then the rules between values (Kafka LogConfig.validate).
// brokerDefaults supply the values the set leaves out.
func ValidateTopicConfigs(set, brokerDefaults map[string]string) error {
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := set[k]
		if err := ValidateConfigValue(k, &v); err != nil {
			return err
		}
	}
	s, err := parseSettings(set, brokerDefaults)
	if err != nil {
		return err
	}
	if s.minCompactionLagMs > s.maxCompactionLagMs {
		return fmt.Errorf("%w: conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			ErrInvalidConfig, s.minCompactionLagMs, s.maxCompactionLagMs)
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

// effectiveConfig returns the value of config name on a topic whose explicit
// configs are set, falling back to the broker default, then to Kafka's.
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

// topicSettings are a topic's effective configs, parsed once per change.
type topicSettings struct {
	compact, delete       bool
	retentionMs           int64 // < 0: no time limit
	retentionBytes        int64 // < 0: no size limit
	segmentBytes          int64
	segmentMs             int64
	deleteRetentionMs     int64
	minCompactionLagMs    int64
	maxCompactionLagMs    int64
	minCleanableRatio     float64
	maxMessageBytes       int
	logAppendTime         bool
	timestampBeforeMaxMs  int64
	timestampAfterMaxMs   int64
	timestampDifferenceMs int64
	// recompress: compression.type names a codec (not producer), and
	// batches in another codec are rewritten in it.
	recompress  bool
	compression Codec
}

// parseSettings computes the effective settings of a topic. The values
// must have passed ValidateConfigValue.
func parseSettings(set, brokerDefaults map[string]string) (*topicSettings, error) {
	var firstErr error
	get := func(name string) string { return strings.TrimSpace(effectiveConfig(set, brokerDefaults, name)) }
	// A value that does not parse (only a row written by another version
	// could hold one) falls back to the broker's, then Kafka's default.
	long := func(name string) int64 {
		for _, v := range []string{get(name), effectiveConfig(nil, brokerDefaults, name), topicConfigIndex[name].Default} {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: invalid value %q for configuration %s", ErrInvalidConfig, v, name)
			}
		}
		return 0
	}
	s := &topicSettings{}
	for _, p := range splitList(get("cleanup.policy")) {
		switch p {
		case "compact":
			s.compact = true
		case "delete":
			s.delete = true
		}
	}
	s.retentionMs = long("retention.ms")
	s.retentionBytes = long("retention.bytes")
	s.segmentBytes = long("segment.bytes")
	if v := get("internal.segment.bytes"); v != "" {
		s.segmentBytes = long("internal.segment.bytes")
	}
	s.segmentMs = long("segment.ms")
	s.deleteRetentionMs = long("delete.retention.ms")
	s.minCompactionLagMs = long("min.compaction.lag.ms")
	s.maxCompactionLagMs = long("max.compaction.lag.ms")
	ratio, err := strconv.ParseFloat(get("min.cleanable.dirty.ratio"), 64)
	if err != nil || math.IsNaN(ratio) {
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: invalid value for configuration min.cleanable.dirty.ratio", ErrInvalidConfig)
		}
		ratio = 0.5
	}
	s.minCleanableRatio = ratio
	s.maxMessageBytes = int(long("max.message.bytes"))
	s.logAppendTime = get("message.timestamp.type") == "LogAppendTime"
	s.timestampBeforeMaxMs = long("message.timestamp.before.max.ms")
	s.timestampAfterMaxMs = long("message.timestamp.after.max.ms")
	s.timestampDifferenceMs = long("message.timestamp.difference.max.ms")
	if c, ok := map[string]Codec{"uncompressed": CodecNone, "gzip": CodecGzip, "snappy": CodecSnappy, "lz4": CodecLZ4, "zstd": CodecZstd}[get("compression.type")]; ok {
		s.recompress, s.compression = true, c
	}
	return s, firstErr
}

// maxSegmentMs is how long a segment stays open, as Kafka's
// LogConfig.maxSegmentMs: compacted topics close segments after
// max.compaction.lag.ms too, so that compaction can reach their records.
func (s *topicSettings) maxSegmentMs() int64 {
	if s.compact && s.maxCompactionLagMs > 0 {
		return min(s.maxCompactionLagMs, s.segmentMs)
	}
	return s.segmentMs
}

// timestampBounds returns the CreateTime timestamps accepted at now (Kafka
// LogValidator.validateTimestamp): [now - before, now + after], each bound
// also limited by the deprecated message.timestamp.difference.max.ms.
func (s *topicSettings) timestampBounds(now int64) (lowest, highest int64) {
	before := min(s.timestampBeforeMaxMs, s.timestampDifferenceMs)
	after := min(s.timestampAfterMaxMs, s.timestampDifferenceMs)
	lowest, highest = math.MinInt64, math.MaxInt64
	if before >= 0 && now >= math.MinInt64+before {
		lowest = now - before
	}
	if after >= 0 && now <= math.MaxInt64-after {
		highest = now + after
	}
	return lowest, highest
}

// ConfigOpType is an IncrementalAlterConfigs operation (KIP-339).
type ConfigOpType int8

// Operations, numbered as on the wire.
const (
	ConfigOpSet      ConfigOpType = 0
	ConfigOpDelete   ConfigOpType = 1
	ConfigOpAppend   ConfigOpType = 2
	ConfigOpSubtract ConfigOpType = 3
)

// ConfigOp is one operation of IncrementalAlterConfigs on a topic config.
type ConfigOp struct {
	Name  string
	Op    ConfigOpType
	Value *string
}

// applyConfigOps applies ops to a copy of the explicit configs current, as
// Kafka's ConfigurationControlManager.incrementalAlterConfigResource does:
// SET replaces, DELETE reverts to the default, APPEND and SUBTRACT edit a
// list config's effective value element by element. It does not validate
// the values; the caller validates the result.
func applyConfigOps(current, brokerDefaults map[string]string, ops []ConfigOp) (map[string]string, error) {
	out := make(map[string]string, len(current)+len(ops))
	for k, v := range current {
		out[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case ConfigOpSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for : %s", ErrInvalidRequest, op.Name)
			}
			out[op.Name] = *op.Value
		case ConfigOpDelete:
			delete(out, op.Name)
		case ConfigOpAppend, ConfigOpSubtract:
			d, ok := topicConfigIndex[op.Name]
			verb := "APPEND"
			if op.Op == ConfigOpSubtract {
				verb = "SUBTRACT"
			}
			if !ok || d.Type != ConfigTypeList {
				return nil, fmt.Errorf("%w: can't %s to key %s because its type is not LIST", ErrInvalidConfig, verb, op.Name)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("%w: null value not supported for : %s", ErrInvalidRequest, op.Name)
			}
			parts := splitList(effectiveConfig(out, brokerDefaults, op.Name))
			for _, v := range splitList(*op.Value) {
				if op.Op == ConfigOpAppend {
					if !contains(parts, v) {
						parts = append(parts, v)
					}
					continue
				}
				kept := parts[:0]
				for _, p := range parts {
					if p != v {
						kept = append(kept, p)
					}
				}
				parts = kept
			}
			out[op.Name] = strings.Join(parts, ",")
		default:
			return nil, fmt.Errorf("%w: unknown config operation %d on %s", ErrInvalidRequest, op.Op, op.Name)
		}
	}
	return out, nil
}
