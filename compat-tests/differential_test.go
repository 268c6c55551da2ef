package compattests

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The differential test (issue: the Java ecosystem, part 6a): the same
// request sequence goes to our broker and to Apache Kafka, at every version
// both advertise, and the responses are compared field by field after
// normalization (IDs, ports, throttle times, error message texts, which
// legitimately differ). A difference is either fixed or listed in
// diffDeviations with its reason (and in DESIGN.md, Deviations from Apache
// Kafka).

// diffCoverage collects the (API, version) pairs the scenarios compared
// and the ranges both brokers advertise.
type diffCoverage struct {
	mu     sync.Mutex
	seen   map[[2]int16]bool
	common map[int16][2]int16
}

func (c *diffCoverage) add(key, version int16, common map[int16][2]int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[[2]int16]bool{}
	}
	c.seen[[2]int16{key, version}] = true
	c.common = common
}

var diffCovered diffCoverage

// diffNotCompared are the (API, version) pairs both brokers advertise
// that no scenario compares, each with its reason. TestDifferential fails
// on any other pair left out.
var diffNotCompared = map[string]string{
	"Produce v0-v2": "message sets: we convert them (legacy clients), Kafka 4 answers UNSUPPORTED_VERSION (KIP-896; DESIGN.md, Deviations); TestSaramaLegacyVersions covers ours",
	"Fetch v0-v3":   "message sets: served here, removed in Kafka 4 (KIP-896)",
	// Share groups (KIP-932): compared by behaviour against both brokers
	// (share_test.go: TestShareGroupFranz, TestShareGroupConfigs), not
	// field by field: Kafka assigns after the join's answer and spreads
	// partitions over members, this broker assigns every partition at once.
	"ShareGroupHeartbeat v1":          "share groups: compared by behaviour in share_test.go (assignment timing and spread differ by design)",
	"ShareGroupDescribe v1":           "share groups: compared by behaviour in share_test.go (epochs and assignments differ by design)",
	"ShareFetch v1-v2":                "share groups: compared by behaviour in share_test.go (acquisition sizes are the broker's choice)",
	"ShareAcknowledge v1-v2":          "share groups: compared by behaviour in share_test.go",
	"DescribeShareGroupOffsets v0-v1": "share groups: compared by behaviour in share_test.go (start offsets and lag after every record is final) and share_offsets_describe_test.go (groups and partitions without state)",
	"AlterShareGroupOffsets v0":       "share groups: compared by behaviour in share_offsets_test.go (error codes, start offsets, what a consumer then gets)",
	"DeleteShareGroupOffsets v0":      "share groups: compared by behaviour in share_offsets_test.go (error codes, the describe after)",
}

// diffEnv is one broker's side of a differential run.
type diffEnv struct {
	t        *testing.T
	name     string // "broker" or "apache-kafka"
	addr     string
	conn     *rawConn
	versions map[int16][2]int16  // this broker's ranges
	common   map[int16][2]int16  // ranges both brokers advertise
	topicIDs map[string][16]byte // learned from Metadata responses
	out      []diffResult
}

// diffResult is one normalized response.
type diffResult struct {
	label  string
	fields map[string]string
}

// do sends req on the env's connection and records its normalized
// response under label.
func (e *diffEnv) do(label string, req kmsg.Request) kmsg.Response {
	e.t.Helper()
	return e.doFilter(label, req, nil)
}

// doRetry is do, repeating the request while retry says its answer is
// one a client retries (not yet served: nothing changed); the first other
// answer is recorded.
func (e *diffEnv) doRetry(label string, req kmsg.Request, retry func(kmsg.Response) bool) kmsg.Response {
	e.t.Helper()
	deadline := time.Now().Add(opTimeout)
	resp := e.conn.roundTrip(req)
	for retry(resp) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		resp = e.conn.roundTrip(req)
	}
	e.record(label, req, resp)
	return resp
}

// doFilter is do with filter applied to the response before it is
// recorded (to drop what other tests sharing the reference broker made).
func (e *diffEnv) doFilter(label string, req kmsg.Request, filter func(kmsg.Response)) kmsg.Response {
	e.t.Helper()
	resp := e.conn.roundTrip(req)
	if filter != nil {
		filter(resp)
	}
	e.record(label, req, resp)
	return resp
}

// record notes resp's normalized fields under label.
func (e *diffEnv) record(label string, req kmsg.Request, resp kmsg.Response) {
	if m, ok := resp.(*kmsg.MetadataResponse); ok {
		for _, t := range m.Topics {
			if t.Topic != nil && t.TopicID != ([16]byte{}) {
				e.topicIDs[*t.Topic] = t.TopicID
			}
		}
	}
	fields := map[string]string{}
	diffFlatten(reflect.ValueOf(resp).Elem(), "", fields)
	e.out = append(e.out, diffResult{label: fmt.Sprintf("%s v%d %s", kmsg.NameForKey(req.Key()), req.GetVersion(), label), fields: fields})
	if e.name == "broker" {
		diffCovered.add(req.Key(), req.GetVersion(), e.common)
	}
}

// each calls fn for every version of key that both brokers serve.
func (e *diffEnv) each(key kmsg.Key, fn func(v int16)) {
	r, ok := e.common[int16(key)]
	if !ok {
		return
	}
	for v := r[0]; v <= r[1]; v++ {
		fn(v)
	}
}

// diffIgnored are response fields whose values differ between any two
// correct brokers.
var diffIgnored = map[string]bool{
	"ThrottleMillis": true,
	"UnknownTags":    true,
	"ErrorMessage":   true, // texts differ; the code is compared
	"Message":        true,
	"Port":           true,
	"ClusterID":      true,
	"Version":        true,
	"Documentation":  true, // ours describe our behaviour in our words
	"Dir":            true, // each broker's own data directory
}

// diffPresence are fields compared only as set or unset (IDs each broker
// makes up).
var diffPresence = map[string]bool{
	"TopicID":                   true,
	"MemberID":                  true,
	"ProducerID":                true,
	"SessionID":                 true,
	"LeaderID":                  true,
	"Leader":                    true,
	"TransactionStartTimestamp": true,
	"StartTimestamp":            true,
	"TotalBytes":                true,
	"UsableBytes":               true,
}

// diffFlatten writes v's leaves into out as path -> value.
func diffFlatten(v reflect.Value, path string, out map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			out[path] = "null"
			return
		}
		diffFlatten(v.Elem(), path, out)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || diffIgnored[f.Name] {
				continue
			}
			p := path + "." + f.Name
			if diffPresence[f.Name] {
				out[p] = diffPresenceOf(v.Field(i))
				continue
			}
			diffFlatten(v.Field(i), p, out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// Record batches built by the test from the same bytes must
			// come back byte for byte.
			out[path] = fmt.Sprintf("%d bytes, crc32 %08x", v.Len(), crc32.ChecksumIEEE(v.Bytes()))
			return
		}
		out[path+".len"] = fmt.Sprint(v.Len())
		for i, k := range diffKeys(v) {
			diffFlatten(v.Index(i), fmt.Sprintf("%s[%s]", path, k), out)
		}
	case reflect.Array:
		out[path] = diffPresenceOf(v)
	default:
		out[path] = fmt.Sprint(v.Interface())
	}
}

// diffKeyFields name the elements of a list in paths, so that lists are
// compared by key: Kafka answers several APIs in hash-map order (clients
// match answers by name), and a path like Configs[retention.ms].Value
// reads better than an index.
var diffKeyFields = []string{"Topic", "Name", "Group", "TransactionalID", "User", "Partition", "ApiKey", "Key"}

