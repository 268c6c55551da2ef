package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/console"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/internal/gctuner"
	"github.com/vibemq/broker/internal/metrics"
	"github.com/vibemq/broker/kafkaproto"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/retention"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// shutdownGrace bounds how long in-flight requests may take to finish once
// the broker is asked to stop.
const shutdownGrace = 15 * time.Second

// handlerExitGrace bounds how long the broker waits, once shutdownGrace
// passed and the listeners closed their connections, for the request
// handlers to return. Past it the store is left open (run).
const handlerExitGrace = 10 * time.Second

// run starts every component of the broker from cfg, serves until ctx is
// cancelled, then stops them in reverse order: stop accepting, finish
// in-flight requests, close the store. cfg has been validated.
func run(ctx context.Context, cfg *Config, log zerolog.Logger) error {
	start := time.Now()
	b := &broker{cfg: cfg, log: log, start: start}
	setMemoryLimit(cfg, log)
	if gc, ok := gctuner.Start(gcHeadroom(systemMemory())); ok {
		defer gc.Stop()
		log.Info().Uint64("gc_headroom_bytes", gcHeadroom(systemMemory())).Msg("garbage collector tuned (GOGC unset)")
	}
	if err := b.openStore(); err != nil {
		return err
	}
	// Apart from the partitions' recovery in "broker started": after a
	// crash, opening the store replays its WAL.
	log.Info().Dur("took", time.Since(start)).Msg("store opened")
	defer func() {
		if b.handlersRunning.Load() {
			// A handler may hold a store iterator: closing the store
			// under it could crash the broker or read freed memory.
			// Every acknowledged write is already synced (with fsync
			// never, written to the OS); the next start replays the WAL.
			log.Error().Msg("the store is left open: request handlers still run (see above); the next start recovers it from its log")
			return
		}
		if err := b.store.Close(); err != nil {
			log.Error().Err(err).Msg("closing the store")
		}
	}()
	if err := b.openTopics(); err != nil {
		return err
	}
	recovered := time.Since(start)
	b.registerMetrics()
	if err := b.openDomains(); err != nil {
		return err
	}
	defer b.queues.Close()
	defer b.closeTxns() // before the store closes
	background := b.startRetention()
	defer background.Stop()

	if err := b.openSecurity(); err != nil {
		return err
	}
	defer b.jwt.Close() // stops a JWKS endpoint's fetch
	kafka, err := b.newKafka()
	if err != nil {
		return err
	}
	// The metadata raft group, with cluster-peers only (cluster.go).
	b.advertised = kafka.listeners[0].spec.AdvertisedAddr
	if b.cluster, err = startCluster(cfg, b.store, b.kafkaCluster, b.advertised, log); err != nil {
		kafka.close()
		return err
	}
	defer b.cluster.stop() // before the store closes
	if b.cluster != nil {
		b.cluster.registerMetrics(b.reg)
	}
	web, err := b.startHTTP()
	if err != nil {
		kafka.close()
		return err
	}
	serveErr := make(chan error, len(kafka.listeners))
	for _, l := range kafka.listeners {
		go func() { serveErr <- kafka.server.ServeListener(l.ln, l.spec) }()
	}
	b.serving.Store(true)
	b.logStarted(kafka, web, recovered)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
		// Still serving: clients told NOT_LEADER_OR_FOLLOWER re-route.
		b.cluster.handOff(log)
	case err := <-serveErr:
		runErr = fmt.Errorf("the Kafka listener failed: %w", err)
	}
	b.serving.Store(false)
	if !b.shutdownListeners(kafka.server, web) {
		b.handlersRunning.Store(true)
	}
	log.Info().Msg("broker stopped")
	return runErr
}

