package kafkaproto

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Incremental fetch sessions (KIP-227).
//
// A session remembers, per partition, the fetch offset and max bytes the
// client last asked for and the offsets it was last told. An incremental
// request names only partitions whose fetch position changed (and forgets
// some); the response carries only partitions with news: records, an error,
// or a changed high watermark, last stable offset or log start offset.
//
// Epochs: a session is created by a request with epoch 0 and answered with
// its ID; the next request must carry epoch 1, then 2, and so on (wrapping
// from MaxInt32 to 1). Epoch -1 closes the session.

const (
	sessionEpochInitial int32 = 0
	sessionEpochFinal   int32 = -1
)

type sessionKey struct {
	topicID   [16]byte
	topic     string
	partition int32
}

type sessionPartition struct {
	key         sessionKey
	fetchOffset int64
	maxBytes    int32
	// What the client was last told; -1 before the first response.
	highWatermark, lastStable, logStart int64
}

type fetchSession struct {
	id        int32
	mu        sync.Mutex // held by the one fetch using the session
	nextEpoch int32
	parts     []*sessionPartition
	index     map[sessionKey]*sessionPartition
	lastUsed  time.Time
}

// upsert adds a partition or updates its position.
// REQUIRES: fs.mu held.
func (fs *fetchSession) upsert(k sessionKey, offset int64, maxBytes int32) {
	if sp, ok := fs.index[k]; ok {
		sp.fetchOffset, sp.maxBytes = offset, maxBytes
		return
	}
	sp := &sessionPartition{key: k, fetchOffset: offset, maxBytes: maxBytes, highWatermark: -1, lastStable: -1, logStart: -1}
	fs.index[k] = sp
	fs.parts = append(fs.parts, sp)
}

// forget removes a partition.
// REQUIRES: fs.mu held.
func (fs *fetchSession) forget(k sessionKey) {
	if _, ok := fs.index[k]; !ok {
		return
	}
	delete(fs.index, k)
	for i, sp := range fs.parts {
		if sp.key == k {
			fs.parts = append(fs.parts[:i], fs.parts[i+1:]...)
			break
		}
	}
}

func (fs *fetchSession) bumpEpoch() {
	if fs.nextEpoch == math.MaxInt32 {
		fs.nextEpoch = 1
	} else {
		fs.nextEpoch++
	}
}

// fetchSessions is the broker's session cache, bounded in size; when full,
// the least recently used session is evicted (its client gets
// FETCH_SESSION_ID_NOT_FOUND and starts a new one).
type fetchSessions struct {
	mu   sync.Mutex
	max  int
	byID map[int32]*fetchSession
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, byID: make(map[int32]*fetchSession)}
}

// create registers a new session, evicting the least recently used one
// when the cache is full. It returns nil when max is 0.
func (c *fetchSessions) create(now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max <= 0 {
		return nil
	}
	if len(c.byID) >= c.max {
		var oldest *fetchSession
		for _, s := range c.byID {
			if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		delete(c.byID, oldest.id)
	}
	var id int32
	for id == 0 || c.byID[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, nextEpoch: 1, index: make(map[sessionKey]*sessionPartition), lastUsed: now}
	c.byID[id] = s
	return s
}

func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	delete(c.byID, id)
	c.mu.Unlock()
}