// diffKeys returns each element's path key: its key field's value, or its
// index when it has none; a repeated key gets "#n" appended.
func diffKeys(v reflect.Value) []string {
	keys := make([]string, v.Len())
	et := v.Type().Elem()
	var field []int
	if et.Kind() == reflect.Struct {
		for _, name := range diffKeyFields {
			if f, ok := et.FieldByName(name); ok {
				field = f.Index
				break
			}
		}
	}
	seen := map[string]int{}
	for i := range keys {
		if field == nil {
			keys[i] = fmt.Sprint(i)
			continue
		}
		fv := v.Index(i).FieldByIndex(field)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				keys[i] = "null"
				continue
			}
			fv = fv.Elem()
		}
		k := fmt.Sprint(fv.Interface())
		if n := seen[k]; n > 0 {
			keys[i] = fmt.Sprintf("%s#%d", k, n)
		} else {
			keys[i] = k
		}
		seen[k]++
	}
	return keys
}

func diffPresenceOf(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "null"
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int64, reflect.Int32, reflect.Int16:
		// IDs and times: a negative value is a sentinel (-1: none),
		// anything else one the broker chose (0 is a valid producer ID).
		if v.Int() < 0 {
			return fmt.Sprint(v.Int())
		}
		return "set"
	}
	if v.IsZero() {
		return "zero"
	}
	return "set"
}

// diffRun runs scenario against both brokers and compares the responses.
// allow lists known deviations: response label prefix -> field path
// substring -> reason.
func diffRun(t *testing.T, scenario func(e *diffEnv), allow map[string]string, opts ...brokerOpt) {
	ours := startBroker(t, opts...).Addr()
	ref := referenceKafka(t)
	vOurs, vRef := apiVersions(t, ours), apiVersions(t, ref)
	common := map[int16][2]int16{}
	for k, a := range vOurs {
		if b, ok := vRef[k]; ok {
			lo, hi := max(a[0], b[0]), min(a[1], b[1])
			if lo <= hi {
				common[k] = [2]int16{lo, hi}
			}
		}
	}
	envs := []*diffEnv{
		{t: t, name: "broker", addr: ours, versions: vOurs, common: common, topicIDs: map[string][16]byte{}},
		{t: t, name: "apache-kafka", addr: ref, versions: vRef, common: common, topicIDs: map[string][16]byte{}},
	}
	for _, e := range envs {
		e.conn = dialRaw(t, e.addr)
		scenario(e)
	}
	a, b := envs[0].out, envs[1].out
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i].label != b[i].label {
			la, lb := "(none)", "(none)"
			if i < len(a) {
				la = a[i].label
			}
			if i < len(b) {
				lb = b[i].label
			}
			if i > 0 {
				t.Errorf("after %s:", a[i-1].label)
			}
			t.Fatalf("request %d: ours %q, Kafka %q: the answers before led the scenario apart", i, la, lb)
		}
		var diffs []string
		keys := map[string]bool{}
		for k := range a[i].fields {
			keys[k] = true
		}
		for k := range b[i].fields {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			x, okx := a[i].fields[k]
			y, oky := b[i].fields[k]
			if okx && oky && x == y {
				continue
			}
			if diffAllowed(allow, a[i].label, k) {
				continue
			}
			if !okx {
				x = "(absent)"
			}
			if !oky {
				y = "(absent)"
			}
			diffs = append(diffs, fmt.Sprintf("  %s: ours %s, kafka %s", k, x, y))
		}
		if len(diffs) > 0 {
			if len(diffs) > 200 {
				diffs = append(diffs[:200], fmt.Sprintf("  ... and %d more", len(diffs)-200))
			}
			t.Errorf("%s differs from Apache Kafka:\n%s", a[i].label, strings.Join(diffs, "\n"))
		}
	}
}

// diffAllowed reports whether allow has a key "label substring|path
// substring" matching this difference.
func diffAllowed(allow map[string]string, label, path string) bool {
	for k := range allow {
		l, p, _ := strings.Cut(k, "|")
		if strings.Contains(label, l) && strings.Contains(path, p) {
			return true
		}
	}
	return false
}

var _ = slices.Contains[[]string]

const diffGroupOps = "Kafka 4 lists DESCRIBE_CONFIGS and ALTER_CONFIGS for groups (group configs, KIP-848); we serve no GROUP config resource yet, so we do not claim them"

const diffMinISRSource = "min.insync.replicas: Kafka 4's KRaft format writes a cluster-wide dynamic default (source DYNAMIC_DEFAULT_BROKER_CONFIG); we have no dynamic broker configs, so it is DEFAULT_CONFIG with the same value"

// TestDifferential runs every scenario against our broker and Apache
// Kafka, then checks that together they compared every API and version
// both brokers advertise (or diffNotCompared says why not).
func TestDifferential(t *testing.T) {
	t.Parallel()
	scenarios := map[string]func(*testing.T){
		"TopicsAndRecords":  diffScenarioTopicsAndRecords,
		"ConfigsAndCluster": diffScenarioConfigsAndCluster,
		"Groups":            diffScenarioGroups,
		"Transactions":      diffScenarioTransactions,
		"Hostile":           diffScenarioHostile,
		"ConsumerGroups":    diffScenarioConsumerGroups,
		"SASL":              diffScenarioSASL,
		"ACLsDisabled":      diffScenarioACLsDisabled,
		"ClientQuotas":      diffScenarioClientQuotas,
	}
	t.Run("scenarios", func(t *testing.T) {
		for name, fn := range scenarios {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				fn(t)
			})
		}
	})
	if t.Failed() || t.Skipped() {
		return
	}
	diffCovered.mu.Lock()
	defer diffCovered.mu.Unlock()
	if diffCovered.common == nil {
		return // every scenario skipped: no reference here
	}
	keys := make([]int16, 0, len(diffCovered.common))
	for k := range diffCovered.common {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := diffCovered.common[k]
		var missing []int16
		for v := r[0]; v <= r[1]; v++ {
			if !diffCovered.seen[[2]int16{k, v}] {
				missing = append(missing, v)
			}
		}
		if len(missing) == 0 {
			continue
		}
		span := fmt.Sprintf("%s v%d-v%d", kmsg.NameForKey(k), missing[0], missing[len(missing)-1])
		if len(missing) == 1 {
			span = fmt.Sprintf("%s v%d", kmsg.NameForKey(k), missing[0])
		}
		if _, ok := diffNotCompared[span]; !ok {
			t.Errorf("%s: advertised by both brokers, compared by no scenario (add it, or to diffNotCompared with the reason)", span)
		}
	}
}

// diffSuffix makes names unique per run (the reference Kafka is shared by
// the tests of one binary) and equal on both brokers.
func diffSuffix(t *testing.T) string {
	return strings.ToLower(strings.TrimPrefix(topicName(t, ""), "Test"))
}

