package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vibemq/broker/retention"
	"github.com/vibemq/broker/topics"
)

// logConfigKeys are the configuration keys of log retention and
// compaction: broker-wide defaults of topic configs (Kafka's log.*
// settings) and the intervals of the background loops. configKeys lists
// them after the others.
var logConfigKeys = []configKey{
	{
		name:  "log-cleanup-policy",
		def:   "delete",
		usage: "default cleanup.policy of topics: delete, compact or compact,delete",
		doc:   "delete drops old segments by log-retention and log-retention-bytes; compact keeps the\nlatest record of each key. Kafka log.cleanup.policy.",
		set:   func(c *Config, v string) error { c.LogCleanupPolicy = strings.TrimSpace(v); return nil },
		get:   func(c *Config) string { return c.LogCleanupPolicy },
		check: func(c *Config) string {
			v := c.LogCleanupPolicy
			if err := topics.ValidateConfigValue("cleanup.policy", &v); err != nil {
				return "is not a cleanup policy; use delete, compact or compact,delete"
			}
			return ""
		},
	},
	{
		name:  "log-retention",
		def:   "168h",
		usage: "default retention.ms of topics: how long a segment is kept after its newest record; -1 keeps forever",
		doc:   "Kafka log.retention.hours. Time is taken from record timestamps, so records produced\nwith old timestamps expire sooner.",
		set: func(c *Config, v string) error {
			d, err := parseDurationOrMinusOne(v)
			c.LogRetention = d
			return err
		},
		get: func(c *Config) string { return formatDurationOrMinusOne(c.LogRetention) },
		check: func(c *Config) string {
			if c.LogRetention < 0 && c.LogRetention != -1 {
				return "is negative; use -1 to keep data forever, or a duration such as 168h"
			}
			return ""
		},
	},
	{
		name:  "log-retention-bytes",
		def:   "-1",
		usage: "default retention.bytes of topics: largest size of a partition before its oldest segments are deleted; -1 means no limit",
		doc:   "Accepts a byte size such as 10GiB. Kafka log.retention.bytes.",
		set: func(c *Config, v string) error {
			if strings.TrimSpace(v) == "-1" {
				c.LogRetentionBytes = -1
				return nil
			}
			n, err := parseByteSize(v)
			c.LogRetentionBytes = n
			return err
		},
		get: func(c *Config) string {
			if c.LogRetentionBytes < 0 {
				return "-1"
			}
			return formatByteSize(c.LogRetentionBytes, 10)
		},
	},
	byteSizeKey(keyInfo{name: "log-segment-bytes", def: "1GiB", usage: "default segment.bytes of topics: size at which a segment, the unit of retention and compaction, closes", doc: "Kafka log.segment.bytes; at least 1MiB."},
		func(c *Config) *int64 { return &c.LogSegmentBytes }, 1<<20, math.MaxInt32),
	durationKey(keyInfo{name: "log-roll", def: "168h", usage: "default segment.ms of topics: age after which the next append closes a segment", doc: "Kafka log.roll.hours. Counted from the segment's first record timestamp."},
		func(c *Config) *time.Duration { return &c.LogRoll }, time.Millisecond, math.MaxInt64),
	durationKey(keyInfo{name: "log-cleaner-delete-retention", def: "24h", usage: "default delete.retention.ms of topics: how long compaction keeps a tombstone", doc: "Kafka log.cleaner.delete.retention.ms."},
		func(c *Config) *time.Duration { return &c.LogCleanerDeleteRetention }, 0, math.MaxInt64),
	durationKey(keyInfo{name: "log-cleaner-min-compaction-lag", def: "0s", usage: "default min.compaction.lag.ms of topics: shortest time a record stays uncompacted", doc: "Kafka log.cleaner.min.compaction.lag.ms."},
		func(c *Config) *time.Duration { return &c.LogCleanerMinCompactionLag }, 0, math.MaxInt64),
	{
		name:  "log-cleaner-min-cleanable-ratio",
		def:   "0.5",
		usage: "default min.cleanable.dirty.ratio of topics: share of uncompacted bytes that starts a compaction",
		doc:   "Between 0 and 1. Kafka log.cleaner.min.cleanable.ratio.",
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || math.IsNaN(f) {
				return errors.New("is not a number; use e.g. 0.5")
			}
			c.LogCleanerMinCleanableRatio = f
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(c.LogCleanerMinCleanableRatio, 'g', -1, 64) },
		check: func(c *Config) string {
			if r := c.LogCleanerMinCleanableRatio; r < 0 || r > 1 {
				return "is not between 0 and 1; use e.g. 0.5"
			}
			return ""
		},
	},
	durationKey(keyInfo{name: "log-retention-check-interval", def: "5m", usage: "how often retention looks for segments to delete", doc: "Kafka log.retention.check.interval.ms. In a cluster, also how often the leader of a replicated partition applies retention to it."},
		func(c *Config) *time.Duration { return &c.LogRetentionCheckInterval }, time.Millisecond, 24*time.Hour),
	durationKey(keyInfo{name: "log-cleaner-backoff", def: "15s", usage: "how long compaction waits before looking again when no partition needs it", doc: "Kafka log.cleaner.backoff.ms. A partition being compacted is compacted without pauses."},
		func(c *Config) *time.Duration { return &c.LogCleanerBackoff }, time.Millisecond, time.Hour),
	{
		name:   "log-cleaner-enable",
		def:    "true",
		usage:  "run compaction on topics whose cleanup.policy includes compact",
		doc:    "Kafka log.cleaner.enable. Without it compacted topics only grow.",
		isBool: true,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("is not true or false")
			}
			c.LogCleanerEnable = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(c.LogCleanerEnable) },
	},
	byteSizeKey(keyInfo{name: "log-cleaner-dedupe-buffer-size", def: "64MiB", usage: "memory for compaction's key map, which bounds the keys one compaction pass deduplicates", doc: "About 48 bytes per distinct key. Kafka log.cleaner.dedupe.buffer.size."},
		func(c *Config) *int64 { return &c.LogCleanerDedupeBufferSize }, 1<<20, 1<<40),
}