// broker is what run starts, in start order.
type broker struct {
	cfg *Config
	log zerolog.Logger

	store  *pebblestore.Store
	topics *topics.Manager
	reg    *prometheus.Registry
	queues *queues.Engine
	events *events.Service
	groups *groups.Coordinator
	txns   *txns.Coordinator
	// markers send the transaction coordinator's markers to other
	// brokers; nil on a single node (cluster_txn_markers.go).
	markers *txnMarkers
	// serving is set while the listeners serve (the HTTP readiness check).
	serving atomic.Bool
	// handlersRunning is set when request handlers still ran at the end
	// of the shutdown: then the store is not closed.
	handlersRunning atomic.Bool
	// start is when run began (the console's uptime).
	start time.Time
	// creds are the SCRAM users, tls the certificates (nil without TLS).
	creds *auth.Store
	tls   *auth.TLSSource
	// jwt checks OAUTHBEARER and HTTP Bearer tokens (nil without keys).
	jwt *auth.JWTValidator
	// authz is the ACL authorizer; nil unless authorizer-enabled.
	authz *auth.Authorizer
	// quotas are the client quotas (always open).
	quotas *auth.Quotas
	// cluster is the metadata raft replica (nil without cluster-peers);
	// advertised is the first Kafka listener's advertised address.
	cluster    *clusterNode
	advertised string
	// kafkaCluster is the Kafka protocol's view of the cluster, nil on a
	// single node (created by newKafka, bound by startCluster).
	kafkaCluster *kafkaCluster
}

// openStore opens the data directory's store.
func (b *broker) openStore() error {
	cfg, log := b.cfg, b.log
	store, err := pebblestore.Open(cfg.DataDir, pebblestore.Options{
		Logger:       log,
		MemTableSize: uint64(cfg.MemtableSize),
		CacheSize:    cfg.CacheSize,
		NoSync:       cfg.Fsync == "never",
		// Measured at once: a broker started on an almost full disk
		// refuses new data from its first request (and says so in the log).
		FreeSpaceMin: cfg.DiskFreeMin,
	})
	if err != nil {
		return err
	}
	if cfg.DiskFreeMin > 0 && cfg.DiskFreeMin < pebbleHeadroom(cfg) {
		log.Warn().Int64("disk_free_min", cfg.DiskFreeMin).Int64("memtables", pebbleHeadroom(cfg)).
			Msg("disk-free-min is smaller than the memtables Pebble may have to flush when the disk runs low (4 x memtable-size); a full disk stops the broker, consider raising it")
	}
	b.store = store
	return nil
}

// openTopics recovers the partition logs.
func (b *broker) openTopics() error {
	cfg := b.cfg
	tm, err := topics.Open(b.store, topics.Config{
		Logger:               b.log,
		AutoCreate:           cfg.AutoCreateTopics,
		DefaultPartitions:    cfg.DefaultPartitions,
		BrokerDefaults:       topicBrokerDefaults(cfg), // logs.go
		CompactionMapEntries: compactionMapEntries(cfg),
		ClusterNodeID:        clusterNodeID(cfg),
	})
	if err != nil {
		return fmt.Errorf("recovering the data in %s: %w", cfg.DataDir, err)
	}
	b.topics = tm
	return nil
}

// registerMetrics creates the registry of /metrics with the process', the
// store's and the build's collectors.
func (b *broker) registerMetrics() {
	reg := prometheus.NewRegistry()
	metrics.Register(reg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewBuildInfoCollector(), b.store.Collector())
	// What is running, as `broker version` says it (for dashboards and for
	// alerts on a mixed-version fleet).
	info := readBuildInfo()
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "broker_build_info",
		Help:        "Always 1; the labels say the broker's version, commit, Go version and storage format.",
		ConstLabels: prometheus.Labels{"version": info.version, "commit": info.commit, "go_version": info.goVersion, "storage_format": fmt.Sprint(pebblestore.FormatVersion)},
	}, func() float64 { return 1 }))
	b.reg = reg
}

