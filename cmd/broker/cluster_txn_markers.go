package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/internal/loglimit"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/txns"
)

// txnMarkers is the transaction coordinator's way to other brokers
// (txns.MarkerSender, C1 of the plan in DESIGN.md, issue 13): it decides
// which partitions of a transaction this broker writes itself, and sends
// a WriteTxnMarkers v1 (KIP-98) for the others to their current leaders,
// resolved from the applied metadata at every attempt (leaders move).
//
// Transport: a franz-go client of the brokers' registered Kafka address
// (each broker's first listener), without credentials: it exists only
// when this broker's first listener is PLAINTEXT (newTxnMarkers); the
// receiving handler requires CLUSTER_ACTION, which an authorizer grants
// the anonymous principal only through an ACL.
type txnMarkers struct {
	nodeID int32
	log    zerolog.Logger
	// kc is bound by newKafka, before any request is served; until then
	// Send answers every partition retriable.
	kc atomic.Pointer[kafkaCluster]
	// limit rate-limits the warnings of a delivery that keeps failing.
	limit loglimit.Limiter

	mu     sync.Mutex
	client *kgo.Client
	closed bool
}

var _ txns.MarkerSender = (*txnMarkers)(nil)

// markerRequestTimeout bounds one WriteTxnMarkers exchange with a leader;
// past it the partitions are sent again after the coordinator's backoff.
const markerRequestTimeout = 10 * time.Second

// newTxnMarkers is the marker sender of a cluster broker, nil on a single
// node. With a first listener other than PLAINTEXT it is nil too and says
// so: the sender has no credentials for SASL nor trust for TLS, so
// transactions keep to the partitions their coordinator leads
// (AddPartitionsToTxn answers INVALID_TXN_STATE for the others).
func newTxnMarkers(cfg *Config, log zerolog.Logger) *txnMarkers {
	if cfg.ClusterPeers == "" {
		return nil
	}
	specs, err := cfg.listeners()
	if err != nil || len(specs) == 0 {
		return nil // refused when the listeners open
	}
	if p := specs[0].protocol; p != kafkaproto.Plaintext {
		log.Warn().Str("listener", specs[0].name).Str("protocol", string(p)).
			Msg("transactions across brokers are off: the transaction coordinator sends markers to the other brokers' first listener without credentials, so it must be PLAINTEXT (an inter-broker listener); a transaction may only hold partitions its coordinator leads")
		return nil
	}
	return &txnMarkers{nodeID: cfg.NodeID, log: log.With().Str("component", "txn-markers").Logger()}
}

