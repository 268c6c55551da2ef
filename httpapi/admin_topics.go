package httpapi

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// TopicSummary is one topic of GET /v1/admin/topics.
type TopicSummary struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
	// Records and Bytes sum the partitions' stored batches.
	Records  int64  `json:"records"`
	Bytes    int64  `json:"bytes"`
	Internal bool   `json:"internal"`
	Owner    string `json:"owner,omitempty"`
}

// TopicPartitionInfo is one partition of GET /v1/admin/topics/{topic}.
type TopicPartitionInfo struct {
	Partition        int32 `json:"partition"`
	LogStartOffset   int64 `json:"log_start_offset"`
	HighWatermark    int64 `json:"high_watermark"`
	LastStableOffset int64 `json:"last_stable_offset"`
	Records          int64 `json:"records"`
	Bytes            int64 `json:"bytes"`
}

// TopicConfigInfo is one effective config of a topic.
type TopicConfigInfo struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// TopicDetail is GET /v1/admin/topics/{topic}.
type TopicDetail struct {
	TopicSummary
	PartitionList []TopicPartitionInfo `json:"partition_list"`
	Configs       []TopicConfigInfo    `json:"configs"`
}

func topicSummary(t *topics.Topic) TopicSummary {
	s := TopicSummary{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: t.NumPartitions(), Internal: topics.IsInternalTopic(t.Name), Owner: string(t.Owner())}
	for _, p := range t.Partitions() {
		st := p.Stats()
		s.Records += st.Records
		s.Bytes += st.Bytes
	}
	return s
}

func (api *adminAPI) listTopics(r adminRequest) (int, any, error) {
	after, prefix, limit, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	internal := r.URL.Query().Get("internal") == "true"
	out := struct {
		Topics []TopicSummary `json:"topics"`
		// Next is the after of the next page; absent on the last one.
		Next string `json:"next,omitempty"`
	}{Topics: []TopicSummary{}}
	for _, t := range api.cfg.Topics.Topics() { // sorted by name
		if t.Name <= after || !strings.HasPrefix(t.Name, prefix) || (!internal && topics.IsInternalTopic(t.Name)) || !visible(r.Request, t.Name) {
			continue
		}
		if len(out.Topics) == limit {
			out.Next = out.Topics[limit-1].Name
			break
		}
		out.Topics = append(out.Topics, topicSummary(t))
	}
	return http.StatusOK, out, nil
}

// CreateTopicRequest is the body of POST /v1/admin/topics, as `broker
// topics create`: partitions -1 or absent for the broker's default.
type CreateTopicRequest struct {
	Name         string            `json:"name"`
	Partitions   int32             `json:"partitions"`
	Configs      map[string]string `json:"configs"`
	ValidateOnly bool              `json:"validate_only"`
}

func (api *adminAPI) createTopic(r adminRequest) (int, any, error) {
	var req CreateTopicRequest
	if err := r.decode(&req); err != nil {
		return 0, nil, err
	}
	if req.Name == "" {
		return 0, nil, adminErrorf("invalid_name", "name", "name the topic to create")
	}
	if topics.IsInternalTopic(req.Name) {
		return 0, nil, adminErrorf("invalid_name", "name", "%s is an internal topic name", req.Name)
	}
	if req.Partitions < -1 {
		return 0, nil, adminErrorf("invalid_partitions", "partitions", "partitions must be at least 1, or -1 for the broker's default, not %d", req.Partitions)
	}
	if req.Partitions == 0 {
		req.Partitions = -1
	}
	t, err := api.cfg.Topics.CreateTopic(req.Name, req.Partitions, req.Configs, req.ValidateOnly)
	if err != nil {
		return 0, nil, err
	}
	if req.ValidateOnly {
		return http.StatusOK, map[string]any{"name": req.Name, "validate_only": true}, nil
	}
	return http.StatusCreated, topicDetail(t), nil
}

func topicDetail(t *topics.Topic) TopicDetail {
	d := TopicDetail{TopicSummary: topicSummary(t), PartitionList: []TopicPartitionInfo{}, Configs: []TopicConfigInfo{}}
	for _, p := range t.Partitions() {
		st := p.Stats()
		d.PartitionList = append(d.PartitionList, TopicPartitionInfo{
			Partition: p.Index, LogStartOffset: st.LogStartOffset, HighWatermark: st.HighWatermark,
			LastStableOffset: p.LastStableOffset(), Records: st.Records, Bytes: st.Bytes,
		})
	}
	for _, e := range t.EffectiveConfigs() {
		c := TopicConfigInfo{Name: e.Def.Name, Value: e.Value, Source: configSource(e.Source)}
		d.Configs = append(d.Configs, c)
	}
	sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Name < d.Configs[j].Name })
	return d
}