// openDomains recovers the views over the logs: native queues, event
// stores, consumer groups and transactions. On an error, the queues
// engine, if opened, is closed.
func (b *broker) openDomains() (err error) {
	cfg, log, store, tm := b.cfg, b.log, b.store, b.topics
	// Native queues: delivery state beside the queue topics' logs; their
	// maintenance (leases, dead-lettering, TTLs, redrive) runs in retention.
	qe, err := queues.Open(store, tm, queues.Config{Logger: log}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the queues in %s: %w", cfg.DataDir, err)
	}
	defer func() {
		if err != nil {
			qe.Close()
		}
	}()
	es, err := events.Open(store, tm, events.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("recovering the event stores in %s: %w", cfg.DataDir, err)
	}
	// Consumer groups: offsets and group metadata in __consumer_offsets;
	// their timers (sessions, rebalances, offset retention) run in retention.
	// The transaction coordinator is opened after the groups (it commits
	// their offsets); the groups ask it about staged offsets through tc.
	var tc *txns.Coordinator
	gc, err := groups.Open(store, tm, groups.Config{
		Logger: log,
		PendingTxnOffset: func(group, topic string, partition int32) bool {
			return tc != nil && tc.PendingOffset(group, topic, partition)
		},
		Registerer:                b.reg,
		InitialRebalanceDelay:     cfg.GroupInitialRebalanceDelay,
		ConsumerSessionTimeout:    cfg.GroupConsumerSessionTimeout,
		ConsumerHeartbeatInterval: cfg.GroupConsumerHeartbeatInterval,
		ConsumerMigrationPolicy:   cfg.GroupConsumerMigrationPolicy,
		ShareRecordLockDuration:   cfg.GroupShareRecordLockDuration,
		ShareDeliveryCountLimit:   cfg.GroupShareDeliveryCountLimit,
		ShareAutoOffsetReset:      cfg.GroupShareAutoOffsetReset,
		ShareQueues:               shareQueues{qe},
		OffsetsRetention:          cfg.OffsetsRetention,
	}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the consumer groups in %s: %w", cfg.DataDir, err)
	}
	b.markers = newTxnMarkers(cfg, log)
	var markers txns.MarkerSender // a nil interface on a single node
	if b.markers != nil {
		markers = b.markers
	}
	tc, err = txns.Open(store, tm, txns.Config{
		Logger:       log,
		Markers:      markers,
		MaxTimeout:   cfg.TransactionMaxTimeout,
		IDExpiration: cfg.TransactionalIDExpiration,
		CommitOffsets: func(offsets map[string][]txns.Offset, markers []*topics.Append, extra func(*pebblestore.Batch), now time.Time) error {
			return gc.CommitTransaction(txnCommits(offsets), markers, extra, now)
		},
	}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the transactions in %s: %w", cfg.DataDir, err)
	}
	b.queues, b.events, b.groups, b.txns = qe, es, gc, tc
	return nil
}

// closeTxns stops the deliveries of transaction markers (resumed at the
// next start), then the marker sender's client.
func (b *broker) closeTxns() {
	b.txns.Close()
	if b.markers != nil {
		b.markers.close()
	}
}

// startRetention starts every background loop: free space, reclaiming,
// group timers, queue maintenance, transaction timeouts, log retention
// and compaction (logs.go). The caller stops it before the store closes.
func (b *broker) startRetention() *retention.Runner {
	store, reg := b.store, b.reg
	background := retention.New(b.log, nil)
	background.Add(retention.SpaceTask(store.Space(), reg, 0))
	// Compacts deleted ranges so their disk space comes back in seconds.
	retention.AddReclaimTask(background, store, reg, 0)
	background.Add(retention.GroupsTask(b.groups, 0))
	background.Add(retention.QueueTask(b.queues, reg, 0))
	background.Add(retention.TxnsTask(b.txns, 0))
	topicTasks := topicTasksConfig(b.cfg, reg)
	topicTasks.Space = store.Space() // compaction waits while the disk is low
	retention.AddTopicTasks(background, b.topics, topicTasks)
	background.Start()
	return background
}

// kafkaListener is the Kafka server with its listeners, not yet serving.
type kafkaListener struct {
	listeners []boundListener
	server    *kafkaproto.Server
}

// close closes the listeners (before they serve).
func (k *kafkaListener) close() {
	for _, l := range k.listeners {
		_ = l.ln.Close()
	}
}

