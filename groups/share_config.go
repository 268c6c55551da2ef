package groups

// Group configs of share groups (KIP-932 "Group configuration", Kafka's
// GroupConfig): share.auto.offset.reset, share.record.lock.duration.ms,
// share.session.timeout.ms, share.heartbeat.interval.ms and
// share.delivery.count.limit (ours: Kafka 4.2 has it as a broker config
// only), set per group with
// IncrementalAlterConfigs on GROUP resources, before or after the group
// exists (as in Kafka). A group without one uses the broker's setting
// (group-share-auto-offset-reset, group-share-record-lock-duration,
// group-share-delivery-count-limit, group-consumer-session-timeout,
// group-consumer-heartbeat-interval).
//
// Row (pebblestore key 0x25 | group name): u16 count | count x (u16 name
// length | name | u16 value length | value).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// Share group config names (Kafka GroupConfig).
const (
	ShareAutoOffsetResetConfig    = "share.auto.offset.reset"
	ShareRecordLockDurationConfig = "share.record.lock.duration.ms"
	ShareDeliveryCountLimitConfig = "share.delivery.count.limit"
	ShareSessionTimeoutConfig     = "share.session.timeout.ms"
	ShareHeartbeatIntervalConfig  = "share.heartbeat.interval.ms"
	ShareIsolationLevelConfig     = "share.isolation.level"
)

// Values of share.isolation.level (Kafka's default is read_uncommitted).
const (
	ShareReadUncommitted = "read_uncommitted"
	ShareReadCommitted   = "read_committed"
)

// shareConfigNames are the group configs served, in DescribeConfigs order.
var shareConfigNames = []string{ShareAutoOffsetResetConfig, ShareDeliveryCountLimitConfig, ShareHeartbeatIntervalConfig,
	ShareIsolationLevelConfig, ShareRecordLockDurationConfig, ShareSessionTimeoutConfig}

// ErrInvalidGroupConfig is a group config name or value this broker does
// not accept (Kafka INVALID_CONFIG).
var ErrInvalidGroupConfig = errors.New("groups: invalid group config")

// GroupConfigEntry is one group config with its effective value; Set
// tells a value set on the group from the broker's default.
type GroupConfigEntry struct {
	Name, Value string
	Set         bool
}

// GroupConfigOp is one IncrementalAlterConfigs operation: Delete returns
// the config to the broker's default, else Value is set.
type GroupConfigOp struct {
	Name   string
	Delete bool
	Value  string
}

func shareConfigKey(group string) []byte {
	return append([]byte{pebblestore.PrefixShareGroupConfig}, group...)
}

func checkGroupConfig(name, value string) error {
	switch name {
	case ShareAutoOffsetResetConfig:
		if _, isDuration, err := parseShareByDuration(value); isDuration && err != nil {
			return fmt.Errorf("%w: %s is %q: %v", ErrInvalidGroupConfig, name, value, err)
		} else if !isDuration && value != "latest" && value != "earliest" {
			return fmt.Errorf("%w: %s is %q; use latest, earliest or by_duration:<ISO 8601 duration> (e.g. by_duration:PT1H)", ErrInvalidGroupConfig, name, value)
		}
	case ShareRecordLockDurationConfig:
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 1000 || n > 3600000 {
			return fmt.Errorf("%w: %s is %q; use 1000 to 3600000 milliseconds", ErrInvalidGroupConfig, name, value)
		}
	case ShareDeliveryCountLimitConfig:
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("%w: %s is %q; use 1 to 1000", ErrInvalidGroupConfig, name, value)
		}
	case ShareIsolationLevelConfig:
		if value != ShareReadUncommitted && value != ShareReadCommitted {
			return fmt.Errorf("%w: %s is %q; use %s or %s", ErrInvalidGroupConfig, name, value, ShareReadUncommitted, ShareReadCommitted)
		}
	case ShareSessionTimeoutConfig, ShareHeartbeatIntervalConfig:
		// The range depends on the broker's settings: checkShareTiming.
		if n, err := strconv.ParseInt(value, 10, 32); err != nil || n < 1 {
			return fmt.Errorf("%w: %s is %q; use a number of milliseconds", ErrInvalidGroupConfig, name, value)
		}
	default:
		return fmt.Errorf("%w: unknown group config %q; this broker serves %s", ErrInvalidGroupConfig, name, strings.Join(shareConfigNames, ", "))
	}
	return nil
}

