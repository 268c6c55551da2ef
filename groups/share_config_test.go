package groups

import (
	"errors"
	"reflect"
	"testing"
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
		{ShareAutoOffsetResetConfig, "by_duration:PT1H", false},
		{ShareRecordLockDurationConfig, "999", false},
		{ShareRecordLockDurationConfig, "1000", true},
		{ShareDeliveryCountLimitConfig, "0", false},
		{ShareDeliveryCountLimitConfig, "10", true},
		{"share.isolation.level", "read_committed", false},
	} {
		err := checkGroupConfig(c.name, c.value)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidGroupConfig)) {
			t.Errorf("%s=%s: %v, want ok=%v", c.name, c.value, err, c.ok)
		}
	}
}