// openSecurity reads the SCRAM credentials, creates the bootstrap user
// and loads the TLS files (security.go).
func (b *broker) openSecurity() error {
	cfg, log := b.cfg, b.log
	creds, err := auth.Open(b.store)
	if err != nil {
		return fmt.Errorf("reading the SCRAM credentials in %s: %w", cfg.DataDir, err)
	}
	if err := bootstrapUser(cfg, creds, log); err != nil {
		return err
	}
	for _, k := range cfg.ignoredAddrKeys() {
		log.Warn().Str("key", k).Msg("ignored: listeners is set and replaces kafka-addr and advertised-addr")
	}
	tlsSource, err := newTLSSource(cfg, log)
	if err != nil {
		return err
	}
	jwt, err := newJWTValidator(cfg, b.log)
	if err != nil {
		return err
	}
	if cfg.Security.HTTPAuth == "required" && !creds.HasUsers() && jwt == nil {
		log.Warn().Msg("http-auth is required but there is no user and no JWT key: only /healthz and /readyz can be used; create a user (broker users create, or sasl-bootstrap-user)")
	}
	b.creds, b.tls, b.jwt = creds, tlsSource, jwt
	quotas, err := auth.OpenQuotas(b.store, auth.QuotasConfig{WindowNum: cfg.QuotaWindowNum, WindowSize: cfg.QuotaWindowSize})
	if err != nil {
		return fmt.Errorf("reading the client quotas in %s: %w", cfg.DataDir, err)
	}
	b.quotas = quotas
	return b.openAuthorizer()
}

// openAuthorizer reads the ACLs when authorizer-enabled is set.
func (b *broker) openAuthorizer() error {
	sc := b.cfg.Security
	if !sc.AuthorizerEnabled {
		return nil
	}
	superUsers, err := parseSuperUsers(sc.SuperUsers)
	if err != nil {
		return fmt.Errorf("super-users %w", err)
	}
	a, err := auth.OpenAuthorizer(b.store, auth.AuthorizerConfig{SuperUsers: superUsers, AllowIfNoACL: sc.AllowEveryoneIfNoACL})
	if err != nil {
		return fmt.Errorf("reading the ACLs in %s: %w", b.cfg.DataDir, err)
	}
	n := a.Len()
	e := b.log.Info()
	if len(superUsers) == 0 && n == 0 && !sc.AllowEveryoneIfNoACL {
		e = b.log.Warn()
	}
	e.Strs("super_users", superUsers).Int("acls", n).Bool("allow_everyone_if_no_acl_found", sc.AllowEveryoneIfNoACL).
		Msg("authorizer enabled: every Kafka request is checked against the ACLs (with no ACL and no super user, nothing is allowed: set super-users)")
	b.authz = a
	return nil
}