// close closes the client; Send answers every partition retriable after.
func (s *txnMarkers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

// bound is the cluster once its metadata is bound (startCluster), else
// nil: a transaction timing out at start, before, is decided then.
func (s *txnMarkers) bound() *kafkaCluster {
	if k := s.kc.Load(); k != nil && k.serving.Load() {
		return k
	}
	return nil
}

// LocalPartition implements txns.MarkerSender: an RF 1 partition led
// here, or a topic the metadata does not have (this broker's own). Before
// the metadata is bound every partition is remote: its marker waits for
// it and goes to the leader then (this broker's handler for its own).
func (s *txnMarkers) LocalPartition(topic string, p int32) bool {
	k := s.bound()
	if k == nil {
		return false
	}
	if _, _, _, ok := k.ReplicatedState(topic, p); ok {
		return false // even when led here: through its Raft log
	}
	if k.txnsReplicated.Load() {
		return false // a replicated __transaction_state: every marker is sent
	}
	if r, ok := k.Replicas(topic, p); ok {
		return r[0] == s.nodeID
	}
	// Not in the applied metadata: this broker's own topic is local; a
	// cluster topic not replayed yet after a restart is not known to be.
	t, ok := k.tm.Topic(topic)
	return !ok || !t.IsClusterTopic()
}

// GroupMarker implements txns.MarkerSender (C4's rule: a group is local
// when this broker coordinates it and __consumer_offsets has replication
// factor 1). Before the metadata is bound a group is local (its staged
// offsets, if any, are written here as on a single node).
func (s *txnMarkers) GroupMarker(group string) (txns.TopicPartition, bool) {
	k := s.bound()
	if k == nil {
		return txns.TopicPartition{}, false
	}
	leaders := k.CoordinatorLeaders(groups.OffsetsTopic)
	if len(leaders) == 0 {
		return txns.TopicPartition{}, false
	}
	p := groups.PartitionFor(group, int32(len(leaders)))
	_, replicated := k.md.CoordinatorGroup(groups.OffsetsTopic, 0)
	if leaders[p] == s.nodeID && !replicated && !k.txnsReplicated.Load() {
		return txns.TopicPartition{}, false
	}
	return txns.TopicPartition{Topic: groups.OffsetsTopic, Partition: p}, true
}

// leader is the current leader of tp (-1 while none is known), and false
// when the metadata no longer has it (a deleted topic: nothing to end).
func (s *txnMarkers) leader(k *kafkaCluster, tp txns.TopicPartition) (int32, bool) {
	if tp.Topic == groups.OffsetsTopic {
		leaders := k.CoordinatorLeaders(tp.Topic)
		if int(tp.Partition) >= len(leaders) {
			return -1, true
		}
		return leaders[tp.Partition], true
	}
	if leader, _, _, ok := k.ReplicatedState(tp.Topic, tp.Partition); ok {
		return leader, true
	}
	if r, ok := k.Replicas(tp.Topic, tp.Partition); ok {
		return r[0], true
	}
	if t, ok := k.tm.Topic(tp.Topic); ok {
		if !t.IsClusterTopic() {
			return s.nodeID, true // this broker's own topic
		}
		// A cluster topic the applied metadata lacks: a restarted
		// broker still replaying the metadata log (a deleted topic
		// leaves the store too).
		return -1, true
	}
	return -1, false
}

// Send implements txns.MarkerSender: one request per leader, at once.
func (s *txnMarkers) Send(ctx context.Context, m txns.RemoteMarker, parts []txns.TopicPartition) (retry []txns.TopicPartition, fenced bool) {
	k := s.bound()
	if k == nil {
		return parts, false
	}
	byLeader := map[int32][]txns.TopicPartition{}
	for _, tp := range parts {
		leader, exists := s.leader(k, tp)
		switch {
		case !exists:
			s.log.Warn().Str("transactional_id", m.TransactionalID).Str("topic", tp.Topic).Int32("partition", tp.Partition).
				Msg("the partition of a transaction is no longer in the cluster's metadata (deleted); its marker is not sent")
		case leader < 0:
			retry = append(retry, tp)
		default:
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	if len(byLeader) == 0 {
		return retry, false
	}
	cl, err := s.clientFor(k)
	if err != nil {
		s.warn("client", m, err)
		return parts, false
	}
	// In parallel: a leader that does not answer holds up no other.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, tps := range byLeader {
		wg.Go(func() {
			again, refused := s.sendTo(ctx, cl, leader, m, tps)
			mu.Lock()
			retry = append(retry, again...)
			fenced = fenced || refused
			mu.Unlock()
		})
	}
	wg.Wait()
	return retry, fenced
}

// clientFor is the client, created at the first Send with every
// registered broker as a seed.
func (s *txnMarkers) clientFor(k *kafkaCluster) (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the broker is stopping")
	}
	if s.client != nil {
		return s.client, nil
	}
	var seeds []string
	for _, b := range k.Brokers() {
		seeds = append(seeds, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	if len(seeds) == 0 {
		return nil, errors.New("no broker is registered yet")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("vibemq-txn-markers"))
	if err != nil {
		return nil, err
	}
	s.client = cl
	return cl, nil
}

// sendTo sends m for tps to broker leader and returns the partitions to
// send again, and whether one answered TRANSACTION_COORDINATOR_FENCED
// (final: not sent again).
func (s *txnMarkers) sendTo(ctx context.Context, cl *kgo.Client, leader int32, m txns.RemoteMarker, tps []txns.TopicPartition) (retry []txns.TopicPartition, fenced bool) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed = m.ProducerID, m.ProducerEpoch, m.Commit
	// The leader epoch of the transactional ID's replicated
	// __transaction_state partition (0 with RF 1: one coordinator).
	rm.CoordinatorEpoch = m.CoordinatorEpoch
	index := map[string]int{}
	for _, tp := range tps {
		i, ok := index[tp.Topic]
		if !ok {
			i = len(rm.Topics)
			index[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	rctx, cancel := context.WithTimeout(ctx, markerRequestTimeout)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.Broker(int(leader)))
	if err != nil {
		s.warn("request", m, fmt.Errorf("broker %d: %w", leader, err))
		return tps, false
	}
	answered := map[txns.TopicPartition]bool{}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				tp := txns.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
				answered[tp] = true
				err := kerr.ErrorForCode(rp.ErrorCode)
				switch {
				case errors.Is(err, kerr.TransactionCoordinatorFenced):
					// Kafka's TransactionMarkerRequestCompletionHandler:
					// final, and the transaction's delivery stops (txns).
					s.log.Info().Str("transactional_id", m.TransactionalID).Int32("broker", leader).Str("topic", tp.Topic).
						Int32("partition", tp.Partition).Int32("coordinator_epoch", m.CoordinatorEpoch).
						Msg("a partition fenced a transaction marker of this coordinator: a newer coordinator owns the producer")
					fenced = true
				case err != nil && s.retriable(m, tp, leader, err):
					retry = append(retry, tp)
				}
			}
		}
	}
	for _, tp := range tps {
		if !answered[tp] {
			retry = append(retry, tp)
		}
	}
	return retry, fenced
}

// retriable reports whether a partition's error is worth sending again,
// and logs it. CLUSTER_AUTHORIZATION_FAILED is retried: once an operator
// grants CLUSTER_ACTION the transaction completes, where dropping the
// marker would leave the partition's transaction open for good.
func (s *txnMarkers) retriable(m txns.RemoteMarker, tp txns.TopicPartition, leader int32, err error) bool {
	switch {
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		s.warn("authorization", m, fmt.Errorf("broker %d refused the marker for %s/%d: %w; with authorizer-enabled, allow ClusterAction on the cluster to the principal of the brokers' first listener (User:ANONYMOUS on PLAINTEXT)", leader, tp.Topic, tp.Partition, err))
		return true
	case kerr.IsRetriable(err):
		s.warn("retriable", m, fmt.Errorf("broker %d, %s/%d: %w", leader, tp.Topic, tp.Partition, err))
		return true
	}
	s.log.Error().Err(err).Str("transactional_id", m.TransactionalID).Int32("broker", leader).Str("topic", tp.Topic).Int32("partition", tp.Partition).
		Msg("a broker refused a transaction marker for good; the partition's transaction stays as it is there (kafka-transactions abort ends a hanging one)")
	return false
}

// warn logs a failed delivery, at most once per loglimit.Interval per kind.
func (s *txnMarkers) warn(kind string, m txns.RemoteMarker, err error) {
	if ok, suppressed := s.limit.Allow(kind, time.Now()); ok {
		s.log.Warn().Err(err).Str("transactional_id", m.TransactionalID).Int("suppressed", suppressed).
			Msg("delivering a transaction marker failed; sending it again")
	}
}