// diffScenarioTopicsAndRecords: topic admin, produce, fetch and
// offsets at every common version.
func diffScenarioTopicsAndRecords(t *testing.T) {
	sfx := diffSuffix(t)
	diffRun(t, func(e *diffEnv) {
		topic := "rec-" + sfx
		e.each(kmsg.CreateTopics, func(v int16) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version = v
			req.TimeoutMillis = 30000
			for _, name := range []string{fmt.Sprintf("ct-v%d-%s", v, sfx), topic, "bad/name"} {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
				rt.Configs = append(rt.Configs, c)
				req.Topics = append(req.Topics, rt)
			}
			e.do("create a new topic, the shared topic, a bad name", req)
		})
		e.waitTopic(topic, 2)
		e.each(kmsg.CreateTopics, func(v int16) { e.waitTopic(fmt.Sprintf("ct-v%d-%s", v, sfx), 2) })
		e.each(kmsg.Metadata, func(v int16) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = v
			for _, name := range []string{topic, "missing-" + sfx} {
				if v < 4 && name != topic {
					continue // v0-v3 always auto-create
				}
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			req.AllowAutoTopicCreation = false
			e.do("the shared topic and a missing one", req)
		})
		ts := int64(1_700_000_000_000)
		e.each(kmsg.Produce, func(v int16) {
			if v < 3 {
				return // v0-v2: deviation (served here, refused by Kafka 4)
			}
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = v, -1, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			for p := int32(0); p < 3; p++ {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = p
				rp.Records = rawBatch(-1, -1, -1, ts, valueRecords(fmt.Sprintf("v%d-a", v), fmt.Sprintf("v%d-b", v)))
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("two records to partitions 0, 1 and the missing 2", req)
		})
		e.each(kmsg.Fetch, func(v int16) {
			if v < 4 {
				return // v0-v3: deviation (served here, removed in Kafka 4)
			}
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = v, -1, 10, 1, 1<<20
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, e.topicIDs[topic]
			for _, off := range []struct {
				p   int32
				off int64
			}{{0, 0}, {1, 3}, {2, 1 << 40}, {5, 0}} {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = off.p, off.off, 1<<20
				rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("from 0, mid-batch, past the end of an empty partition, a missing partition", req)
			if v >= 13 {
				req.Topics[0].TopicID = [16]byte{1, 2, 3}
				e.do("an unknown topic ID", req)
			}
		})
		e.each(kmsg.ListOffsets, func(v int16) {
			for _, q := range []struct {
				p  int32
				ts int64
			}{{0, -2}, {0, -1}, {0, ts}, {0, ts + 1}, {1, -3}, {1, -4}, {7, -1}} {
				req := kmsg.NewPtrListOffsetsRequest()
				req.Version, req.ReplicaID = v, -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = topic
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = q.p, q.ts, -1, 1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				e.do(fmt.Sprintf("partition %d timestamp %d", q.p, q.ts), req)
			}
			// The same partition twice in one request.
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version, req.ReplicaID = v, -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			for range 2 {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = 0, -1, -1, 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("partition 0 twice", req)
		})
		e.each(kmsg.DeleteRecords, func(v int16) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.Version, req.TimeoutMillis = v, 30000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = topic
			for _, q := range []struct {
				p   int32
				off int64
			}{{1, 1}, {0, 1 << 40}, {9, 0}} {
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = q.p, q.off
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("below the end, past the end, a missing partition", req)
		})
		e.each(kmsg.OffsetForLeaderEpoch, func(v int16) {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			req.Version, req.ReplicaID = v, -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = topic
			for _, q := range []struct{ p, epoch int32 }{{0, 0}, {0, 5}, {8, 0}} {
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = q.p, q.epoch, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("a future epoch, epoch 0, a missing partition", req)
		})
		e.each(kmsg.CreatePartitions, func(v int16) {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.Version, req.TimeoutMillis = v, 30000
			for _, q := range []struct {
				name  string
				count int32
			}{{fmt.Sprintf("ct-v%d-%s", v, sfx), 3}, {topic, 1}, {"missing-" + sfx, 4}} {
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = q.name, q.count
				req.Topics = append(req.Topics, rt)
			}
			e.do("grow, shrink, missing", req)
		})
		e.each(kmsg.DeleteTopics, func(v int16) {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.TimeoutMillis = v, 30000
			for _, name := range []string{fmt.Sprintf("ct-v%d-%s", v, sfx), "missing-" + sfx} {
				req.TopicNames = append(req.TopicNames, name)
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			e.do("an existing and a missing topic", req)
		})
	}, map[string]string{
		"CreateTopics|Configs[min.insync.replicas].Source": diffMinISRSource,
		"partition 0 twice|": "a partition repeated in one ListOffsets request: Kafka answers it once (its handler keys a map by partition); we answer each, the repeats INVALID_REQUEST",
	})
}

// diffCreateTopic creates topic with partitions over the env's connection
// (at the newest common CreateTopics version), recording the answer.
func (e *diffEnv) createTopic(topic string, partitions int32, configs map[string]string) {
	e.t.Helper()
	r := e.common[int16(kmsg.CreateTopics)]
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = r[1], 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	e.do("setup: create "+topic, req)
	e.waitTopic(topic, partitions)
}

// waitTopic asks for topic's metadata until the broker serves all its
// partitions: Kafka's CreateTopics answers once the controller committed
// the topic, before the broker's metadata cache has it (clients retry
// UNKNOWN_TOPIC_OR_PARTITION). Nothing is recorded.
func (e *diffEnv) waitTopic(topic string, partitions int32) {
	e.t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp := e.conn.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) == int(partitions) &&
			e.partitionsLead(topic, partitions) {
			e.topicIDs[topic] = resp.Topics[0].TopicID
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: topic %s not served within %v", e.name, topic, opTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// diffScenarioConfigsAndCluster: topic and broker configs (describe,
// alter, incremental alter, validation), the cluster and its one node,
// log directories, leader election and reassignment at every common
// version.
// diffScenarioACLsDisabled: the ACL APIs of a broker without an authorizer
// (the default of both) answer SECURITY_DISABLED at every version.
func diffScenarioACLsDisabled(t *testing.T) {
	diffRun(t, func(e *diffEnv) {
		e.each(kmsg.DescribeACLs, func(v int16) {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.Version = v
			req.ResourceType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			if v >= 1 {
				req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
			}
			e.do("describe every ACL", req)
		})
		e.each(kmsg.CreateACLs, func(v int16) {
			req := kmsg.NewPtrCreateACLsRequest()
			req.Version = v
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName = kmsg.ACLResourceTypeTopic, "t"
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
			e.do("create an ACL", req)
		})
		e.each(kmsg.DeleteACLs, func(v int16) {
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Version = v
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			if v >= 1 {
				f.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
			}
			req.Filters = append(req.Filters, f)
			e.do("delete every ACL", req)
		})
	}, nil)
}

// diffScenarioClientQuotas: AlterClientQuotas with validate_only (nothing
// stored, so the shared reference broker is left as it was) for a valid
// and each kind of refused entity, one entity per request (Kafka answers
// several in hash-map order), and DescribeClientQuotas with refused
// filters and a strict filter that matches nothing.
func diffScenarioClientQuotas(t *testing.T) {
	sfx := diffSuffix(t)
	type part struct{ typ, name string }
	type op struct {
		key   string
		value float64
	}
	alters := []struct {
		label string
		parts []part
		ops   []op
	}{
		{"valid user and client", []part{{"user", "u-" + sfx}, {"client-id", ""}}, []op{{"producer_byte_rate", 1024}, {"request_percentage", 12.5}}},
		{"empty entity", nil, []op{{"producer_byte_rate", 1}}},
		{"unknown type", []part{{"group", "g"}}, []op{{"producer_byte_rate", 1}}},
		{"ip with user", []part{{"ip", "127.0.0.1"}, {"user", "u"}}, []op{{"producer_byte_rate", 1}}},
		{"unknown key", []part{{"user", "u-" + sfx}}, []op{{"bogus", 1}}},
		{"fractional byte rate", []part{{"client-id", "c-" + sfx}}, []op{{"consumer_byte_rate", 0.5}}},
		{"zero percentage", []part{{"client-id", "c-" + sfx}}, []op{{"request_percentage", 0}}},
		{"ip default", []part{{"ip", ""}}, []op{{"connection_creation_rate", 10}}},
	}
	diffRun(t, func(e *diffEnv) {
		for _, a := range alters {
			e.each(kmsg.AlterClientQuotas, func(v int16) {
				req := kmsg.NewPtrAlterClientQuotasRequest()
				req.Version, req.ValidateOnly = v, true
				entry := kmsg.NewAlterClientQuotasRequestEntry()
				for _, p := range a.parts {
					ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
					ent.Type = p.typ
					if p.name != "" {
						ent.Name = kmsg.StringPtr(p.name)
					}
					entry.Entity = append(entry.Entity, ent)
				}
				for _, o := range a.ops {
					op := kmsg.NewAlterClientQuotasRequestEntryOp()
					op.Key, op.Value = o.key, o.value
					entry.Ops = append(entry.Ops, op)
				}
				req.Entries = append(req.Entries, entry)
				e.do("alter client quotas (validate only): "+a.label, req)
			})
		}
		filters := []struct {
			label string
			comps []kmsg.DescribeClientQuotasRequestComponent
		}{
			{"exact unknown user", []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: kmsg.StringPtr("nobody-" + sfx)}}},
			{"unknown type", []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "group", MatchType: 2}}},
			{"exact without name", []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0}}},
			{"default with name", []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "client-id", MatchType: 1, Match: kmsg.StringPtr("x")}}},
			{"ip with user", []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "ip", MatchType: 2}, {EntityType: "user", MatchType: 2}}},
		}
		for _, f := range filters {
			e.each(kmsg.DescribeClientQuotas, func(v int16) {
				req := kmsg.NewPtrDescribeClientQuotasRequest()
				req.Version, req.Strict, req.Components = v, true, f.comps
				e.do("describe client quotas: "+f.label, req)
			})
		}
	}, nil)
}