func configSource(s topics.ConfigSource) string {
	switch s {
	case topics.SourceTopic:
		return "topic"
	case topics.SourceDefault:
		return "default"
	case topics.SourceDynamicBroker:
		return "dynamic_broker"
	}
	return "static_broker"
}

func (api *adminAPI) topic(r adminRequest) (*topics.Topic, error) {
	name := r.PathValue("topic")
	t, ok := api.cfg.Topics.Topic(name)
	if !ok {
		return nil, adminErrorf("topic_not_found", "", "topic %q does not exist; list the topics with GET /v1/admin/topics", name)
	}
	return t, nil
}

func (api *adminAPI) describeTopic(r adminRequest) (int, any, error) {
	t, err := api.topic(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, topicDetail(t), nil
}

// AlterTopicConfigsRequest is the body of PATCH
// /v1/admin/topics/{topic}/configs, as `broker topics alter`: configs to
// set and configs to return to their defaults (IncrementalAlterConfigs).
type AlterTopicConfigsRequest struct {
	Set          map[string]string `json:"set"`
	Delete       []string          `json:"delete"`
	ValidateOnly bool              `json:"validate_only"`
}

func (api *adminAPI) alterTopicConfigs(r adminRequest) (int, any, error) {
	t, err := api.topic(r)
	if err != nil {
		return 0, nil, err
	}
	var req AlterTopicConfigsRequest
	if err := r.decode(&req); err != nil {
		return 0, nil, err
	}
	if len(req.Set) == 0 && len(req.Delete) == 0 {
		return 0, nil, adminErrorf("invalid_body", "set", "give configs to set or to delete")
	}
	var ops []topics.ConfigOp
	names := make([]string, 0, len(req.Set))
	for k := range req.Set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := req.Set[k]
		ops = append(ops, topics.ConfigOp{Name: k, Op: topics.ConfigOpSet, Value: &v})
	}
	for _, k := range req.Delete {
		if _, both := req.Set[k]; both {
			return 0, nil, adminErrorf("conflicting_fields", "delete", "config %s is both set and deleted", k)
		}
		ops = append(ops, topics.ConfigOp{Name: k, Op: topics.ConfigOpDelete})
	}
	if err := api.cfg.Topics.AlterTopicConfigs(t.Name, ops, req.ValidateOnly); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, topicDetail(t), nil
}