// Bounds of share.session.timeout.ms and share.heartbeat.interval.ms:
// Kafka's defaults of group.share.{min,max}.session.timeout.ms (45 s, 60
// s) and group.share.{min,max}.heartbeat.interval.ms (5 s, 15 s), widened
// to the broker's own group-consumer-session-timeout and
// group-consumer-heartbeat-interval (which share groups use by default).
const (
	shareSessionTimeoutMinMs    = 45000
	shareSessionTimeoutMaxMs    = 60000
	shareHeartbeatIntervalMinMs = 5000
	shareHeartbeatIntervalMaxMs = 15000
)

// checkShareTiming checks a group's session timeout and heartbeat
// interval as they would be with configs (its configs after a change):
// each within its bounds, the heartbeat below the session timeout, as
// Kafka's GroupConfig.validate.
func (c *Coordinator) checkShareTiming(configs map[string]string) error {
	session, heartbeat := c.shareTiming(configs)
	brokerSession, brokerHeartbeat := c.cfg.ConsumerSessionTimeout.Milliseconds(), c.cfg.ConsumerHeartbeatInterval.Milliseconds()
	bounds := []struct {
		name          string
		value, lo, hi int64
	}{
		{ShareSessionTimeoutConfig, session.Milliseconds(), min(shareSessionTimeoutMinMs, brokerSession), max(shareSessionTimeoutMaxMs, brokerSession)},
		{ShareHeartbeatIntervalConfig, heartbeat.Milliseconds(), min(shareHeartbeatIntervalMinMs, brokerHeartbeat), max(shareHeartbeatIntervalMaxMs, brokerHeartbeat)},
	}
	for _, b := range bounds {
		if _, set := configs[b.name]; set && (b.value < b.lo || b.value > b.hi) {
			return fmt.Errorf("%w: %s is %d; use %d to %d", ErrInvalidGroupConfig, b.name, b.value, b.lo, b.hi)
		}
	}
	if heartbeat >= session {
		return fmt.Errorf("%w: %s (%d) must be less than %s (%d)", ErrInvalidGroupConfig,
			ShareHeartbeatIntervalConfig, heartbeat.Milliseconds(), ShareSessionTimeoutConfig, session.Milliseconds())
	}
	return nil
}

// shareTiming is the session timeout and heartbeat interval of a group
// with configs: its own, else the broker's.
func (c *Coordinator) shareTiming(configs map[string]string) (session, heartbeat time.Duration) {
	session, heartbeat = c.cfg.ConsumerSessionTimeout, c.cfg.ConsumerHeartbeatInterval
	if v, err := strconv.ParseInt(configs[ShareSessionTimeoutConfig], 10, 64); err == nil {
		session = time.Duration(v) * time.Millisecond
	}
	if v, err := strconv.ParseInt(configs[ShareHeartbeatIntervalConfig], 10, 64); err == nil {
		heartbeat = time.Duration(v) * time.Millisecond
	}
	return session, heartbeat
}

// shareByDurationPrefix starts a share.auto.offset.reset of the form
// by_duration:<duration> (KIP-1106 as KIP-932 takes it over).
const shareByDurationPrefix = "by_duration:"

// shareISODuration is java.time.Duration.parse's ISO 8601 form without a
// sign: PnDTnHnMn.nS (days, hours, minutes, seconds with up to 9
// decimals), case-insensitive, at least one part.
var shareISODuration = regexp.MustCompile(`^(?i)P(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+)(?:[.,]([0-9]{1,9}))?S)?)?$`)

// parseShareByDuration reads a share.auto.offset.reset value of the form
// by_duration:<ISO 8601 duration>: isDuration says whether value has the
// prefix; err, when it has, whether the duration is one Kafka accepts
// (GroupConfig: ISO 8601, PnDTnHnMn.nS, not negative).
func parseShareByDuration(value string) (d time.Duration, isDuration bool, err error) {
	rest, ok := strings.CutPrefix(strings.ToLower(value), shareByDurationPrefix)
	if !ok {
		return 0, false, nil
	}
	m := shareISODuration.FindStringSubmatch(rest)
	if m == nil || strings.HasSuffix(strings.ToUpper(rest), "T") || strings.EqualFold(rest, "P") {
		return 0, true, fmt.Errorf("the duration %q is not ISO 8601 (PnDTnHnMn.nS, e.g. PT1H30M, P2D); negative durations are not allowed", rest)
	}
	const limit = int64(math.MaxInt64 / 2)
	var total int64
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > limit/int64(unit) || total > limit-n*int64(unit) {
			return 0, true, fmt.Errorf("the duration %q is too long", rest)
		}
		total += n * int64(unit)
	}
	if frac := m[5]; frac != "" {
		n, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		total += n
	}
	return time.Duration(total), true, nil
}

