package queues

import (
	"errors"
	"fmt"

	"github.com/vibemq/broker/topics"
)

// storedRecord is one message as the log holds it.
type storedRecord struct {
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []topics.RecordHeader
}

// recordReader reads records from a queue's topic, decoding each stored
// batch once per reader.
type recordReader struct {
	topic  *topics.Topic
	cached map[int32]*decodedBatch
}

type decodedBatch struct {
	base, last int64
	h          topics.BatchHeader
	records    []topics.Record
}

var errRecordGone = errors.New("queues: the record is no longer in the log")

func newRecordReader(t *topics.Topic) *recordReader {
	return &recordReader{topic: t, cached: map[int32]*decodedBatch{}}
}

// read returns the record at m, or errRecordGone when retention removed it.
func (r *recordReader) read(m msgKey) (storedRecord, error) {
	d := r.cached[m.part]
	if d == nil || m.off < d.base || m.off > d.last {
		p, ok := r.topic.Partition(m.part)
		if !ok {
			return storedRecord{}, errRecordGone
		}
		raw, _, err := p.Read(m.off, 1, true, nil)
		if err != nil {
			if errors.Is(err, topics.ErrOffsetOutOfRange) || errors.Is(err, topics.ErrUnknownTopic) {
				return storedRecord{}, errRecordGone
			}
			return storedRecord{}, err
		}
		if len(raw) == 0 {
			return storedRecord{}, errRecordGone
		}
		h, recs, err := topics.DecodeRecords(raw[:min(len(raw), batchSize(raw))])
		if err != nil {
			return storedRecord{}, fmt.Errorf("queues: reading %s %s: %w", r.topic.Name, fmtID(m), err)
		}
		d = &decodedBatch{base: h.BaseOffset, last: h.LastOffset(), h: h, records: recs}
		r.cached[m.part] = d
	}
	for i := range d.records {
		rec := &d.records[i]
		if d.base+int64(rec.OffsetDelta) == m.off {
			ts := d.h.BaseTimestamp + rec.TimestampDelta
			if d.h.LogAppendTime() {
				ts = d.h.MaxTimestamp
			}
			return storedRecord{Timestamp: ts, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}, nil
		}
	}
	return storedRecord{}, errRecordGone
}

func batchSize(raw []byte) int {
	h, err := topics.ParseBatchHeader(raw)
	if err != nil {
		return len(raw)
	}
	return h.Size()
}

// encodeBatch builds one uncompressed v2 batch holding recs, timestamped now.
func encodeBatch(recs []storedRecord, now int64) ([]byte, error) {
	out := make([]topics.Record, len(recs))
	maxTS := now
	for i := range recs {
		ts := recs[i].Timestamp
		if ts == 0 {
			ts = now
		}
		maxTS = max(maxTS, ts)
		out[i] = topics.Record{TimestampDelta: ts - now, OffsetDelta: int32(i), Key: recs[i].Key, Value: recs[i].Value, Headers: recs[i].Headers}
		if out[i].Value == nil {
			out[i].Value = []byte{}
		}
	}
	return topics.EncodeBatch(topics.BatchHeader{
		BaseTimestamp: now, MaxTimestamp: maxTS, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, out)
}