func diffScenarioConfigsAndCluster(t *testing.T) {
	sfx := diffSuffix(t)
	diffRun(t, func(e *diffEnv) {
		topic := "cfg-" + sfx
		e.createTopic(topic, 2, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576"})
		describe := func(v int16, label string, includeSynonyms, includeDocs bool, names ...string) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version, req.IncludeSynonyms, req.IncludeDocumentation = v, includeSynonyms, includeDocs
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, names
			req.Resources = append(req.Resources, rr)
			missing := kmsg.NewDescribeConfigsRequestResource()
			missing.ResourceType, missing.ResourceName = kmsg.ConfigResourceTypeTopic, "missing-"+sfx
			req.Resources = append(req.Resources, missing)
			e.do(label, req)
		}
		// Kafka applies a config change when its metadata image catches
		// up, a little after the alter answered: describe (unrecorded)
		// until retention.ms shows the value the alters left.
		describeSettled := func(label, retention string, names ...string) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.Version, req.IncludeSynonyms = e.common[int16(kmsg.DescribeConfigs)][1], true
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, names
			req.Resources = append(req.Resources, rr)
			e.doRetry(label, req, func(r kmsg.Response) bool {
				for _, c := range r.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
					if c.Name == "retention.ms" {
						return c.Value == nil || *c.Value != retention
					}
				}
				return true
			})
		}
		names := []string{"cleanup.policy", "segment.bytes", "retention.ms", "max.message.bytes", "message.timestamp.type", "min.cleanable.dirty.ratio", "compression.type", "delete.retention.ms"}
		e.each(kmsg.DescribeConfigs, func(v int16) {
			describe(v, "named topic configs, a missing topic", v >= 1, v >= 3, names...)
		})
		// Every config, with synonyms, at the newest version.
		describe(e.common[int16(kmsg.DescribeConfigs)][1], "every topic config", true, false)
		e.each(kmsg.AlterConfigs, func(v int16) {
			req := kmsg.NewPtrAlterConfigsRequest()
			req.Version = v
			for _, q := range []struct{ name, key, value string }{
				{topic, "retention.ms", "7200000"},
				{topic, "retention.ms", "not-a-number"},
				{topic, "no.such.config", "1"},
				{"missing-" + sfx, "retention.ms", "1"},
			} {
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, q.name
				c := kmsg.NewAlterConfigsRequestResourceConfig()
				c.Name, c.Value = q.key, kmsg.StringPtr(q.value)
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				e.do(fmt.Sprintf("set %s=%s on %s", q.key, q.value, q.name[:4]), req)
				req.Resources = req.Resources[:0]
			}
			describeSettled("after AlterConfigs", "7200000", names...)
		})
		e.each(kmsg.IncrementalAlterConfigs, func(v int16) {
			for _, q := range []struct {
				key, value string
				op         kmsg.IncrementalAlterConfigOp
			}{
				{"retention.ms", "600000", kmsg.IncrementalAlterConfigOpSet},
				{"cleanup.policy", "delete", kmsg.IncrementalAlterConfigOpAppend},
				{"cleanup.policy", "compact", kmsg.IncrementalAlterConfigOpSubtract},
				{"segment.bytes", "", kmsg.IncrementalAlterConfigOpDelete},
				{"max.message.bytes", "-5", kmsg.IncrementalAlterConfigOpSet},
				{"retention.ms", "1", kmsg.IncrementalAlterConfigOpAppend},
			} {
				req := kmsg.NewPtrIncrementalAlterConfigsRequest()
				req.Version = v
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Op = q.key, q.op
				if q.op != kmsg.IncrementalAlterConfigOpDelete {
					c.Value = kmsg.StringPtr(q.value)
				}
				rr.Configs = append(rr.Configs, c)
				req.Resources = append(req.Resources, rr)
				e.do(fmt.Sprintf("%s %s %s", q.op, q.key, q.value), req)
			}
			// validate_only changes nothing.
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.Version, req.ValidateOnly = v, true
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("5")
			rr.Configs = append(rr.Configs, c)
			req.Resources = append(req.Resources, rr)
			e.do("validate only", req)
			describeSettled("after IncrementalAlterConfigs", "600000", names...)
		})
		e.each(kmsg.DescribeCluster, func(v int16) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.Version, req.IncludeClusterAuthorizedOperations = v, true
			e.do("with authorized operations", req)
		})
		e.each(kmsg.DescribeLogDirs, func(v int16) {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version = v
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0, 1, 9}
			req.Topics = append(req.Topics, rt)
			e.do("two partitions and a missing one", req)
		})
		e.each(kmsg.DescribeTopicPartitions, func(v int16) {
			req := kmsg.NewPtrDescribeTopicPartitionsRequest()
			req.Version, req.ResponsePartitionLimit = v, 1
			for _, name := range []string{topic, "missing-" + sfx} {
				rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
				rt.Topic = name
				req.Topics = append(req.Topics, rt)
			}
			e.do("one partition per page", req)
		})
		e.each(kmsg.ElectLeaders, func(v int16) {
			req := kmsg.NewPtrElectLeadersRequest()
			req.Version, req.TimeoutMillis = v, 30000
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0, 5}
			req.Topics = append(req.Topics, rt)
			e.do("preferred, a partition and a missing one", req)
		})
		e.each(kmsg.AlterPartitionAssignments, func(v int16) {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			req.Version, req.TimeoutMillis = v, 30000
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = topic
			for i, replicas := range [][]int32{{1}, {2}} {
				rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
				rp.Partition, rp.Replicas = int32(i), replicas
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			e.do("this node for partition 0, an unknown node for 1", req)
		})
		e.each(kmsg.ApiVersions, func(v int16) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "diff", "1"
			e.doFilter("error code and the features both serve", req, func(r kmsg.Response) {
				// The API lists differ by design: each broker serves its
				// own APIs (the ranges are checked by the coverage check
				// and TestApiVersions). Of the features only those this
				// broker advertises are compared, with their levels:
				// group.version and share.version (Kafka also has
				// metadata.version, kraft.version, transaction.version...).
				resp := r.(*kmsg.ApiVersionsResponse)
				resp.ApiKeys = nil
				resp.SupportedFeatures = slices.DeleteFunc(resp.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool { return !servedFeature(f.Name) })
				resp.FinalizedFeatures = slices.DeleteFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool { return !servedFeature(f.Name) })
				slices.SortFunc(resp.SupportedFeatures, func(a, b kmsg.ApiVersionsResponseSupportedFeature) int { return strings.Compare(a.Name, b.Name) })
				slices.SortFunc(resp.FinalizedFeatures, func(a, b kmsg.ApiVersionsResponseFinalizedFeature) int { return strings.Compare(a.Name, b.Name) })
				resp.FinalizedFeaturesEpoch = 0
			})
			bad := kmsg.NewPtrApiVersionsRequest()
			bad.Version, bad.ClientSoftwareName, bad.ClientSoftwareVersion = v, "bad name!", "1"
			if v >= 3 {
				e.doFilter("an invalid client software name", bad, func(r kmsg.Response) {
					resp := r.(*kmsg.ApiVersionsResponse)
					resp.ApiKeys, resp.SupportedFeatures, resp.FinalizedFeatures = nil, nil, nil
					resp.FinalizedFeaturesEpoch = 0
				})
			}
		})
		e.each(kmsg.ListPartitionReassignments, func(v int16) {
			req := kmsg.NewPtrListPartitionReassignmentsRequest()
			req.Version, req.TimeoutMillis = v, 30000
			e.do("all", req)
		})
	}, map[string]string{
		"|Configs[min.insync.replicas]": diffMinISRSource,
	})
}