// ShareGroupConfigs lists the share group configs of group, effective
// values included.
func (c *Coordinator) ShareGroupConfigs(group string) []GroupConfigEntry {
	c.share.mu.Lock()
	set := c.share.configs[group]
	c.share.mu.Unlock()
	defaults := map[string]string{
		ShareAutoOffsetResetConfig:    c.cfg.ShareAutoOffsetReset,
		ShareRecordLockDurationConfig: strconv.FormatInt(c.cfg.ShareRecordLockDuration.Milliseconds(), 10),
		ShareDeliveryCountLimitConfig: strconv.Itoa(c.cfg.ShareDeliveryCountLimit),
		ShareSessionTimeoutConfig:     strconv.FormatInt(c.cfg.ConsumerSessionTimeout.Milliseconds(), 10),
		ShareHeartbeatIntervalConfig:  strconv.FormatInt(c.cfg.ConsumerHeartbeatInterval.Milliseconds(), 10),
		ShareIsolationLevelConfig:     ShareReadUncommitted,
	}
	var out []GroupConfigEntry
	for _, name := range shareConfigNames {
		e := GroupConfigEntry{Name: name, Value: defaults[name]}
		if v, ok := set[name]; ok {
			e.Value, e.Set = v, true
		}
		out = append(out, e)
	}
	return out
}

// AlterShareGroupConfigs applies ops to group's configs, all or none,
// durably; validateOnly checks them only.
func (c *Coordinator) AlterShareGroupConfigs(group string, ops []GroupConfigOp, validateOnly bool) error {
	if group == "" {
		return fmt.Errorf("%w: the group name is empty", ErrInvalidRequest)
	}
	s := &c.share
	s.mu.Lock()
	next, err := c.NextShareGroupConfigs(s.configs[group], ops)
	if err != nil || validateOnly {
		s.mu.Unlock()
		return err
	}
	w := c.storeShareConfigsLocked(group, next)
	s.mu.Unlock()
	return w.wait()
}

// checkGroupConfigOps checks each operation's name and value alone.
func checkGroupConfigOps(ops []GroupConfigOp) error {
	for _, op := range ops {
		if op.Delete {
			if !slices.Contains(shareConfigNames, op.Name) {
				return checkGroupConfig(op.Name, "")
			}
			continue
		}
		if err := checkGroupConfig(op.Name, op.Value); err != nil {
			return err
		}
	}
	return nil
}

// NextShareGroupConfigs is a group's configs after ops, from current
// (not changed), checked as AlterShareGroupConfigs checks them
// (ErrInvalidGroupConfig); nothing is stored. A cluster computes a
// metadata record from it (cmd/broker).
func (c *Coordinator) NextShareGroupConfigs(current map[string]string, ops []GroupConfigOp) (map[string]string, error) {
	if err := checkGroupConfigOps(ops); err != nil {
		return nil, err
	}
	next := maps.Clone(current)
	if next == nil {
		next = map[string]string{}
	}
	for _, op := range ops {
		if op.Delete {
			delete(next, op.Name)
		} else {
			next[op.Name] = op.Value
		}
	}
	if err := c.checkShareTiming(next); err != nil {
		return nil, err
	}
	return next, nil
}

// SetShareGroupConfigs stores group's configs as a cluster's metadata
// has them (record 9, checked by the proposing broker), durably: empty
// configs remove them. Called in log order by the metadata's apply.
func (c *Coordinator) SetShareGroupConfigs(group string, configs map[string]string) error {
	c.share.mu.Lock()
	w := c.storeShareConfigsLocked(group, maps.Clone(configs))
	c.share.mu.Unlock()
	return w.wait()
}

