package groups

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestGroupConfigRowRoundTrip(t *testing.T) {
	m := map[string]string{ShareAutoOffsetResetConfig: "earliest", ShareRecordLockDurationConfig: "15000"}
	back, err := decodeGroupConfigs(encodeGroupConfigs(m))
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("decoded %v, %v; want %v", back, err, m)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1}, {0, 1, 0, 5, 'a'}, {0, 1, 0, 1, 'a', 0, 9}} {
		if _, err := decodeGroupConfigs(bad); err == nil {
			t.Errorf("decoding %x: no error", bad)
		}
	}
}

func TestCheckGroupConfig(t *testing.T) {
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{ShareAutoOffsetResetConfig, "earliest", true},
		{ShareAutoOffsetResetConfig, "by_duration:PT1H", true},
		{ShareAutoOffsetResetConfig, "by_duration:-PT1H", false},
		{ShareAutoOffsetResetConfig, "by_duration:PT", false},
		{ShareAutoOffsetResetConfig, "sometimes", false},
		{ShareRecordLockDurationConfig, "999", false},
		{ShareRecordLockDurationConfig, "1000", true},
		{ShareDeliveryCountLimitConfig, "0", false},
		{ShareDeliveryCountLimitConfig, "10", true},
		{ShareIsolationLevelConfig, "read_committed", true},
		{ShareIsolationLevelConfig, "serializable", false},
		{ShareSessionTimeoutConfig, "50000", true}, // its range: checkShareTiming
		{ShareHeartbeatIntervalConfig, "soon", false},
	} {
		err := checkGroupConfig(c.name, c.value)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidGroupConfig)) {
			t.Errorf("%s=%s: %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
}

// TestParseShareByDuration: the ISO 8601 durations Java's Duration.parse
// takes without a sign (Kafka's GroupConfig refuses negative ones).
func TestParseShareByDuration(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"by_duration:PT1H", time.Hour, true},
		{"by_duration:P2D", 48 * time.Hour, true},
		{"BY_DURATION:pt1h30m", 90 * time.Minute, true},
		{"by_duration:P1DT2H3M4.5S", 26*time.Hour + 3*time.Minute + 4500*time.Millisecond, true},
		{"by_duration:PT0.000000001S", time.Nanosecond, true},
		{"by_duration:PT0S", 0, true},
		{"by_duration:P", 0, false},
		{"by_duration:PT", 0, false},
		{"by_duration:P1DT", 0, false},
		{"by_duration:-PT1H", 0, false},
		{"by_duration:PT-1H", 0, false},
		{"by_duration:1h", 0, false},
		{"by_duration:P1Y", 0, false},
		{"by_duration:PT99999999999999999999H", 0, false},
	} {
		d, isDuration, err := parseShareByDuration(c.value)
		if !isDuration || (err == nil) != c.ok || d != c.want {
			t.Errorf("%s: %v, %v, %v; want %v ok=%v", c.value, d, isDuration, err, c.want, c.ok)
		}
	}
	if _, isDuration, _ := parseShareByDuration("earliest"); isDuration {
		t.Error("earliest read as a duration")
	}
}

// TestShareTimingConfigBounds: share.session.timeout.ms and
// share.heartbeat.interval.ms take Kafka's default bounds widened to the
// broker's own settings, and the heartbeat must stay below the session
// timeout, counting the configs the group has already.
func TestShareTimingConfigBounds(t *testing.T) {
	h := newHarness(t, Config{ConsumerSessionTimeout: 10 * time.Second, ConsumerHeartbeatInterval: time.Second})
	set := func(name, value string) error {
		return h.c.AlterShareGroupConfigs("g", []GroupConfigOp{{Name: name, Value: value}}, false)
	}
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{ShareSessionTimeoutConfig, "9999", false}, // below the broker's 10 s
		{ShareSessionTimeoutConfig, "10000", true},
		{ShareSessionTimeoutConfig, "60001", false},
		{ShareHeartbeatIntervalConfig, "999", false},
		{ShareHeartbeatIntervalConfig, "10000", false}, // not below the group's 10 s session
		{ShareHeartbeatIntervalConfig, "9000", true},
		{ShareSessionTimeoutConfig, "60000", true},
		{ShareHeartbeatIntervalConfig, "15001", false},
	} {
		if err := set(c.name, c.value); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidGroupConfig)) {
			t.Errorf("%s=%s: %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
	h.c.share.mu.Lock()
	session, heartbeat := h.c.shareTiming(h.c.share.configs["g"])
	h.c.share.mu.Unlock()
	if session != time.Minute || heartbeat != 9*time.Second {
		t.Fatalf("effective timing %v / %v, want 1m / 9s", session, heartbeat)
	}
}
