package topics

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
)

func TestValidateConfigValue(t *testing.T) {
	ok := map[string][]string{
		"cleanup.policy":                          {"delete", "compact", "compact,delete", "delete, compact", ""},
		"retention.ms":                            {"-1", "0", "604800000", " 5 "},
		"retention.bytes":                         {"-1", "-5", "0", "1073741824"},
		"segment.bytes":                           {"1048576", "2147483647"},
		"segment.ms":                              {"1", "100"},
		"min.cleanable.dirty.ratio":               {"0", "0.01", "1", "0.5"},
		"message.timestamp.type":                  {"CreateTime", "LogAppendTime"},
		"compression.type":                        {"producer", "zstd", "uncompressed"},
		"compression.gzip.level":                  {"-1", "1", "9"},
		"compression.zstd.level":                  {"-131072", "22"},
		"preallocate":                             {"true", "FALSE"},
		"leader.replication.throttled.replicas":   {"", "*", "0:1,1:2"},
		"remote.storage.enable":                   {"false"},
		"max.message.bytes":                       {"0", "1048588"},
		"message.timestamp.difference.max.ms":     {"0", "9223372036854775807"},
		"internal.segment.bytes":                  {"100"},
		"follower.replication.throttled.replicas": {"3:1"},
	}
	for name, values := range ok {
		for _, v := range values {
			if err := ValidateConfigValue(name, &v); err != nil {
				t.Errorf("%s=%q: %v", name, v, err)
			}
		}
	}
	bad := []struct{ name, value, want string }{
		{"no.such.config", "1", "unknown topic config name: no.such.config"},
		{"cleanup.policy", "bogus", "string must be one of: delete, compact"},
		{"cleanup.policy", "Compact", "string must be one of"},
		{"cleanup.policy", "compact,compact", "must not be duplicated"},
		{"cleanup.policy", "compact,", "empty element"},
		{"retention.ms", "soon", "not a number"},
		{"retention.ms", "-2", "at least -1"},
		{"retention.ms", "9223372036854775808", "not a 64-bit integer"},
		{"segment.bytes", "1048575", "at least 1048576"},
		{"segment.bytes", "2147483648", "not a 32-bit integer"},
		{"segment.ms", "0", "at least 1"},
		{"min.cleanable.dirty.ratio", "1.5", "between 0 and 1"},
		{"min.cleanable.dirty.ratio", "NaN", "not a number"},
		{"message.timestamp.type", "createtime", "string must be one of"},
		{"compression.type", "brotli", "string must be one of"},
		{"compression.gzip.level", "0", "-1 or between 1 and 9"},
		{"compression.lz4.level", "18", "no more than 17"},
		{"preallocate", "yes", "true or false"},
		{"leader.replication.throttled.replicas", "1-2", "[PartitionId]:[BrokerId]"},
		{"remote.storage.enable", "true", "tiered storage"},
		{"max.compaction.lag.ms", "0", "at least 1"},
		{"delete.retention.ms", "-1", "at least 0"},
	}
	for _, c := range bad {
		v := c.value
		err := ValidateConfigValue(c.name, &v)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: %v, want ErrInvalidConfig containing %q", c.name, c.value, err, c.want)
		}
	}
	if err := ValidateConfigValue("retention.ms", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("null value: %v", err)
	}
	err := ValidateTopicConfigs(map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, nil)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)") {
		t.Errorf("lag conflict: %v", err)
	}
	// The rule uses the broker default of the config the topic leaves out.
	if err := ValidateTopicConfigs(map[string]string{"min.compaction.lag.ms": "10"}, map[string]string{"max.compaction.lag.ms": "5"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("lag conflict with a broker default: %v", err)
	}
}

func TestApplyConfigOps(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name    string
		current map[string]string
		ops     []ConfigOp
		want    map[string]string
		err     error
	}{
		{"set and delete", map[string]string{"retention.ms": "1", "segment.ms": "5"},
			[]ConfigOp{{Name: "retention.ms", Op: ConfigOpSet, Value: str("2")}, {Name: "segment.ms", Op: ConfigOpDelete}},
			map[string]string{"retention.ms": "2"}, nil},
		{"delete of an unset config is a no-op", nil,
			[]ConfigOp{{Name: "segment.ms", Op: ConfigOpDelete}, {Name: "no.such", Op: ConfigOpDelete}}, map[string]string{}, nil},
		{"append starts from the default", nil,
			[]ConfigOp{{Name: "cleanup.policy", Op: ConfigOpAppend, Value: str("compact")}},
			map[string]string{"cleanup.policy": "delete,compact"}, nil},
		{"append skips present values", map[string]string{"cleanup.policy": "compact"},
			[]ConfigOp{{Name: "cleanup.policy", Op: ConfigOpAppend, Value: str("compact,delete")}},
			map[string]string{"cleanup.policy": "compact,delete"}, nil},
		{"subtract", map[string]string{"cleanup.policy": "compact,delete"},
			[]ConfigOp{{Name: "cleanup.policy", Op: ConfigOpSubtract, Value: str("delete")}},
			map[string]string{"cleanup.policy": "compact"}, nil},
		{"append to a non-list", nil, []ConfigOp{{Name: "retention.ms", Op: ConfigOpAppend, Value: str("1")}}, nil, ErrInvalidConfig},
		{"subtract from an unknown config", nil, []ConfigOp{{Name: "nope", Op: ConfigOpSubtract, Value: str("1")}}, nil, ErrInvalidConfig},
		{"set null", nil, []ConfigOp{{Name: "retention.ms", Op: ConfigOpSet}}, nil, ErrInvalidRequest},
		{"unknown operation", nil, []ConfigOp{{Name: "retention.ms", Op: 9, Value: str("1")}}, nil, ErrInvalidRequest},
	}
	for _, c := range cases {
		got, err := applyConfigOps(c.current, nil, c.ops)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s=%q, want %q", c.name, k, got[k], v)
			}
		}
	}
}