// SyncShareGroupConfigs stores every group's configs as a restored
// metadata snapshot has them (all); removeOthers also removes the configs
// of groups all lacks (a snapshot newer than anything applied here, where
// a missing group's configs were removed). One durable batch.
func (c *Coordinator) SyncShareGroupConfigs(all map[string]map[string]string, removeOthers bool) error {
	s := &c.share
	s.mu.Lock()
	var gone []string
	for g := range s.configs {
		if _, ok := all[g]; !ok && removeOthers {
			gone = append(gone, g)
		}
	}
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		for _, g := range gone {
			b.Delete(shareConfigKey(g))
		}
		for g, m := range all {
			if len(m) > 0 {
				b.Set(shareConfigKey(g), encodeGroupConfigs(m))
			}
		}
	})
	if w.errOrNil() == nil {
		for _, g := range gone {
			delete(s.configs, g)
		}
		for g, m := range all {
			if len(m) > 0 {
				s.configs[g] = maps.Clone(m)
			}
		}
	}
	s.mu.Unlock()
	return w.wait()
}

// storeShareConfigsLocked writes group's configs (none when empty) to its
// row and the in-memory map. REQUIRES: share.mu held.
func (c *Coordinator) storeShareConfigsLocked(group string, next map[string]string) *shareWrite {
	s := &c.share
	w := c.applyShareLocked(func(b *pebblestore.Batch) {
		if len(next) == 0 {
			b.Delete(shareConfigKey(group))
		} else {
			b.Set(shareConfigKey(group), encodeGroupConfigs(next))
		}
	})
	if w.errOrNil() == nil {
		if len(next) == 0 {
			delete(s.configs, group)
		} else {
			s.configs[group] = next
		}
	}
	return w
}

func encodeGroupConfigs(m map[string]string) []byte {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	out := binary.BigEndian.AppendUint16(nil, uint16(len(names)))
	for _, k := range names {
		out = binary.BigEndian.AppendUint16(out, uint16(len(k)))
		out = append(out, k...)
		out = binary.BigEndian.AppendUint16(out, uint16(len(m[k])))
		out = append(out, m[k]...)
	}
	return out
}

func decodeGroupConfigs(b []byte) (map[string]string, error) {
	if len(b) < 2 {
		return nil, errors.New("group config row shorter than its count")
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	out := make(map[string]string, n)
	for range n {
		var kv [2]string
		for i := range kv {
			if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
				return nil, errors.New("group config row ends inside an entry")
			}
			l := int(binary.BigEndian.Uint16(b))
			kv[i] = string(b[2 : 2+l])
			b = b[2+l:]
		}
		out[kv[0]] = kv[1]
	}
	return out, nil
}

// recoverShareConfigs reads the group config rows. REQUIRES: called from
// recoverShare.
func (c *Coordinator) recoverShareConfigs() error {
	c.share.configs = map[string]map[string]string{}
	lower := []byte{pebblestore.PrefixShareGroupConfig}
	it, err := c.store.NewIter(lower, pebblestore.PrefixEnd(lower))
	if err != nil {
		return err
	}
	defer func() { _ = it.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.Value()
		if err != nil {
			return err
		}
		m, err := decodeGroupConfigs(val)
		if err != nil {
			return fmt.Errorf("%w: group %q: %v", pebblestore.ErrCorruption, it.Key()[1:], err)
		}
		c.share.configs[string(it.Key()[1:])] = m
	}
	return nil
}

// shareLimitsLocked are group's delivery settings. REQUIRES: share.mu held.
func (c *Coordinator) shareLimitsLocked(group string) shareLimits {
	lim := shareLimits{lock: c.cfg.ShareRecordLockDuration, deliveryLimit: int16(c.cfg.ShareDeliveryCountLimit), maxInFlight: c.cfg.ShareMaxRecordLocks}
	set := c.share.configs[group]
	if v, ok := set[ShareRecordLockDurationConfig]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			lim.lock = time.Duration(n) * time.Millisecond
		}
	}
	if v, ok := set[ShareDeliveryCountLimitConfig]; ok {
		if n, err := strconv.ParseInt(v, 10, 16); err == nil {
			lim.deliveryLimit = int16(n)
		}
	}
	return lim
}

// shareReadCommittedLocked says whether group's share.isolation.level is
// read_committed. REQUIRES: share.mu held.
func (c *Coordinator) shareReadCommittedLocked(group string) bool {
	return c.share.configs[group][ShareIsolationLevelConfig] == ShareReadCommitted
}

// shareResetLocked is group's share.auto.offset.reset. REQUIRES: share.mu
// held.
func (c *Coordinator) shareResetLocked(group string) string {
	if v, ok := c.share.configs[group][ShareAutoOffsetResetConfig]; ok {
		return v
	}
	return c.cfg.ShareAutoOffsetReset
}