func (api *adminAPI) deleteTopic(r adminRequest) (int, any, error) {
	t, err := api.topic(r)
	if err != nil {
		return 0, nil, err
	}
	if topics.IsInternalTopic(t.Name) {
		return 0, nil, adminErrorf("topic_owned", "", "%s is an internal topic; it cannot be deleted", t.Name)
	}
	if err := api.cfg.Topics.DeleteTopic(t.Name); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// BrowsedRecord is one record of a browse page. Key, value and header
// values are base64 (null for a null key or value); the console shows them
// as text, JSON or hex.
type BrowsedRecord struct {
	Offset        int64           `json:"offset"`
	TimestampMs   int64           `json:"timestamp_ms"`
	Key           []byte          `json:"key"`
	Value         []byte          `json:"value"`
	Headers       []BrowsedHeader `json:"headers"`
	Transactional bool            `json:"transactional,omitempty"`
}

// BrowsedHeader is one record header.
type BrowsedHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// RecordsPage is GET /v1/admin/topics/{topic}/partitions/{partition}/records.
type RecordsPage struct {
	Topic          string          `json:"topic"`
	Partition      int32           `json:"partition"`
	LogStartOffset int64           `json:"log_start_offset"`
	HighWatermark  int64           `json:"high_watermark"`
	Records        []BrowsedRecord `json:"records"`
	// NextOffset is where the next page (or a follow poll) starts.
	NextOffset int64 `json:"next_offset"`
}

// browseRecords reads one page of a partition from offset (default: the
// log start) or from the first record at or after timestamp (ms); at most
// limit records (default 50, at most 500) and about 4 MiB. Nothing reads
// more than a page: the console pages and follows with next_offset.
func (api *adminAPI) browseRecords(r adminRequest) (int, any, error) {
	t, err := api.topic(r)
	if err != nil {
		return 0, nil, err
	}
	pv := r.PathValue("partition")
	pn, perr := strconv.ParseInt(pv, 10, 32)
	part, ok := t.Partition(int32(pn))
	if perr != nil || !ok {
		return 0, nil, adminErrorf("topic_not_found", "partition", "topic %s has no partition %q (it has %d)", t.Name, pv, t.NumPartitions())
	}
	offset, hasOffset, err := int64Param(r, "offset", 0)
	if err != nil {
		return 0, nil, err
	}
	ts, hasTS, err := int64Param(r, "timestamp", 0)
	if err != nil {
		return 0, nil, err
	}
	if hasOffset && hasTS {
		return 0, nil, adminErrorf("conflicting_fields", "timestamp", "give offset or timestamp, not both")
	}
	limit, hasLimit, err := int64Param(r, "limit", 1)
	if err != nil {
		return 0, nil, err
	}
	if !hasLimit {
		limit = 50
	}
	if limit > adminRecordsMax {
		return 0, nil, adminErrorf("out_of_range", "limit", "limit must be at most %d, not %d", adminRecordsMax, limit)
	}
	start := part.LogStartOffset()
	hwm := part.HighWatermark()
	switch {
	case hasTS:
		o, _, err := part.OffsetForTimestamp(ts)
		if err != nil {
			return 0, nil, err
		}
		offset = o
		if offset < 0 {
			offset = hwm // no record at or after the time
		}
	case !hasOffset:
		offset = start
	}
	offset = max(offset, start)
	page := RecordsPage{Topic: t.Name, Partition: part.Index, LogStartOffset: start, HighWatermark: hwm, Records: []BrowsedRecord{}, NextOffset: offset}
	if offset > hwm {
		return 0, nil, adminErrorf("out_of_range", "offset", "offset %d is past the end of %s/%d (high watermark %d)", offset, t.Name, part.Index, hwm)
	}
	var buf []byte
	next, read := offset, 0
	for next < hwm && len(page.Records) < int(limit) && read < adminRecordBytesMax {
		var res topics.ReadResult
		buf, res, err = part.Read(next, adminRecordBytesMax-read, true, buf[:0])
		if err != nil {
			return 0, nil, err
		}
		if res.Bytes == 0 {
			break
		}
		read += res.Bytes
		before := next
		for b := buf; len(b) >= topics.BatchHeaderSize && len(page.Records) < int(limit); {
			h, err := topics.ParseBatchHeader(b)
			if err != nil || h.Size() > len(b) {
				return 0, nil, fmt.Errorf("%w: a stored batch of %s/%d at offset %d does not parse: %v", pebblestore.ErrCorruption, t.Name, part.Index, next, err)
			}
			batch := b[:h.Size()]
			b = b[h.Size():]
			if h.LastOffset() < next {
				continue
			}
			if h.IsControl() {
				next = h.LastOffset() + 1
				continue
			}
			_, recs, err := topics.DecodeRecords(batch)
			if err != nil {
				return 0, nil, fmt.Errorf("%w: a stored batch of %s/%d at offset %d does not decode: %v", pebblestore.ErrCorruption, t.Name, part.Index, h.BaseOffset, err)
			}
			for _, rec := range recs {
				o := h.BaseOffset + int64(rec.OffsetDelta)
				if o < next || o >= hwm {
					continue
				}
				if len(page.Records) == int(limit) {
					break
				}
				tsMs := h.BaseTimestamp + rec.TimestampDelta
				if h.LogAppendTime() {
					tsMs = h.MaxTimestamp
				}
				br := BrowsedRecord{Offset: o, TimestampMs: tsMs, Key: rec.Key, Value: rec.Value, Headers: []BrowsedHeader{}, Transactional: h.IsTransactional()}
				for _, hd := range rec.Headers {
					br.Headers = append(br.Headers, BrowsedHeader{Key: hd.Key, Value: hd.Value})
				}
				page.Records = append(page.Records, br)
				next = o + 1
			}
			if len(page.Records) < int(limit) {
				next = max(next, h.LastOffset()+1)
			}
		}
		if next == before {
			break // nothing advanced: never loop
		}
	}
	page.NextOffset = min(next, hwm)
	return http.StatusOK, page, nil
}
