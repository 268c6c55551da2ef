package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// Storage admin routes (VibeMQ's storage management contract):
//
//	GET  /v1/admin/storage   statistics: records, topics, queues, events, bytes
//	POST /v1/admin/backup    {"dir": "/abs/path"}: online backup (Pebble checkpoint + FORMAT marker)
//	POST /v1/admin/compact   compact the whole keyspace
//	POST /v1/admin/verify    re-check the CRC of every stored batch
//
// Compact and verify run to completion within the request. With
// "Accept: application/x-ndjson" they stream one {"progress":{"done","total"}}
// line now and then and end with {"result": ...} or {"error": ...}; the CLI
// draws its progress bar from those lines. Restore is offline only
// (`broker storage restore`). These routes act on the broker's own
// filesystem: expose the HTTP listener only to administrators.

// StorageConfig wires the storage admin routes.
type StorageConfig struct {
	Store  *pebblestore.Store
	Topics *topics.Manager
	// Events, when set, adds event store counts to the statistics.
	Events *events.Service
	// QueueCounts, when set, adds the number of queues and of dead-lettered
	// messages to the statistics.
	QueueCounts func() (queues, deadLetters int64)
}

// StorageStats are the statistics of GET /v1/admin/storage and `broker
// storage stats`.
type StorageStats struct {
	DataDir    string `json:"data_dir"`
	Topics     int    `json:"topics"`
	Partitions int    `json:"partitions"`
	// Messages counts the records of every partition log (queues, dead
	// letters and event stores included): the offset span between each
	// log start and high watermark.
	Messages    int64        `json:"messages"`
	Queues      *int64       `json:"queues,omitempty"`
	DeadLetters *int64       `json:"dead_letters,omitempty"`
	EventStores *int         `json:"event_stores,omitempty"`
	Events      *int64       `json:"events,omitempty"`
	Streams     *int64       `json:"streams,omitempty"`
	Bytes       uint64       `json:"bytes"`
	Store       StoreSummary `json:"store"`
}

// StoreSummary is pebblestore.Summary on the wire.
type StoreSummary struct {
	DiskUsageBytes  uint64 `json:"disk_usage_bytes"`
	MemtableBytes   uint64 `json:"memtable_bytes"`
	WALBytes        uint64 `json:"wal_bytes"`
	Tables          int64  `json:"sstables"`
	TablesBytes     int64  `json:"sstables_bytes"`
	BlobFiles       uint64 `json:"blob_files"`
	BlobFilesBytes  uint64 `json:"blob_files_bytes"`
	L0Sublevels     int32  `json:"l0_sublevels"`
	Compactions     int64  `json:"compactions"`
	CompactionDebt  uint64 `json:"compaction_debt_bytes"`
	Flushes         int64  `json:"flushes"`
	BlockCacheBytes int64  `json:"block_cache_bytes"`
	BlockCacheHits  int64  `json:"block_cache_hits"`
	BlockCacheMiss  int64  `json:"block_cache_misses"`
}

// CollectStorageStats gathers the statistics, online or offline. The
// domains compute them (topics.Manager.LogStats, events.Service.Stats,
// StorageConfig.QueueCounts, pebblestore.Store.Summary); this only puts
// them in the shape of the route's JSON.
func CollectStorageStats(cfg StorageConfig) StorageStats {
	logs := cfg.Topics.LogStats()
	out := StorageStats{DataDir: cfg.Store.Dir(), Topics: logs.Topics, Partitions: logs.Partitions, Messages: logs.Messages}
	if cfg.QueueCounts != nil {
		q, d := cfg.QueueCounts()
		out.Queues, out.DeadLetters = &q, &d
	}
	if cfg.Events != nil {
		st := cfg.Events.Stats()
		out.EventStores, out.Events, out.Streams = &st.Stores, &st.Events, &st.Streams
	}
	out.Store = StoreSummary(cfg.Store.Summary())
	out.Bytes = out.Store.DiskUsageBytes
	return out
}

type storageAPI struct {
	cfg     StorageConfig
	running sync.Mutex // one compaction, verify or backup at a time
}

// RegisterStorage adds the storage admin routes. Call before Start.
func (s *Server) RegisterStorage(cfg StorageConfig) {
	api := &storageAPI{cfg: cfg}
	s.Handle("GET /v1/admin/storage", http.HandlerFunc(api.handleStats))
	s.Handle("POST /v1/admin/backup", http.HandlerFunc(api.handleBackup))
	s.Handle("POST /v1/admin/compact", http.HandlerFunc(api.handleCompact))
	s.Handle("POST /v1/admin/verify", http.HandlerFunc(api.handleVerify))
}

func (api *storageAPI) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, CollectStorageStats(api.cfg))
}

// BackupRequest is the body of POST /v1/admin/backup.
type BackupRequest struct {
	// Dir is an absolute path on the broker's machine; it must not exist
	// or be empty.
	Dir string `json:"dir"`
}

