package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/httpapi"
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

// run starts every component of the broker from cfg, serves until ctx is
// cancelled, then stops them in reverse order: stop accepting, finish
// in-flight requests, close the store. cfg has been validated.
func run(ctx context.Context, cfg *Config, log zerolog.Logger) error {
	start := time.Now()
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
	defer func() {
		if err := store.Close(); err != nil {
			log.Error().Err(err).Msg("closing the store")
		}
	}()

	brokerDefaults := topicBrokerDefaults(cfg) // logs.go
	tm, err := topics.Open(store, topics.Config{
		Logger:               log,
		AutoCreate:           cfg.AutoCreateTopics,
		DefaultPartitions:    cfg.DefaultPartitions,
		BrokerDefaults:       brokerDefaults,
		CompactionMapEntries: compactionMapEntries(cfg),
	})
	if err != nil {
		return fmt.Errorf("recovering the data in %s: %w", cfg.DataDir, err)
	}
	recovered := time.Since(start)

	reg := prometheus.NewRegistry()
	metrics.Register(reg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewBuildInfoCollector(), store.Collector())
	// What is running, as `broker version` says it (for dashboards and for
	// alerts on a mixed-version fleet).
	info := readBuildInfo()
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "broker_build_info",
		Help:        "Always 1; the labels say the broker's version, commit, Go version and storage format.",
		ConstLabels: prometheus.Labels{"version": info.version, "commit": info.commit, "go_version": info.goVersion, "storage_format": fmt.Sprint(pebblestore.FormatVersion)},
	}, func() float64 { return 1 }))

	// Native queues: delivery state beside the queue topics' logs; their
	// maintenance (leases, dead-lettering, TTLs, redrive) runs in retention.
	qe, err := queues.Open(store, tm, queues.Config{Logger: log}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the queues in %s: %w", cfg.DataDir, err)
	}
	defer qe.Close()
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
		Registerer:            reg,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		OffsetsRetention:      cfg.OffsetsRetention,
	}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the consumer groups in %s: %w", cfg.DataDir, err)
	}
	tc, err = txns.Open(store, tm, txns.Config{
		Logger:       log,
		MaxTimeout:   cfg.TransactionMaxTimeout,
		IDExpiration: cfg.TransactionalIDExpiration,
		CommitOffsets: func(offsets map[string][]txns.Offset, markers []*topics.Append, extra func(*pebblestore.Batch), now time.Time) error {
			return gc.CommitTransaction(txnCommits(offsets), markers, extra, now)
		},
	}, time.Now())
	if err != nil {
		return fmt.Errorf("recovering the transactions in %s: %w", cfg.DataDir, err)
	}
	// Every background loop: group timers, queue maintenance, log retention
	// and compaction (logs.go). Stopped before the store closes.
	background := retention.New(log, nil)
	background.Add(retention.SpaceTask(store.Space(), reg, 0))
	// Compacts deleted ranges so their disk space comes back in seconds.
	retention.AddReclaimTask(background, store, reg, 0)
	background.Add(retention.GroupsTask(gc, 0))
	background.Add(retention.QueueTask(qe, reg, 0))
	background.Add(retention.TxnsTask(tc, 0))
	topicTasks := topicTasksConfig(cfg, reg)
	topicTasks.Space = store.Space() // compaction waits while the disk is low
	retention.AddTopicTasks(background, tm, topicTasks)
	background.Start()
	defer background.Stop()

	// Users, TLS files and listeners (security.go).
	creds, err := auth.Open(store)
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
	listeners, err := openListeners(cfg, tlsSource)
	if err != nil {
		return err
	}
	closeListeners := func() {
		for _, b := range listeners {
			_ = b.ln.Close()
		}
	}
	requestMemory, requestMemorySource := requestMemoryBudget(cfg, systemMemory())
	log.Info().Int64("queued_max_request_bytes", requestMemory).Str("source", requestMemorySource).
		Msg("Kafka request memory budget")
	kafka, err := kafkaproto.NewServer(kafkaproto.Config{
		Logger:              log,
		NodeID:              cfg.NodeID,
		Rack:                cfg.Rack,
		SASL:                saslConfig(cfg, creds),
		ClusterID:           tm.ClusterID(),
		MaxRequestBytes:     cfg.MaxRequestBytes,
		MaxInflightRequests: cfg.MaxInflightRequests,
		MaxConnections:      cfg.MaxConnections,
		MaxConnectionsPerIP: cfg.MaxConnectionsPerIP,
		// At least MaxRequestBytes (requestMemoryBudget, Validate).
		QueuedMaxRequestBytes: requestMemory,
		ConnectionsMaxIdle:    cfg.ConnectionsMaxIdle,
		RequestReadTimeout:    cfg.RequestReadTimeout,
		Registerer:            reg,
		Groups:                gc,
		Txns:                  tc,
	}, tm)
	if err != nil {
		closeListeners()
		return err
	}

	var serving atomic.Bool
	var web *httpapi.Server
	if cfg.HTTPAddr != "" {
		bodyMemory, bodyMemorySource := httpBodyBudget(cfg, systemMemory())
		log.Info().Int64("http_max_inflight_body_bytes", bodyMemory).Str("source", bodyMemorySource).
			Msg("HTTP request body budget")
		web = httpapi.New(httpapi.Config{
			Addr:                 cfg.HTTPAddr,
			TLS:                  httpTLS(cfg, tlsSource),
			Logger:               log.With().Str("component", "http").Logger(),
			Registry:             reg,
			WriteTimeout:         cfg.HTTPWriteTimeout,
			MaxConnections:       cfg.HTTPMaxConnections,
			MaxConnectionsPerIP:  cfg.HTTPMaxConnectionsPerIP,
			MaxStreams:           cfg.HTTPMaxStreams,
			MaxInflightBodyBytes: bodyMemory,
			Ready: func() error {
				if !serving.Load() {
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
		httpapi.RegisterQueues(web, qe, nil)
		web.RegisterEvents(httpapi.EventsConfig{Events: es})
		web.RegisterStorage(httpapi.StorageConfig{Store: store, Topics: tm, Events: es, QueueCounts: queueCounts(qe)})
		web.RegisterOpenAPI()
		if err := web.Start(); err != nil {
			closeListeners()
			return fmt.Errorf("cannot start the HTTP listener on %s: %w; choose a free address with --http-addr", cfg.HTTPAddr, err)
		}
	}

	serveErr := make(chan error, len(listeners))
	for _, b := range listeners {
		go func() { serveErr <- kafka.ServeListener(b.ln, b.spec) }()
	}
	serving.Store(true)
	ev := log.Info().Str("kafka_addr", listeners[0].ln.Addr().String()).Str("advertised_addr", listeners[0].spec.AdvertisedAddr).
		Str("data_dir", cfg.DataDir).Int("topics", len(tm.Topics())).Dur("recovery", recovered)
	if len(listeners) > 1 || listeners[0].spec.Protocol != kafkaproto.Plaintext {
		var names []string
		for _, b := range listeners {
			names = append(names, b.spec.Name+"://"+b.ln.Addr().String()+" (advertised "+b.spec.AdvertisedAddr+")")
		}
		ev = ev.Strs("listeners", names)
	}
	if web != nil {
		ev = ev.Str("http_addr", web.Addr().String())
	}
	ev.Msg("broker started")

	var runErr error
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("the Kafka listener failed: %w", err)
	}
	serving.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := kafka.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("in-flight Kafka requests did not finish in time; connections closed")
	}
	if web != nil {
		if err := web.Shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("HTTP shutdown")
		}
	}
	log.Info().Msg("broker stopped")
	return runErr
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
