package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLogConfigKeys: the log retention and compaction keys parse, reject
// bad values with a sentence, and become topic config defaults only when
// set or different from Kafka's.
func TestLogConfigKeys(t *testing.T) {
	if got := topicBrokerDefaults(defaultConfig()); len(got) != 0 {
		t.Errorf("defaults pass broker defaults %v; want none (all equal Kafka's)", got)
	}
	c, err := loadConfig("", []string{
		"BROKER_LOG_CLEANUP_POLICY=compact,delete",
		"BROKER_LOG_RETENTION=-1",
		"BROKER_LOG_RETENTION_BYTES=10GiB",
		"BROKER_LOG_SEGMENT_BYTES=1GiB", // the default, but set: reported as set
		"BROKER_LOG_ROLL=1h",
		"BROKER_LOG_CLEANER_DELETE_RETENTION=10m",
		"BROKER_LOG_CLEANER_MIN_COMPACTION_LAG=1s",
		"BROKER_LOG_CLEANER_MIN_CLEANABLE_RATIO=0.25",
		"BROKER_LOG_RETENTION_CHECK_INTERVAL=100ms",
		"BROKER_LOG_CLEANER_BACKOFF=1s",
		"BROKER_LOG_CLEANER_ENABLE=false",
		"BROKER_LOG_CLEANER_DEDUPE_BUFFER_SIZE=48MiB",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cleanup.policy":            "compact,delete",
		"retention.ms":              "-1",
		"retention.bytes":           "10737418240",
		"segment.bytes":             "1073741824",
		"segment.ms":                "3600000",
		"delete.retention.ms":       "600000",
		"min.compaction.lag.ms":     "1000",
		"min.cleanable.dirty.ratio": "0.25",
	}
	if got := topicBrokerDefaults(c); !reflect.DeepEqual(got, want) {
		t.Errorf("broker defaults\n got %v\nwant %v", got, want)
	}
	if n := compactionMapEntries(c); n != 48<<20/compactionKeyBytes {
		t.Errorf("compaction map entries %d", n)
	}
	tc := topicTasksConfig(c, nil)
	if tc.RetentionCheckInterval != 100*time.Millisecond || tc.CleanerBackoff != time.Second || !tc.CleanerDisabled {
		t.Errorf("tasks config %+v", tc)
	}

	for _, bad := range []struct{ env, want string }{
		{"BROKER_LOG_CLEANUP_POLICY=forever", `log-cleanup-policy "forever"`},
		{"BROKER_LOG_RETENTION=7d", "is not a duration; use e.g. 168h, 30m, or -1 for forever"},
		{"BROKER_LOG_RETENTION=-5s", "is negative; use -1"},
		{"BROKER_LOG_RETENTION_BYTES=-2", "is not a byte size"},
		{"BROKER_LOG_SEGMENT_BYTES=1000", `log-segment-bytes "1000"`},
		{"BROKER_LOG_CLEANER_MIN_CLEANABLE_RATIO=1.5", "is not between 0 and 1"},
		{"BROKER_LOG_CLEANER_MIN_CLEANABLE_RATIO=half", "is not a number"},
		{"BROKER_LOG_RETENTION_CHECK_INTERVAL=0s", "is shorter than 1ms"},
		{"BROKER_LOG_CLEANER_ENABLE=maybe", "is not true or false"},
	} {
		c, err := loadConfig("", []string{bad.env}, nil)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error containing %q", bad.env, err, bad.want)
		}
	}
}
