package main

import (
	"time"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/cluster"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/txns"
)

// The transaction coordinator on a replicated __transaction_state
// (transaction-state-log-replication-factor above 1; DESIGN.md
// "Cluster", Coordinators that fail over): as the group coordinator's
// (cluster_coordinators.go), each partition is a Raft group run by the
// replica manager, and this broker coordinates the partition's
// transactional IDs while it leads the group: txns.StartLoad on gaining
// it in a new term, txns.Load once the earlier terms' entries are
// applied, txns.UnloadPartition on losing it. The coordinator's writes
// go through txnStateLog (Host.Enqueue), answered once committed and
// applied.

// switchReplicatedTxns switches tc to replicated __transaction_state
// partitions once the metadata places the topic with replicas, and
// reports whether it did (or had). Without the marker sender tc serves
// no transactional ID then (the error is logged).
func switchReplicatedTxns(md *cluster.Metadata, tc *txns.Coordinator, log zerolog.Logger) bool {
	if _, ok := md.CoordinatorGroup(kafkaproto.TransactionStateTopic, 0); !ok {
		return false
	}
	n := int32(len(md.CoordinatorLeaders(kafkaproto.TransactionStateTopic)))
	if n == 0 {
		return false
	}
	if err := tc.UseReplicatedLog(func(id string) int32 { return groups.PartitionFor(id, n) }); err != nil {
		log.Error().Err(err).Msg("the transaction coordinator cannot serve a replicated __transaction_state")
	}
	return true
}

// useReplicatedTxns is switchReplicatedTxns before CoordinatorLeaders
// routes anything by a replicated placement's leaders (a restart
// replaying a stale leader record must not serve from local rows).
func (k *kafkaCluster) useReplicatedTxns() {
	if k.txns == nil || k.txnsReplicated.Load() {
		return
	}
	if switchReplicatedTxns(k.md, k.txns, k.log) {
		k.txnsReplicated.Store(true)
	}
}

// useReplicatedTxns is the replica manager's switch, before it follows
// any leadership of __transaction_state. REQUIRES: called from run.
func (m *replicaManager) useReplicatedTxns() {
	if m.txns == nil || m.txnsReplicated {
		return
	}
	m.txnsReplicated = switchReplicatedTxns(m.md, m.txns, m.log)
}

// followTxnCoordinator loads or unloads the transactional IDs of
// partition r of a replicated __transaction_state as this broker's
// leadership of its Raft group g changes. REQUIRES: called from run.
func (m *replicaManager) followTxnCoordinator(g uint64, r *replica, st cluster.GroupStatus, ok bool) {
	if m.txns == nil || !m.txnsReplicated || !r.rp.Coordinator || r.rp.Topic != kafkaproto.TransactionStateTopic {
		return
	}
	p := r.rp.Partition
	m.followCoordinatorLoad(g, st, ok, coordinatorSteps{
		unload: func() { m.txns.UnloadPartition(p) },
		startLoad: func(term uint64) {
			m.txns.StartLoad(p, term, coordinatorLog{host: m.host, group: g, log: r.log, notCoordinator: txns.ErrNotCoordinator, what: "transaction state"})
		},
		load: func(term uint64) error {
			start := time.Now()
			res, err := m.txns.Load(p, term)
			switch {
			case err != nil:
				m.log.Error().Err(err).Int32("partition", p).Dur("retry_in", loadRetry).Msg("cannot load the transactional ids of the transaction state partition; they are not served meanwhile")
			case res.Loaded:
				m.log.Info().Int32("partition", p).Uint64("epoch", term).Int("records", res.Records).Int("transactional_ids", res.IDs).
					Int("resumed", res.Resumed).Dur("took", time.Since(start)).Msg("transaction state partition loaded; coordinating its transactional ids")
			}
			return err
		},
	})
}

var _ txns.StateLog = coordinatorLog{}