// compactionKeyBytes is the memory compaction's key map takes per key.
const compactionKeyBytes = 48

func parseDurationOrMinusOne(v string) (time.Duration, error) {
	t := strings.TrimSpace(v)
	if t == "-1" {
		return -1, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, errors.New("is not a duration; use e.g. 168h, 30m, or -1 for forever")
	}
	return d, nil
}

func formatDurationOrMinusOne(d time.Duration) string {
	if d == -1 {
		return "-1"
	}
	return formatDuration(d)
}

// topicBrokerDefaults maps the configuration to broker-wide defaults of
// topic configs (topics.Config.BrokerDefaults): a value is passed when the
// user set it or when it differs from Kafka's default, so DescribeConfigs
// reports STATIC_BROKER_CONFIG exactly for those.
func topicBrokerDefaults(c *Config) map[string]string {
	millis := func(d time.Duration) string {
		if d < 0 {
			return "-1"
		}
		return strconv.FormatInt(d.Milliseconds(), 10)
	}
	values := []struct{ key, topicConfig, value string }{
		{"message-max-bytes", "max.message.bytes", strconv.Itoa(int(c.MessageMaxBytes))},
		{"log-cleanup-policy", "cleanup.policy", c.LogCleanupPolicy},
		{"log-retention", "retention.ms", millis(c.LogRetention)},
		{"log-retention-bytes", "retention.bytes", strconv.FormatInt(max(c.LogRetentionBytes, -1), 10)},
		{"log-segment-bytes", "segment.bytes", strconv.FormatInt(c.LogSegmentBytes, 10)},
		{"log-roll", "segment.ms", millis(c.LogRoll)},
		{"log-cleaner-delete-retention", "delete.retention.ms", millis(c.LogCleanerDeleteRetention)},
		{"log-cleaner-min-compaction-lag", "min.compaction.lag.ms", millis(c.LogCleanerMinCompactionLag)},
		{"log-cleaner-min-cleanable-ratio", "min.cleanable.dirty.ratio", strconv.FormatFloat(c.LogCleanerMinCleanableRatio, 'g', -1, 64)},
	}
	out := map[string]string{}
	for _, v := range values {
		def, ok := topics.LookupConfigDef(v.topicConfig)
		if !ok {
			panic(fmt.Sprintf("logs: unknown topic config %s", v.topicConfig))
		}
		if _, set := c.source[v.key]; set || v.value != def.Default {
			out[v.topicConfig] = v.value
		}
	}
	return out
}

// compactionMapEntries is the compaction key map's bound in keys.
func compactionMapEntries(c *Config) int {
	return int(c.LogCleanerDedupeBufferSize / compactionKeyBytes)
}

// topicTasksConfig configures the retention and compaction loops.
func topicTasksConfig(c *Config, reg prometheus.Registerer) retention.TopicTasksConfig {
	return retention.TopicTasksConfig{
		RetentionCheckInterval: c.LogRetentionCheckInterval,
		CleanerBackoff:         c.LogCleanerBackoff,
		CleanerDisabled:        !c.LogCleanerEnable,
		Registerer:             reg,
	}
}
