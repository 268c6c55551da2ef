package events

import (
	"fmt"
	"strings"

	"github.com/vibemq/broker/pebblestore"
)

// StreamsPageMax is the most streams one Streams call returns.
const StreamsPageMax = 1000

// Streams lists the store's streams in name order: those after after
// (exclusive) that start with prefix, at most limit (1..StreamsPageMax).
// next is the last name returned when more may follow, else "". Deleted and
// tombstoned streams are listed with their state. The heads come from the
// stream rows: an append whose events are not yet durable shows as a
// HeadPosition of -1 (Stream reads the durable head).
func (st *Store) Streams(after, prefix string, limit int) (streams []StreamInfo, next string, err error) {
	if limit < 1 || limit > StreamsPageMax {
		return nil, "", fmt.Errorf("%w: limit must be 1 to %d, not %d", ErrOutOfRange, StreamsPageMax, limit)
	}
	db := st.svc.store
	p := storeTablePrefix(pebblestore.PrefixEventStream, st.id)
	lower := append(append([]byte(nil), p...), prefix...)
	upper := pebblestore.PrefixEnd(lower)
	if prefix == "" {
		upper = pebblestore.PrefixEnd(p)
	}
	it, err := db.NewIter(lower, upper)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer it.Close()
	ok := it.First()
	switch {
	case after == "":
	case strings.HasPrefix(after, prefix):
		ok = it.SeekGE(append(append(append([]byte(nil), p...), after...), 0))
	case after > prefix:
		ok = false // every name with prefix sorts before after
	}
	durable := st.NextPosition()
	for ; ok; ok = it.Next() {
		if len(streams) == limit {
			return streams, streams[limit-1].Stream, nil
		}
		name := string(it.Key()[len(p):])
		v, err := it.Value()
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrStorage, err)
		}
		id, err := decodeU64(v, "stream catalog", it.Key())
		if err != nil {
			return nil, "", err
		}
		hk := streamHeadKey(st.id, uint64(id))
		hv, err := db.Get(hk)
		if err != nil {
			return nil, "", fmt.Errorf("%w: stream %q has a catalog row but no head: %v", pebblestore.ErrCorruption, name, err)
		}
		head, err := decodeStreamHead(hv, hk)
		if err != nil {
			return nil, "", err
		}
		info := StreamInfo{Stream: name, State: head.State.String(), HeadRevision: head.LastRevision, FirstRevision: head.TruncateBefore, HeadPosition: -1}
		if head.State == streamLive && head.LastPosition >= 0 && head.LastPosition < durable {
			info.HeadPosition = head.LastPosition
		}
		streams = append(streams, info)
	}
	return streams, "", nil
}