// partitionsLead reports whether the broker answers ListOffsets for every
// partition of topic without error: Kafka lists a new partition's leader
// in Metadata before the leader has loaded its log (Produce then answers
// NOT_LEADER_OR_FOLLOWER for a moment). Nothing is recorded.
func (e *diffEnv) partitionsLead(topic string, partitions int32) bool {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := e.conn.roundTrip(req).(*kmsg.ListOffsetsResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return false
			}
		}
	}
	return len(resp.Topics) == 1
}

// waitCoordinator asks for the coordinator of key until one is ready:
// Kafka creates __consumer_offsets and __transaction_state on first use
// and answers COORDINATOR_NOT_AVAILABLE until then (clients retry).
// Nothing is recorded.
func (e *diffEnv) waitCoordinator(key string, typ int8) {
	e.t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorType = 3, key, typ
		if resp := e.conn.roundTrip(req).(*kmsg.FindCoordinatorResponse); resp.ErrorCode == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no coordinator for %q (type %d) within %v", e.name, key, typ, opTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitProducerIDs asks for a producer ID until the broker can give one
// (Kafka's KRaft producer ID manager answers COORDINATOR_LOAD_IN_PROGRESS
// until its first block arrives). Nothing is recorded.
func (e *diffEnv) waitProducerIDs() {
	e.t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.ProducerID, req.ProducerEpoch = 1, -1, -1
		if resp := e.conn.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: no producer ID within %v", e.name, opTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTxnState describes txnID until it is in state (Kafka writes the
// commit markers after EndTxn answers). Nothing is recorded.
func (e *diffEnv) waitTxnState(txnID, state string) {
	e.t.Helper()
	deadline := time.Now().Add(opTimeout)
	for {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		resp := e.conn.roundTrip(req).(*kmsg.DescribeTransactionsResponse)
		if len(resp.TransactionStates) == 1 && resp.TransactionStates[0].State == state {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: transaction %s not %s within %v: %+v", e.name, txnID, state, opTimeout, resp.TransactionStates)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// diffScenarioGroups: the classic group protocol and offsets at every
// common version: FindCoordinator, JoinGroup (member ID required, rejoin,
// leader), SyncGroup, Heartbeat (right, stale generation, unknown
// member), OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// LeaveGroup, OffsetDelete, DeleteGroups.
func diffScenarioGroups(t *testing.T) {
	sfx := diffSuffix(t)
	diffRun(t, func(e *diffEnv) {
		topic := "grp-" + sfx
		e.createTopic(topic, 2, nil)
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{topic}
		metaBytes := meta.AppendTo(nil)
		var groups []string
		mine := func(g string) bool { return slices.Contains(groups, g) }
		e.waitCoordinator("g-"+sfx, 0)
		e.waitCoordinator("g-"+sfx, 1)

		e.each(kmsg.FindCoordinator, func(v int16) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version = v
			req.CoordinatorKey, req.CoordinatorKeys = "g-"+sfx, []string{"g-" + sfx, "h-" + sfx}
			e.do("group coordinator", req)
			req.CoordinatorType = 1
			e.do("transaction coordinator", req)
		})
		e.each(kmsg.JoinGroup, func(v int16) {
			group := fmt.Sprintf("g-v%d-%s", v, sfx)
			groups = append(groups, group)
			join := func(member string) *kmsg.JoinGroupResponse {
				req := kmsg.NewPtrJoinGroupRequest()
				req.Version, req.Group, req.MemberID, req.ProtocolType = v, group, member, "consumer"
				req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 30000
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", metaBytes
				req.Protocols = append(req.Protocols, p)
				return e.do("join as "+map[bool]string{true: "new", false: "known"}[member == ""], req).(*kmsg.JoinGroupResponse)
			}
			resp := join("")
			if resp.ErrorCode != 0 && resp.MemberID != "" {
				resp = join(resp.MemberID) // v4+: MEMBER_ID_REQUIRED first
			}
			member, gen := resp.MemberID, resp.Generation

			if r, ok := e.common[int16(kmsg.SyncGroup)]; ok {
				sv := min(max(v, r[0]), r[1])
				req := kmsg.NewPtrSyncGroupRequest()
				req.Version, req.Group, req.Generation, req.MemberID = sv, group, gen, member
				req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
				a := kmsg.NewSyncGroupRequestGroupAssignment()
				ca := kmsg.NewConsumerMemberAssignment()
				tp := kmsg.NewConsumerMemberAssignmentTopic()
				tp.Topic, tp.Partitions = topic, []int32{0, 1}
				ca.Topics = append(ca.Topics, tp)
				a.MemberID, a.MemberAssignment = member, ca.AppendTo(nil)
				req.GroupAssignment = append(req.GroupAssignment, a)
				e.do("the leader assigns both partitions", req)
			}
			if r, ok := e.common[int16(kmsg.Heartbeat)]; ok {
				hv := min(max(v, r[0]), r[1])
				for _, q := range []struct {
					label  string
					member string
					gen    int32
				}{{"current", member, gen}, {"stale generation", member, gen - 1}, {"unknown member", "nobody", gen}} {
					req := kmsg.NewPtrHeartbeatRequest()
					req.Version, req.Group, req.Generation, req.MemberID = hv, group, q.gen, q.member
					e.do(q.label, req)
				}
			}
			if r, ok := e.common[int16(kmsg.OffsetCommit)]; ok {
				cv := min(max(v, r[0]), r[1])
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version, req.Group, req.Generation, req.MemberID, req.RetentionTimeMillis = cv, group, gen, member, -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic, rt.TopicID = topic, e.topicIDs[topic] // v10 sends the ID only
				for p := int32(0); p < 3; p++ {
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset, rp.Metadata, rp.LeaderEpoch = p, int64(10+p), kmsg.StringPtr("m"), -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
				e.do("as the member: partitions 0, 1 and a missing 2", req)
			}
		})
		e.each(kmsg.OffsetCommit, func(v int16) {
			for _, q := range []struct {
				label string
				gen   int32
				mem   string
			}{{"simple (no member)", -1, ""}, {"an unknown member", 5, "nobody"}} {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version, req.Group, req.Generation, req.MemberID, req.RetentionTimeMillis = v, "simple-"+sfx, q.gen, q.mem, -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic, rt.TopicID = topic, e.topicIDs[topic]
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = 0, int64(v), -1
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				if v >= 10 && q.gen == -1 {
					// v10 (topic IDs): an ID no topic has is UNKNOWN_TOPIC_ID.
					unknown := kmsg.NewOffsetCommitRequestTopic()
					unknown.TopicID = [16]byte{0xde, 0xad, 0xbe, 0xef, 15: 1}
					unknown.Partitions = append(unknown.Partitions, rp)
					req.Topics = append(req.Topics, unknown)
				}
				e.do(q.label, req)
			}
		})
		groups = append(groups, "simple-"+sfx)
		e.each(kmsg.OffsetFetch, func(v int16) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version = v
			req.Group = groups[0]
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = topic, []int32{0, 1, 2}
			req.Topics = append(req.Topics, rt)
			for _, g := range []string{groups[0], "simple-" + sfx, "none-" + sfx} {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = g
				rgt := kmsg.NewOffsetFetchRequestGroupTopic()
				rgt.Topic, rgt.TopicID, rgt.Partitions = topic, e.topicIDs[topic], []int32{0, 1, 2}
				rg.Topics = append(rg.Topics, rgt)
				if v >= 10 {
					// v10 (topic IDs): an ID no topic has is UNKNOWN_TOPIC_ID.
					unknown := kmsg.NewOffsetFetchRequestGroupTopic()
					unknown.TopicID, unknown.Partitions = [16]byte{0xde, 0xad, 0xbe, 0xef, 15: 1}, []int32{0}
					rg.Topics = append(rg.Topics, unknown)
				}
				req.Groups = append(req.Groups, rg)
			}
			e.do("a member's group, a simple group, no group", req)
			all := kmsg.NewPtrOffsetFetchRequest()
			all.Version, all.Group = v, "simple-"+sfx
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "simple-" + sfx
			all.Groups = append(all.Groups, rg)
			e.do("every partition of a simple group", all)
		})
		e.each(kmsg.DescribeGroups, func(v int16) {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version, req.IncludeAuthorizedOperations = v, true
			req.Groups = append(slices.Clone(groups), "none-"+sfx)
			e.do("every group of the test and a missing one", req)
		})
		e.each(kmsg.ListGroups, func(v int16) {
			req := kmsg.NewPtrListGroupsRequest()
			req.Version = v
			e.doFilter("ours only", req, func(r kmsg.Response) {
				resp := r.(*kmsg.ListGroupsResponse)
				resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !mine(g.Group) })
			})
		})
		e.each(kmsg.OffsetDelete, func(v int16) {
			for _, g := range []string{groups[0], "simple-" + sfx, "none-" + sfx} {
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Version, req.Group = v, g
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = topic
				for _, p := range []int32{0, 1} {
					rp := kmsg.NewOffsetDeleteRequestTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
				e.do("on "+g[:4], req)
			}
		})
		e.each(kmsg.LeaveGroup, func(v int16) {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version, req.Group, req.MemberID = v, groups[0], "nobody"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "nobody"
			req.Members = append(req.Members, m)
			e.do("an unknown member", req)
		})
		e.each(kmsg.DeleteGroups, func(v int16) {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Version = v
			req.Groups = []string{groups[0], "simple-" + sfx, "none-" + sfx}
			e.do("a group with a member, a simple group, a missing group", req)
		})
	}, map[string]string{
		"|Configs[min.insync.replicas]":       diffMinISRSource,
		"DescribeGroups|AuthorizedOperations": diffGroupOps,
	}, withArgs("--group-initial-rebalance-delay", "0s"))
}

// diffScenarioTransactions: producer IDs and the transaction APIs at
// every common version: InitProducerID (idempotent, transactional, a
// timeout too long), AddPartitionsToTxn, a transactional Produce,
// AddOffsetsToTxn, TxnOffsetCommit, EndTxn (commit, stale epoch),
// DescribeTransactions, ListTransactions, DescribeProducers.
func diffScenarioTransactions(t *testing.T) {
	sfx := diffSuffix(t)
	diffRun(t, func(e *diffEnv) {
		topic := "txn-" + sfx
		e.createTopic(topic, 2, nil)
		var txnIDs []string
		e.waitCoordinator("x-"+sfx, 1)
		e.waitCoordinator("g-"+sfx, 0)
		e.waitProducerIDs()
		e.each(kmsg.InitProducerID, func(v int16) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = v, 60000, -1, -1
			e.do("idempotent", req)
			req.TransactionalID = kmsg.StringPtr("long-" + sfx)
			req.TransactionTimeoutMillis = 1 << 30
			e.do("a timeout above transaction.max.timeout.ms", req)
		})
		e.each(kmsg.EndTxn, func(v int16) {
			txnID := fmt.Sprintf("tx-v%d-%s", v, sfx)
			txnIDs = append(txnIDs, txnID)
			init := kmsg.NewPtrInitProducerIDRequest()
			init.Version = e.common[int16(kmsg.InitProducerID)][1]
			init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = kmsg.StringPtr(txnID), 60000, -1, -1
			// Retried while Kafka loads the ID's __transaction_state
			// partition (clients retry these codes).
			ir := e.doRetry("transactional", init, func(r kmsg.Response) bool {
				c := r.(*kmsg.InitProducerIDResponse).ErrorCode
				return c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code ||
					c == kerr.CoordinatorLoadInProgress.Code || c == kerr.ConcurrentTransactions.Code
			}).(*kmsg.InitProducerIDResponse)
			pid, epoch := ir.ProducerID, ir.ProducerEpoch

			if r, ok := e.common[int16(kmsg.AddPartitionsToTxn)]; ok {
				req := kmsg.NewPtrAddPartitionsToTxnRequest()
				req.Version = min(max(v, r[0]), r[1], 3) // v4+ are broker-to-broker batches
				req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0}
				req.Topics = append(req.Topics, rt)
				e.do("partition 0", req)
			}
			pv := e.common[int16(kmsg.Produce)][1]
			if v%2 == 1 {
				pv = 10 // before TRANSACTION_ABORTABLE (KIP-890)
			}
			pr := kmsg.NewPtrProduceRequest()
			pr.Version, pr.Acks, pr.TimeoutMillis = pv, -1, 30000
			pr.TransactionID = kmsg.StringPtr(txnID)
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			for p := int32(0); p < 2; p++ {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = p
				b := rawBatch(pid, epoch, 0, 1_700_000_000_000, valueRecords("t"))
				b[22] |= 0x10 // transactional
				binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
				rp.Records = b
				rt.Partitions = append(rt.Partitions, rp)
			}
			pr.Topics = append(pr.Topics, rt)
			e.do("to the added partition 0 and to 1, not added", pr)

			group := "txg-" + txnID
			if r, ok := e.common[int16(kmsg.AddOffsetsToTxn)]; ok {
				req := kmsg.NewPtrAddOffsetsToTxnRequest()
				req.Version = min(max(v, r[0]), r[1])
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
				e.do("a group", req)
			}
			if r, ok := e.common[int16(kmsg.TxnOffsetCommit)]; ok {
				req := kmsg.NewPtrTxnOffsetCommitRequest()
				req.Version = min(max(v, r[0]), r[1])
				req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, req.Generation = txnID, pid, epoch, group, -1
				ct := kmsg.NewTxnOffsetCommitRequestTopic()
				ct.Topic = topic
				cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 1, -1
				ct.Partitions = append(ct.Partitions, cp)
				req.Topics = append(req.Topics, ct)
				// Kafka answers NOT_COORDINATOR until the group's
				// coordinator has loaded the transaction's offsets
				// partition; clients retry.
				e.doRetry("offset 1 of partition 0", req, func(r kmsg.Response) bool {
					c := r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
					return c == kerr.NotCoordinator.Code || c == kerr.CoordinatorNotAvailable.Code || c == kerr.CoordinatorLoadInProgress.Code
				})
			}
			if r, ok := e.common[int16(kmsg.DescribeTransactions)]; ok {
				req := kmsg.NewPtrDescribeTransactionsRequest()
				req.Version = r[1]
				req.TransactionalIDs = []string{txnID, "none-" + sfx}
				e.do("ongoing, and a missing one", req)
			}
			if r, ok := e.common[int16(kmsg.DescribeProducers)]; ok {
				req := kmsg.NewPtrDescribeProducersRequest()
				req.Version = r[1]
				dt := kmsg.NewDescribeProducersRequestTopic()
				dt.Topic, dt.Partitions = topic, []int32{0, 7}
				req.Topics = append(req.Topics, dt)
				e.doFilter("partition 0 and a missing one", req, func(r kmsg.Response) {
					// Only this version's producer: earlier versions'
					// transactions wrote to the same partition.
					for i := range r.(*kmsg.DescribeProducersResponse).Topics {
						for j := range r.(*kmsg.DescribeProducersResponse).Topics[i].Partitions {
							p := &r.(*kmsg.DescribeProducersResponse).Topics[i].Partitions[j]
							p.ActiveProducers = slices.DeleteFunc(p.ActiveProducers, func(a kmsg.DescribeProducersResponseTopicPartitionActiveProducer) bool {
								return a.ProducerID != pid
							})
							for k := range p.ActiveProducers {
								p.ActiveProducers[k].LastTimestamp = 0
								p.ActiveProducers[k].CoordinatorEpoch = 0
							}
						}
					}
				})
			}
			req := kmsg.NewPtrEndTxnRequest()
			req.Version = v
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch-1, true
			e.do("commit with a stale epoch", req)
			req.ProducerEpoch = epoch
			e.do("commit", req)
			e.waitTxnState(txnID, "CompleteCommit")
		})
		// Last: Kafka appends a marker that ends nothing (DESIGN.md,
		// Deviations), which would move later offsets apart.
		e.each(kmsg.WriteTxnMarkers, func(v int16) {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			req.Version = v
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = 999999, 0, false, 0
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = topic, []int32{1, 9}
			m.Topics = append(m.Topics, mt)
			req.Markers = append(req.Markers, m)
			e.do("abort markers for a producer with no transaction, on a partition and a missing one", req)
		})
		e.each(kmsg.ListTransactions, func(v int16) {
			req := kmsg.NewPtrListTransactionsRequest()
			req.Version = v
			e.doFilter("ours only", req, func(r kmsg.Response) {
				resp := r.(*kmsg.ListTransactionsResponse)
				resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
					return !slices.Contains(txnIDs, s.TransactionalID)
				})
			})
		})
	}, map[string]string{
		"|Configs[min.insync.replicas]": diffMinISRSource,
	})
}