func TestAlterTopicConfigsPersist(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	if _, err := m.CreateTopic("c", 1, map[string]string{"retention.ms": "1000", "segment.ms": "50"}, false); err != nil {
		t.Fatal(err)
	}
	v := "compact"
	if err := m.AlterTopicConfigs("c", []ConfigOp{{Name: "cleanup.policy", Op: ConfigOpSet, Value: &v}, {Name: "segment.ms", Op: ConfigOpDelete}}, false); err != nil {
		t.Fatal(err)
	}
	bad := "x"
	if err := m.AlterTopicConfigs("c", []ConfigOp{{Name: "retention.ms", Op: ConfigOpSet, Value: &bad}}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad value: %v", err)
	}
	if err := m.AlterTopicConfigs("c", []ConfigOp{{Name: "retention.ms", Op: ConfigOpSet, Value: &v}}, true); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("validate-only bad value: %v", err)
	}
	two := "2000"
	if err := m.AlterTopicConfigs("c", []ConfigOp{{Name: "retention.ms", Op: ConfigOpSet, Value: &two}}, true); err != nil {
		t.Fatal(err)
	}
	if err := m.AlterTopicConfigs("missing", nil, false); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	topic, _ := m.Topic("c")
	if got := topic.Configs(); len(got) != 2 || got["cleanup.policy"] != "compact" || got["retention.ms"] != "1000" {
		t.Fatalf("configs %v", got)
	}
	if !topic.isCompacted() {
		t.Fatal("settings not refreshed")
	}
	_ = store.Close()

	store, m = openTestManager(t, fs, "data")
	topic, _ = m.Topic("c")
	if got := topic.Configs(); len(got) != 2 || got["cleanup.policy"] != "compact" || !topic.isCompacted() {
		t.Fatalf("after restart: %v", got)
	}
	// AlterConfigs replaces the whole set.
	if err := m.ReplaceTopicConfigs("c", map[string]string{"max.message.bytes": "100"}, false); err != nil {
		t.Fatal(err)
	}
	if got := topic.Configs(); len(got) != 1 || got["max.message.bytes"] != "100" || topic.isCompacted() || topic.maxMessageBytes() != 100 {
		t.Fatalf("after replace: %v", got)
	}
	if err := m.ReplaceTopicConfigs("c", map[string]string{"unknown.x": "1"}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("replace with an unknown config: %v", err)
	}
	_ = store.Close()
}

func TestCreatePartitions(t *testing.T) {
	fs := vfs.NewMem()
	store, m := openTestManager(t, fs, "data")
	topic, _ := m.CreateTopic("grow", 2, nil, false)
	for _, c := range []struct {
		count int32
		err   string
	}{{2, "already has 2"}, {1, "would not be an increase"}, {20000, "the limit is 10000"}} {
		if err := m.CreatePartitions("grow", c.count, false); !errors.Is(err, ErrInvalidPartitions) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("count %d: %v", c.count, err)
		}
	}
	if err := m.CreatePartitions("nope", 3, false); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	if err := m.CreatePartitions("grow", 4, true); err != nil || topic.NumPartitions() != 2 {
		t.Fatalf("validate only: %v, %d partitions", err, topic.NumPartitions())
	}
	if err := m.CreatePartitions("grow", 4, false); err != nil || topic.NumPartitions() != 4 {
		t.Fatalf("grow: %v, %d partitions", err, topic.NumPartitions())
	}
	p3, _ := topic.Partition(3)
	if a := appendOne(t, m, p3, testBatch(t, "x", 2, -1, -1, -1, 100)); a.Err != nil || a.BaseOffset != 0 {
		t.Fatalf("append to a new partition: %v base %d", a.Err, a.BaseOffset)
	}
	_ = store.Close()
	store, m = openTestManager(t, fs, "data")
	defer store.Close()
	topic, _ = m.Topic("grow")
	p3, _ = topic.Partition(3)
	if topic.NumPartitions() != 4 || p3.HighWatermark() != 2 {
		t.Fatalf("after restart: %d partitions, hwm %d", topic.NumPartitions(), p3.HighWatermark())
	}
}

func TestEffectiveConfigSources(t *testing.T) {
	store, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := Open(store, Config{Logger: zerolog.Nop(), DefaultPartitions: 1, BrokerDefaults: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := m.CreateTopic("s", 1, map[string]string{"segment.ms": "10"}, false)
	got := map[string]ConfigEntry{}
	for _, e := range topic.EffectiveConfigs() {
		got[e.Def.Name] = e
	}
	if _, ok := got["internal.segment.bytes"]; ok {
		t.Error("internal config listed")
	}
	for name, want := range map[string]struct {
		value  string
		source ConfigSource
	}{
		"segment.ms":     {"10", SourceTopic},
		"retention.ms":   {"1000", SourceStaticBroker},
		"cleanup.policy": {"delete", SourceDefault},
	} {
		if e := got[name]; e.Value != want.value || e.Source != want.source {
			t.Errorf("%s: %q source %d, want %q source %d", name, e.Value, e.Source, want.value, want.source)
		}
	}
	if s := topic.currentSettings(); s.retentionMs != 1000 || s.segmentMs != 10 || !s.delete || s.compact {
		t.Errorf("settings %+v", s)
	}
	bad := Config{DefaultPartitions: 1, BrokerDefaults: map[string]string{"retention.ms": "x"}}
	if err := bad.Validate(); err == nil {
		t.Error("a bad broker default validated")
	}
}