// newKafka opens the Kafka listeners and creates the Kafka server.
func (b *broker) newKafka() (*kafkaListener, error) {
	cfg, log := b.cfg, b.log
	listeners, err := openListeners(cfg, b.tls, b.log)
	if err != nil {
		return nil, err
	}
	k := &kafkaListener{listeners: listeners}
	var kc kafkaproto.Cluster // a nil interface on a single node
	if cfg.ClusterPeers != "" {
		offsetsPartitions := int32(50)
		if t, ok := b.topics.Topic(groups.OffsetsTopic); ok {
			offsetsPartitions = t.NumPartitions()
		}
		b.kafkaCluster = newKafkaCluster(cfg, b.topics, offsetsPartitions, log)
		b.kafkaCluster.groups, b.kafkaCluster.txns = b.groups, b.txns
		// A replicated __transaction_state completes every
		// transaction through the marker sender.
		b.kafkaCluster.txnMarkers = b.markers != nil
		kc = b.kafkaCluster
		if b.markers != nil {
			b.markers.kc.Store(b.kafkaCluster)
		}
	}
	requestMemory, requestMemorySource := requestMemoryBudget(cfg, systemMemory())
	log.Info().Int64("queued_max_request_bytes", requestMemory).Str("source", requestMemorySource).
		Msg("Kafka request memory budget")
	k.server, err = kafkaproto.NewServer(kafkaproto.Config{
		Logger:              log,
		NodeID:              cfg.NodeID,
		Rack:                cfg.Rack,
		SASL:                saslConfig(cfg, b.creds, b.jwt),
		Authorizer:          b.authz,
		Quotas:              b.quotas,
		ClusterID:           b.topics.ClusterID(),
		MaxRequestBytes:     cfg.MaxRequestBytes,
		MaxInflightRequests: cfg.MaxInflightRequests,
		MaxConnections:      cfg.MaxConnections,
		MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		// Validated with the config.
		MaxConnectionsPerIPOverrides: connectionOverrides(cfg),
		// At least MaxRequestBytes (requestMemoryBudget, Validate).
		QueuedMaxRequestBytes: requestMemory,
		ConnectionsMaxIdle:    cfg.ConnectionsMaxIdle,
		RequestReadTimeout:    cfg.RequestReadTimeout,
		Registerer:            b.reg,
		Groups:                b.groups,
		Txns:                  b.txns,
		CrossBrokerTxns:       b.markers != nil,
		Queues:                b.queues,
		Cluster:               kc,
	}, b.topics)
	if err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

// startHTTP starts the HTTP listener (health, metrics, profiles, the
// native API, the console), or returns nil when no HTTP address is
// configured.
func (b *broker) startHTTP() (*httpapi.Server, error) {
	cfg, log := b.cfg, b.log
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	bodyMemory, bodyMemorySource := httpBodyBudget(cfg, systemMemory())
	log.Info().Int64("http_max_inflight_body_bytes", bodyMemory).Str("source", bodyMemorySource).
		Msg("HTTP request body budget")
	web := httpapi.New(httpapi.Config{
		Addr:                 cfg.HTTPAddr,
		TLS:                  httpTLS(cfg, b.tls),
		Logger:               log.With().Str("component", "http").Logger(),
		Registry:             b.reg,
		WriteTimeout:         cfg.HTTPWriteTimeout,
		MaxConnections:       cfg.HTTPMaxConnections,
		MaxConnectionsPerIP:  cfg.HTTPMaxConnectionsPerIP,
		MaxStreams:           cfg.HTTPMaxStreams,
		MaxInflightBodyBytes: bodyMemory,
		Auth:                 httpAuth(cfg, b.creds, b.jwt, b.authz),
		Ready: func() error {
			if !b.serving.Load() {
				return errors.New("the broker is starting or stopping")
			}
			return nil
		},
	})
	// Profiles of the running broker (go tool pprof http://HTTP_ADDR/debug/pprof/profile).
	web.Handle("GET /debug/pprof/", http.HandlerFunc(pprof.Index))
	web.Handle("GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	web.Handle("GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	web.Handle("GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	web.RegisterQueues(httpapi.QueuesConfig{Engine: b.queues})
	web.RegisterEvents(httpapi.EventsConfig{Events: b.events})
	web.RegisterStorage(httpapi.StorageConfig{Store: b.store, Topics: b.topics, Events: b.events, QueueCounts: queueCounts(b.queues)})
	web.RegisterAdmin(httpapi.AdminConfig{Topics: b.topics, Groups: b.groups, Txns: b.txns, Version: readBuildInfo().version, Started: b.start, NodeID: cfg.NodeID})
	web.RegisterCluster(httpapi.ClusterConfig{
		Status:     func() httpapi.ClusterStatus { return b.cluster.status(cfg.NodeID, b.advertised) },
		AddNode:    b.cluster.addNode,
		RemoveNode: b.cluster.removeNode,
	})
	web.Handle("GET /ui/", console.Handler()) // the web console (console/)
	web.RegisterOpenAPI()
	if err := web.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the HTTP listener on %s: %w; choose a free address with --http-addr", cfg.HTTPAddr, err)
	}
	return web, nil
}

// logStarted logs what the broker serves and where.
func (b *broker) logStarted(kafka *kafkaListener, web *httpapi.Server, recovered time.Duration) {
	first := kafka.listeners[0]
	ev := b.log.Info().Str("kafka_addr", first.ln.Addr().String()).Str("advertised_addr", first.spec.AdvertisedAddr).
		Str("data_dir", b.cfg.DataDir).Int("topics", len(b.topics.Topics())).Dur("recovery", recovered)
	if len(kafka.listeners) > 1 || first.spec.Protocol != kafkaproto.Plaintext {
		var names []string
		for _, l := range kafka.listeners {
			names = append(names, l.spec.Name+"://"+l.ln.Addr().String()+" (advertised "+l.spec.AdvertisedAddr+")")
		}
		ev = ev.Strs("listeners", names)
	}
	if web != nil {
		ev = ev.Str("http_addr", web.Addr().String())
	}
	ev.Msg("broker started")
}

// shutdownListeners shuts the Kafka and HTTP listeners down together
// (each ends its long polls and tails at once), lets in-flight requests
// finish for at most shutdownGrace, then closes the connections left.
// Both Shutdowns return only once their handlers returned; it reports
// whether they did within shutdownGrace + handlerExitGrace. When they did
// not (a handler stuck on a lock or a disk), the caller must not close the
// store: a handler may hold one of its iterators.
func (b *broker) shutdownListeners(kafka *kafkaproto.Server, web *httpapi.Server) bool {
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := kafka.Shutdown(sctx); err != nil {
			b.log.Warn().Err(err).Msg("in-flight Kafka requests did not finish in time; connections closed")
		}
	}()
	if web != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := web.Shutdown(sctx); err != nil {
				b.log.Warn().Err(err).Msg("in-flight HTTP requests did not finish in time; connections closed")
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	bound := time.NewTimer(shutdownGrace + handlerExitGrace)
	defer bound.Stop()
	select {
	case <-done:
		return true
	case <-bound.C:
		b.log.Error().Dur("waited", shutdownGrace+handlerExitGrace).
			Msg("Kafka or HTTP request handlers still run after their connections were closed; exiting without closing the store under them")
		return false
	}
}

// pebbleHeadroom is the most memtable data Pebble may have to flush: it
// stops writes at 4 memtables (pebblestore.Open).
func pebbleHeadroom(cfg *Config) int64 { return 4 * cfg.MemtableSize }

// advertisedAddr is the address clients are told to use: the configured one,
// else the listener's, with an unspecified host replaced by the hostname.
func advertisedAddr(configured string, listen net.Addr) (string, error) {
	if configured != "" {
		return configured, nil
	}
	host, port, err := net.SplitHostPort(listen.String())
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return "", fmt.Errorf("the Kafka listener %s has no specific host and the hostname is unknown; set --advertised-addr", listen)
		}
		host = h
	}
	return net.JoinHostPort(host, port), nil
}