// rawOutcome sends frame on a new connection and records what the broker
// did: closed the connection, or answered (the answer decoded as resp when
// given, else only its size class).
func (e *diffEnv) rawOutcome(label string, frame []byte, resp kmsg.Response) {
	e.t.Helper()
	c := dialRaw(e.t, e.addr)
	defer c.conn.Close()
	c.writeAll(frame)
	fields := map[string]string{}
	body, err := c.readFrame()
	switch {
	case err != nil:
		fields["outcome"] = "closed"
	case resp != nil:
		fields["outcome"] = "answered"
		decodeResponse(e.t, int32(binary.BigEndian.Uint32(frame[8:])), body, resp)
		diffFlatten(reflect.ValueOf(resp).Elem(), "", fields)
	default:
		fields["outcome"] = "answered"
	}
	e.out = append(e.out, diffResult{label: "hostile: " + label, fields: fields})
}

// diffScenarioHostile: malformed and invalid requests get the same
// treatment from both brokers: the same error code, or the connection
// closed by both.
func diffScenarioHostile(t *testing.T) {
	sfx := diffSuffix(t)
	frame := func(req kmsg.Request) []byte {
		return kmsg.NewRequestFormatter(kmsg.FormatterClientID("diff")).AppendRequest(nil, req, 7)
	}
	diffRun(t, func(e *diffEnv) {
		topic := "hostile-" + sfx
		e.createTopic(topic, 1, map[string]string{"max.message.bytes": "2048"})
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = e.common[int16(kmsg.Metadata)][1]
		good := frame(meta)

		tooNew := bytes.Clone(good)
		binary.BigEndian.PutUint16(tooNew[6:], 99)
		e.rawOutcome("Metadata v99", tooNew, nil)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3 // a flexible header, as clients send their newest version
		av.ClientSoftwareName, av.ClientSoftwareVersion = "diff", "1"
		avFrame := frame(av)
		binary.BigEndian.PutUint16(avFrame[6:], 99)
		avResp := kmsg.NewPtrApiVersionsResponse()
		e.rawOutcome("ApiVersions v99", avFrame, avResp)
		unknownKey := bytes.Clone(good)
		binary.BigEndian.PutUint16(unknownKey[4:], 9999)
		e.rawOutcome("API key 9999", unknownKey, nil)
		truncated := bytes.Clone(good[:len(good)-2])
		binary.BigEndian.PutUint32(truncated, uint32(len(truncated)-4))
		e.rawOutcome("Metadata body cut short", truncated, nil)
		e.rawOutcome("a zero-length frame", []byte{0, 0, 0, 0}, nil)
		e.rawOutcome("a negative frame length", []byte{0xff, 0xff, 0xff, 0xf0}, nil)
		badClientID := bytes.Clone(good)
		binary.BigEndian.PutUint16(badClientID[12:], 0x7fff)
		e.rawOutcome("client ID longer than the frame", badClientID, nil)
		e.rawOutcome("TLS ClientHello on the plaintext port", []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}, nil)

		produce := func(label string, acks int16, batch []byte) {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = e.common[int16(kmsg.Produce)][1], acks, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			e.do(label, req)
		}
		ts := int64(1_700_000_000_000)
		produce("acks=2", 2, rawBatch(-1, -1, -1, ts, valueRecords("x")))
		produce("a batch above max.message.bytes", -1, rawBatch(-1, -1, -1, ts, valueRecords(strings.Repeat("x", 4096))))
		badCRC := rawBatch(-1, -1, -1, ts, valueRecords("x"))
		badCRC[len(badCRC)-1] ^= 0xff
		produce("a batch with a bad CRC", -1, badCRC)
		badCount := rawBatch(-1, -1, -1, ts, valueRecords("x", "y"))
		binary.BigEndian.PutUint32(badCount[57:], 3)
		binary.BigEndian.PutUint32(badCount[17:], crc32.Checksum(badCount[21:], crc32c))
		produce("a batch declaring more records than it holds", -1, badCount)
		magic1 := rawBatch(-1, -1, -1, ts, valueRecords("x"))
		magic1[16] = 1
		produce("a v2 batch with magic 1", -1, magic1)
		produce("an empty record set", -1, []byte{})

		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version, ct.TimeoutMillis = e.common[int16(kmsg.CreateTopics)][1], 30000
		for _, q := range []struct {
			name       string
			partitions int32
			rf         int16
		}{{"rf3-" + sfx, 1, 3}, {"p0-" + sfx, 0, 1}, {"pneg-" + sfx, -5, 1}, {strings.Repeat("x", 250), 1, 1}, {"..", 1, 1}, {"", 1, 1}} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = q.name, q.partitions, q.rf
			ct.Topics = append(ct.Topics, rt)
		}
		e.do("replication factor 3, 0 and -5 partitions, a 250-char name, '..', an empty name", ct)
	}, map[string]string{
		"|Configs[min.insync.replicas]": diffMinISRSource,
	})
}

