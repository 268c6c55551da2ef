package httpapi

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// Overview is GET /v1/admin/overview: what the console's first page shows.
// The totals are counters a client polls: the difference of
// offsets_total between two polls is the broker's throughput in records,
// lag_total the consumer groups' summed lag.
type Overview struct {
	ClusterID  string `json:"cluster_id"`
	NodeID     int32  `json:"node_id"`
	Version    string `json:"version"`
	StartedMs  int64  `json:"started_ms"`
	NowMs      int64  `json:"now_ms"`
	DataDir    string `json:"data_dir"`
	DiskTotal  int64  `json:"disk_total_bytes"`
	DiskUsable int64  `json:"disk_usable_bytes"`
	Topics     int    `json:"topics"`
	Partitions int    `json:"partitions"`
	// Records and Bytes sum the stored batches of every log.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// OffsetsTotal sums the high watermarks of every partition of the
	// non-internal topics: the records ever appended to them (minus those
	// of deleted topics).
	OffsetsTotal int64 `json:"offsets_total"`
	Groups       int   `json:"groups"`
	LagTotal     int64 `json:"lag_total"`
	Transactions int   `json:"open_transactions"`
}

func (api *adminAPI) overview(adminRequest) (int, any, error) {
	tm := api.cfg.Topics
	dir := tm.LogDir()
	o := Overview{
		ClusterID: tm.ClusterID(), NodeID: api.cfg.NodeID, Version: api.cfg.Version,
		NowMs: api.cfg.Now().UnixMilli(), DataDir: dir.Path, DiskTotal: dir.TotalBytes, DiskUsable: dir.UsableBytes,
	}
	if !api.cfg.Started.IsZero() {
		o.StartedMs = api.cfg.Started.UnixMilli()
	}
	for _, t := range tm.Topics() {
		o.Topics++
		internal := topics.IsInternalTopic(t.Name)
		for _, p := range t.Partitions() {
			o.Partitions++
			st := p.Stats()
			o.Records += st.Records
			o.Bytes += st.Bytes
			if !internal {
				o.OffsetsTotal += st.HighWatermark
			}
		}
	}
	if api.cfg.Groups != nil {
		lags := api.groupLags()
		o.Groups = len(api.cfg.Groups.ListGroups(nil, nil))
		for _, l := range lags {
			o.LagTotal += l
		}
	}
	if api.cfg.Txns != nil {
		for _, d := range api.cfg.Txns.List() {
			if d.State == txns.StateOngoing {
				o.Transactions++
			}
		}
	}
	return http.StatusOK, o, nil
}

// TransactionInfo is one transactional ID of GET /v1/admin/transactions.
type TransactionInfo struct {
	TransactionalID string               `json:"transactional_id"`
	ProducerID      int64                `json:"producer_id"`
	Epoch           int16                `json:"epoch"`
	State           string               `json:"state"`
	TimeoutMs       int32                `json:"timeout_ms"`
	StartMs         int64                `json:"start_ms"`
	DurationMs      int64                `json:"duration_ms,omitempty"`
	Partitions      []TransactionPartIDs `json:"partitions"`
}

// TransactionPartIDs is a partition of an open transaction.
type TransactionPartIDs struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (api *adminAPI) listTransactions(r adminRequest) (int, any, error) {
	after, prefix, limit, err := pageParams(r)
	if err != nil {
		return 0, nil, err
	}
	state := r.URL.Query().Get("state")
	all := api.cfg.Txns.List()
	sort.Slice(all, func(i, j int) bool { return all[i].TransactionalID < all[j].TransactionalID })
	now := api.cfg.Now()
	out := struct {
		Transactions []TransactionInfo `json:"transactions"`
		Next         string            `json:"next,omitempty"`
	}{Transactions: []TransactionInfo{}}
	for _, d := range all {
		if d.TransactionalID <= after || !strings.HasPrefix(d.TransactionalID, prefix) || (state != "" && d.State.String() != state) || !visible(r.Request, d.TransactionalID) {
			continue
		}
		if len(out.Transactions) == limit {
			out.Next = out.Transactions[limit-1].TransactionalID
			break
		}
		ti := TransactionInfo{TransactionalID: d.TransactionalID, ProducerID: d.ProducerID, Epoch: d.Epoch, State: d.State.String(), TimeoutMs: d.TimeoutMs, StartMs: d.StartMs, Partitions: []TransactionPartIDs{}}
		if d.StartMs >= 0 {
			ti.DurationMs = now.Sub(time.UnixMilli(d.StartMs)).Milliseconds()
		}
		for _, p := range d.Partitions {
			ti.Partitions = append(ti.Partitions, TransactionPartIDs{Topic: p.Topic, Partition: p.Partition})
		}
		out.Transactions = append(out.Transactions, ti)
	}
	return http.StatusOK, out, nil
}