// txnCommits turns the offsets a committing transaction staged, by group,
// into what groups.Coordinator.CommitTransaction writes (atomically with
// the transaction's markers and outcome row; no membership check: the
// offsets were checked when staged).
func txnCommits(offsets map[string][]txns.Offset) []groups.TxnCommit {
	names := make([]string, 0, len(offsets))
	for g := range offsets {
		names = append(names, g)
	}
	sort.Strings(names)
	out := make([]groups.TxnCommit, 0, len(names))
	for _, g := range names {
		tc := groups.TxnCommit{Group: g}
		byTopic := map[string]int{}
		for _, o := range offsets[g] {
			i, ok := byTopic[o.Topic]
			if !ok {
				i = len(tc.Topics)
				byTopic[o.Topic] = i
				tc.Topics = append(tc.Topics, groups.CommitTopic{Topic: o.Topic})
			}
			tc.Topics[i].Partitions = append(tc.Topics[i].Partitions, groups.CommitPartition{
				Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata,
			})
		}
		out = append(out, tc)
	}
	return out
}

// connectionOverrides is max-connections-per-ip-overrides, which Validate
// has checked.
func connectionOverrides(cfg *Config) map[netip.Addr]int {
	m, _ := parseConnectionOverrides(cfg.MaxConnectionsPerIPOverrides)
	return m
}

// clusterNodeID is the node ID that spaces producer IDs in a cluster
// (topics.Config.ClusterNodeID), 0 on a single node.
func clusterNodeID(cfg *Config) int32 {
	if cfg.ClusterPeers == "" {
		return 0
	}
	return cfg.NodeID
}