// waitConsumerGroupSees joins a throwaway consumer group until its
// assignment holds all of topic's partitions, then leaves: Kafka's group
// coordinator learns of a new topic from its metadata image a little after
// the topic is served, and until then assigns nothing. Nothing is recorded.
func (e *diffEnv) waitConsumerGroupSees(topic string, partitions int) {
	e.t.Helper()
	group, member := "warm-"+topic, "warm-member"
	deadline := time.Now().Add(opTimeout)
	epoch := int32(0)
	for {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, group, member, epoch
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 30000, []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := e.conn.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode == 0 {
			epoch = resp.MemberEpoch
			if a := resp.Assignment; a != nil && len(a.Topics) == 1 && len(a.Topics[0].Partitions) == partitions {
				req.MemberEpoch = -1
				e.conn.roundTrip(req)
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: a consumer group never got the %d partitions of %s", e.name, partitions, topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// diffScenarioConsumerGroups: the consumer group protocol (KIP-848) at
// every common version: a member joins (the broker names it at v0, the
// client at v1), heartbeats at its epoch, heartbeats at a wrong epoch,
// an unknown member, a bad regex (v1), ConsumerGroupDescribe of the group
// and of a missing one, then the member leaves; DescribeGroups of the
// consumer group.
func diffScenarioConsumerGroups(t *testing.T) {
	sfx := diffSuffix(t)
	diffRun(t, func(e *diffEnv) {
		topic := "cg-" + sfx
		e.createTopic(topic, 3, nil)
		e.waitCoordinator("g-"+sfx, 0)
		e.waitConsumerGroupSees(topic, 3)
		e.each(kmsg.ConsumerGroupHeartbeat, func(v int16) {
			group := fmt.Sprintf("cg-v%d-%s", v, sfx)
			hb := func(label, member string, epoch int32, join bool) *kmsg.ConsumerGroupHeartbeatResponse {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version, req.Group, req.MemberID, req.MemberEpoch = v, group, member, epoch
				if join {
					req.RebalanceTimeoutMillis = 30000
					req.SubscribedTopicNames = []string{topic}
					req.ServerAssignor = kmsg.StringPtr("uniform")
					req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				}
				// Kafka answers NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS
				// while the group's __consumer_offsets partition loads;
				// clients retry (nothing changed).
				return e.doRetry(label, req, func(r kmsg.Response) bool {
					c := r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode
					return c == kerr.NotCoordinator.Code || c == kerr.CoordinatorLoadInProgress.Code
				}).(*kmsg.ConsumerGroupHeartbeatResponse)
			}
			member := ""
			if v >= 1 {
				member = "m-" + sfx // KIP-1082: the client names itself
			}
			resp := hb("join", member, 0, true)
			if resp.MemberID != nil {
				member = *resp.MemberID
			}
			hb("heartbeat at the member's epoch", member, resp.MemberEpoch, false)
			hb("heartbeat at a future epoch", member, resp.MemberEpoch+5, false)
			hb("an unknown member", "nobody-"+sfx, 1, false)
			if v >= 1 {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version, req.Group, req.MemberID, req.MemberEpoch = v, group+"-re", "m2-"+sfx, 0
				req.RebalanceTimeoutMillis = 30000
				req.SubscribedTopicRegex = kmsg.StringPtr("cg-[")
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				e.do("a bad regex", req)
			}
			if r, ok := e.common[int16(kmsg.ConsumerGroupDescribe)]; ok {
				dv := min(max(v, r[0]), r[1])
				req := kmsg.NewPtrConsumerGroupDescribeRequest()
				req.Version, req.Groups, req.IncludeAuthorizedOperations = dv, []string{group, "none-" + sfx}, true
				e.doFilter("the group and a missing one", req, func(r kmsg.Response) {
					for i := range r.(*kmsg.ConsumerGroupDescribeResponse).Groups {
						g := &r.(*kmsg.ConsumerGroupDescribeResponse).Groups[i]
						for j := range g.Members {
							// Client host and ID are the connection's.
							g.Members[j].ClientHost, g.Members[j].ClientID = "", ""
						}
					}
				})
			}
			hb("leave", member, -1, false)
		})
		e.each(kmsg.DescribeGroups, func(v int16) {
			// A consumer group is no classic group: Dead, and from v6
			// (KIP-1043) GROUP_ID_NOT_FOUND.
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version = v
			req.Groups = []string{fmt.Sprintf("cg-v%d-%s", e.common[int16(kmsg.ConsumerGroupHeartbeat)][0], sfx)}
			e.do("a consumer group", req)
		})
	}, map[string]string{
		"|Configs[min.insync.replicas]":              diffMinISRSource,
		"ConsumerGroupDescribe|AuthorizedOperations": diffGroupOps,
	}, withArgs("--group-consumer-session-timeout", "6s", "--group-consumer-heartbeat-interval", "500ms"))
}

// diffScenarioSASL: the SASL and SCRAM credential APIs on a PLAINTEXT
// listener at every common version: SaslHandshake (PLAIN, an unknown
// mechanism), SaslAuthenticate without a handshake, AlterUserScramCredentials
// (upsert, too few iterations, an unknown mechanism, deleting a missing
// credential), DescribeUserScramCredentials (the user, a missing one).
func diffScenarioSASL(t *testing.T) {
	sfx := diffSuffix(t)
	user := "diff-" + sfx
	frame := func(req kmsg.Request) []byte {
		return kmsg.NewRequestFormatter(kmsg.FormatterClientID("diff")).AppendRequest(nil, req, 7)
	}
	diffRun(t, func(e *diffEnv) {
		e.each(kmsg.SASLHandshake, func(v int16) {
			for _, mech := range []string{"PLAIN", "NOPE"} {
				req := kmsg.NewPtrSASLHandshakeRequest()
				req.Version, req.Mechanism = v, mech
				// A fresh connection each: a handshake changes its state.
				e.rawOutcome(fmt.Sprintf("SaslHandshake v%d %s on PLAINTEXT", v, mech), frame(req), kmsg.NewPtrSASLHandshakeResponse())
				diffCovered.add(int16(kmsg.SASLHandshake), v, e.common)
			}
		})
		e.each(kmsg.SASLAuthenticate, func(v int16) {
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.Version, req.SASLAuthBytes = v, []byte("\x00u\x00p")
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.Version = v
			e.rawOutcome(fmt.Sprintf("SaslAuthenticate v%d without a handshake", v), frame(req), resp)
			diffCovered.add(int16(kmsg.SASLAuthenticate), v, e.common)
		})
		e.each(kmsg.AlterUserSCRAMCredentials, func(v int16) {
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			req.Version = v
			up := func(name string, mech int8, iters int32) {
				u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				u.Name, u.Mechanism, u.Iterations = name, mech, iters
				u.Salt, u.SaltedPassword = []byte("0123456789abcdef"), make([]byte, 32+32*int(mech-1))
				req.Upsertions = append(req.Upsertions, u)
			}
			up(user, 1, 4096)
			up(user+"-few", 1, 10)
			up(user+"-mech", 9, 4096)
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = user+"-none", 2
			req.Deletions = append(req.Deletions, d)
			e.do("upsert, too few iterations, an unknown mechanism, delete a missing credential", req)
		})
		e.each(kmsg.DescribeUserSCRAMCredentials, func(v int16) {
			req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
			req.Version = v
			for _, name := range []string{user, user + "-missing"} {
				u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
				u.Name = name
				req.Users = append(req.Users, u)
			}
			// Kafka applies credentials through its metadata image, a
			// moment after the alter answered.
			e.doRetry("the user and a missing one", req, func(r kmsg.Response) bool {
				res := r.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results
				return len(res) == 0 || res[0].ErrorCode != 0
			})
		})
	}, map[string]string{})
}

// servedFeature: the features this broker advertises (ApiVersions v3+),
// compared with Apache Kafka's levels by TestDifferential.
func servedFeature(name string) bool { return name == "group.version" || name == "share.version" }
