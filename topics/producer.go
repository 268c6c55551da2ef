package topics

import (
	"encoding/binary"
	"fmt"
	"math"
)

// producerBatchesKept is how many recent batches per producer and partition
// are remembered for duplicate detection; Kafka keeps 5, matching the
// largest max.in.flight.requests.per.connection an idempotent producer may use.
const producerBatchesKept = 5

// producerBatch is the metadata of one appended batch of an idempotent producer.
type producerBatch struct {
	FirstSeq    int32
	LastSeq     int32
	BaseOffset  int64
	OffsetDelta int32
	Timestamp   int64
}

// producerState is what a partition remembers of one idempotent producer:
// its epoch, its last few batches, newest last, and the coordinator epoch
// of the last transaction marker written for it (KIP-98; -1 when none is
// known: no marker yet, or a row written before the field existed).
//
// Invariant: batches are in append order, all of epoch Epoch, at most
// producerBatchesKept of them. CoordinatorEpoch never decreases (a marker
// with a lower one is refused, checkMarkerLocked) and survives epoch bumps.
type producerState struct {
	Epoch            int16
	CoordinatorEpoch int32
	Batches          []producerBatch
}

// noCoordinatorEpoch is the coordinator epoch of a producer no marker was
// written for (Kafka's ProducerStateEntry starts at -1 too): any marker's
// epoch passes it.
const noCoordinatorEpoch = -1

// newProducerState is the state of a producer first seen with epoch.
func newProducerState(epoch int16) *producerState {
	return &producerState{Epoch: epoch, CoordinatorEpoch: noCoordinatorEpoch}
}

func (s *producerState) lastSeq() int32 {
	if len(s.Batches) == 0 {
		return -1
	}
	return s.Batches[len(s.Batches)-1].LastSeq
}

// findDuplicate returns the earlier batch with the same sequence range.
func (s *producerState) findDuplicate(epoch int16, firstSeq, lastSeq int32) (producerBatch, bool) {
	if s == nil || epoch != s.Epoch {
		return producerBatch{}, false
	}
	for _, b := range s.Batches {
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return b, true
		}
	}
	return producerBatch{}, false
}

// checkSequence decides whether a batch (epoch, firstSeq) may follow the
// state s, following Kafka's ProducerAppendInfo (KIP-98, KIP-360):
//   - an older epoch is fenced;
//   - a newer epoch must start at sequence 0;
//   - a producer the partition has never seen must start at 0;
//   - otherwise firstSeq must be lastSeq+1 (wrapping from MaxInt32 to 0).
func (s *producerState) checkSequence(epoch int16, firstSeq int32) error {
	if s == nil {
		if firstSeq != 0 {
			return fmt.Errorf("%w: first batch of a new producer has sequence %d, expected 0", ErrOutOfOrderSequence, firstSeq)
		}
		return nil
	}
	if epoch < s.Epoch {
		return fmt.Errorf("%w: epoch %d is older than the current epoch %d", ErrInvalidProducerEpoch, epoch, s.Epoch)
	}
	if epoch > s.Epoch {
		if firstSeq != 0 {
			return fmt.Errorf("%w: first batch of epoch %d has sequence %d, expected 0", ErrOutOfOrderSequence, epoch, firstSeq)
		}
		return nil
	}
	last := s.lastSeq()
	if last == -1 && firstSeq == 0 {
		return nil
	}
	if firstSeq == last+1 || (last == math.MaxInt32 && firstSeq == 0) {
		return nil
	}
	return fmt.Errorf("%w: expected sequence %d, got %d", ErrOutOfOrderSequence, nextSeq(last), firstSeq)
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

// record remembers an appended batch; epoch changes reset the history.
func (s *producerState) record(epoch int16, b producerBatch) {
	if epoch != s.Epoch {
		s.Epoch = epoch
		s.Batches = s.Batches[:0]
	}
	if len(s.Batches) == producerBatchesKept {
		copy(s.Batches, s.Batches[1:])
		s.Batches = s.Batches[:producerBatchesKept-1]
	}
	s.Batches = append(s.Batches, b)
}

func (s *producerState) clone() *producerState {
	if s == nil {
		return nil
	}
	return &producerState{Epoch: s.Epoch, CoordinatorEpoch: s.CoordinatorEpoch, Batches: append([]producerBatch(nil), s.Batches...)}
}

// Encoding of a producer state row (value of pebblestore.ProducerStateKey),
// version 2:
//
//	version u8 (=2) | epoch i16 | coordinatorEpoch i32 | n u8 | n × batch
//	batch: firstSeq i32 | lastSeq i32 | baseOffset i64 | offsetDelta i32 | timestamp i64
//
// Version 1 (before the coordinator epoch) lacks coordinatorEpoch; it still
// reads, as coordinator epoch -1 (unknown: any marker passes). Only version
// 2 is written.
const (
	producerStateVersion   = 2
	producerStateVersionV1 = 1
	producerBatchBytes     = 28
)

func (s *producerState) encode() []byte {
	b := make([]byte, 0, 8+len(s.Batches)*producerBatchBytes)
	b = append(b, producerStateVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(s.Epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.CoordinatorEpoch))
	b = append(b, byte(len(s.Batches)))
	for _, pb := range s.Batches {
		b = binary.BigEndian.AppendUint32(b, uint32(pb.FirstSeq))
		b = binary.BigEndian.AppendUint32(b, uint32(pb.LastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(pb.BaseOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(pb.OffsetDelta))
		b = binary.BigEndian.AppendUint64(b, uint64(pb.Timestamp))
	}
	return b
}

// decodeProducerState reads a producer state row of version 1 or 2.
func decodeProducerState(b []byte) (*producerState, error) {
	header := 0
	switch {
	case len(b) >= 4 && b[0] == producerStateVersionV1:
		header = 4
	case len(b) >= 8 && b[0] == producerStateVersion:
		header = 8
	default:
		return nil, fmt.Errorf("producer state row has unknown version or is truncated (%d bytes)", len(b))
	}
	n := int(b[header-1])
	if n > producerBatchesKept || len(b) != header+n*producerBatchBytes {
		return nil, fmt.Errorf("producer state row is %d bytes for %d batches", len(b), n)
	}
	s := &producerState{Epoch: int16(binary.BigEndian.Uint16(b[1:3])), CoordinatorEpoch: noCoordinatorEpoch, Batches: make([]producerBatch, n)}
	if header == 8 {
		s.CoordinatorEpoch = int32(binary.BigEndian.Uint32(b[3:7]))
	}
	p := b[header:]
	for i := range s.Batches {
		s.Batches[i] = producerBatch{
			FirstSeq:    int32(binary.BigEndian.Uint32(p[0:])),
			LastSeq:     int32(binary.BigEndian.Uint32(p[4:])),
			BaseOffset:  int64(binary.BigEndian.Uint64(p[8:])),
			OffsetDelta: int32(binary.BigEndian.Uint32(p[16:])),
			Timestamp:   int64(binary.BigEndian.Uint64(p[20:])),
		}
		p = p[producerBatchBytes:]
	}
	return s, nil
}