// BackupInfo is pebblestore.BackupInfo on the wire.
type BackupInfo struct {
	Dir   string `json:"dir"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}

// BackupResult answers a backup.
type BackupResult struct {
	BackupInfo
	DurationMs int64 `json:"duration_ms"`
}

func (api *storageAPI) lock(w http.ResponseWriter) bool {
	if !api.running.TryLock() {
		writeError(w, newNativeError("task_already_running", "another backup, compaction or verify is running; wait for it to finish"))
		return false
	}
	return true
}

func (api *storageAPI) handleBackup(w http.ResponseWriter, r *http.Request) {
	var req BackupRequest
	if e := decodeBody(w, r, bodyRule{limit: 64 << 10, required: true}, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Dir == "" || !filepath.IsAbs(req.Dir) {
		writeError(w, newNativeError("invalid_path", "dir must be an absolute path on the broker's machine, not %q", req.Dir).with("field", "dir"))
		return
	}
	if !api.lock(w) {
		return
	}
	defer api.running.Unlock()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	start := time.Now()
	info, err := api.cfg.Store.Backup(req.Dir)
	switch {
	case errors.Is(err, pebblestore.ErrTargetNotEmpty):
		writeError(w, newNativeError("target_not_empty", "%s", strings.TrimPrefix(err.Error(), "pebblestore: ")).with("field", "dir"))
		return
	case err != nil:
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, BackupResult{BackupInfo: BackupInfo(info), DurationMs: time.Since(start).Milliseconds()})
}

// CompactResult answers a compaction.
type CompactResult struct {
	Ranges      int    `json:"ranges"`
	DurationMs  int64  `json:"duration_ms"`
	BytesBefore uint64 `json:"bytes_before"`
	BytesAfter  uint64 `json:"bytes_after"`
}

func (api *storageAPI) handleCompact(w http.ResponseWriter, r *http.Request) {
	if !api.lock(w) {
		return
	}
	defer api.running.Unlock()
	p := startProgress(w, r)
	start := time.Now()
	res := CompactResult{BytesBefore: api.cfg.Store.DiskUsage()}
	err := api.cfg.Store.CompactAll(func(done, total int) {
		res.Ranges = total
		p.progress(int64(done), int64(total))
	})
	if err != nil {
		p.fail(errorOf(err))
		return
	}
	res.DurationMs = time.Since(start).Milliseconds()
	res.BytesAfter = api.cfg.Store.DiskUsage()
	p.finish(res)
}

// VerifyResult answers a verify pass.
type VerifyResult struct {
	OK bool `json:"ok"`
	VerifyReport
	DurationMs int64 `json:"duration_ms"`
}

// VerifyReport is topics.VerifyResult on the wire.
type VerifyReport struct {
	Topics       int      `json:"topics"`
	Partitions   int      `json:"partitions"`
	Batches      int64    `json:"batches"`
	Bytes        int64    `json:"bytes"`
	Damaged      []Damage `json:"damaged"`
	DamagedTotal int64    `json:"damaged_total"`
}

// Damage is topics.Damage on the wire.
type Damage struct {
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Reason    string `json:"reason"`
}

// NewVerifyReport is r in its wire form.
func NewVerifyReport(r topics.VerifyResult) VerifyReport {
	out := VerifyReport{Topics: r.Topics, Partitions: r.Partitions, Batches: r.Batches, Bytes: r.Bytes, DamagedTotal: r.DamagedTotal}
	if r.Damaged != nil {
		out.Damaged = make([]Damage, len(r.Damaged))
		for i, d := range r.Damaged {
			out.Damaged[i] = Damage(d)
		}
	}
	return out
}

func (api *storageAPI) handleVerify(w http.ResponseWriter, r *http.Request) {
	if !api.lock(w) {
		return
	}
	defer api.running.Unlock()
	p := startProgress(w, r)
	start := time.Now()
	res, err := topics.VerifyLog(api.cfg.Store, topics.VerifyOptions{Progress: p.progress})
	if err != nil {
		p.fail(newNativeError("storage_corrupt", "the store could not be read to the end: %v", err))
		return
	}
	p.finish(VerifyResult{OK: res.DamagedTotal == 0, VerifyReport: NewVerifyReport(res), DurationMs: time.Since(start).Milliseconds()})
}

// progressWriter answers a long admin request: plain JSON at the end, or
// NDJSON progress lines when the client asked for application/x-ndjson.
type progressWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	stream bool
	last   time.Time
	broken bool
}

const progressInterval = 200 * time.Millisecond

func startProgress(w http.ResponseWriter, r *http.Request) *progressWriter {
	p := &progressWriter{w: w, rc: http.NewResponseController(w)}
	_ = p.rc.SetWriteDeadline(time.Time{})
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "application/x-ndjson") {
			p.stream = true
		}
	}
	if p.stream {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_ = p.rc.Flush()
	}
	return p
}

func (p *progressWriter) line(v any) {
	if p.broken {
		return
	}
	body, _ := json.Marshal(v)
	if _, err := p.w.Write(append(body, '\n')); err != nil {
		p.broken = true
		return
	}
	if err := p.rc.Flush(); err != nil {
		p.broken = true
	}
}

func (p *progressWriter) progress(done, total int64) {
	if !p.stream || (time.Since(p.last) < progressInterval && done != total) {
		return
	}
	p.last = time.Now()
	p.line(map[string]any{"progress": map[string]int64{"done": done, "total": total}})
}

func (p *progressWriter) finish(v any) {
	if p.stream {
		p.line(map[string]any{"result": v})
		return
	}
	writeJSON(p.w, http.StatusOK, v)
}

func (p *progressWriter) fail(e *nativeError) {
	if p.stream {
		p.line(map[string]any{"error": e})
		return
	}
	writeError(p.w, e)
}
