package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/vibemq/broker/httpapi"
)

// Config is the broker's whole configuration. Every field is one key of the
// table in configKeys: the key is the YAML key and the --flag, and
// BROKER_<KEY IN UPPER_SNAKE> is its environment variable. Values are
// layered flag > environment > file > default by loadConfig; Validate
// checks them. config.example.yaml documents every key and is generated
// from the same table (see TestExampleConfig).
type Config struct {
	// DataDir holds the Pebble store and the FORMAT marker.
	DataDir string
	// KafkaAddr is the host:port of the Kafka listener. Port 0 picks a free
	// port (tests).
	KafkaAddr string
	// AdvertisedAddr is the host:port given to clients in Metadata. Empty
	// means: advertise the Kafka listener's address (run replaces an
	// all-interfaces host with the machine's hostname). When set, Validate
	// guarantees a concrete host and a non-zero port.
	AdvertisedAddr string
	// NodeID is this broker's node id.
	NodeID int32
	// ClusterPeers is the static list of the metadata Raft group's
	// voters, "id@host:port,..." (their inter-broker addresses); empty
	// means a single node with no cluster (cluster.go).
	ClusterPeers string
	// ClusterJoin: with an empty data directory, wait to be added to an
	// existing cluster (broker cluster add-node) instead of bootstrapping
	// one with cluster-peers.
	ClusterJoin bool
	// InterBrokerAddr is the host:port the inter-broker listener binds;
	// empty means this node's address in ClusterPeers.
	InterBrokerAddr string
	// OffsetsTopicReplicationFactor is the replication factor of
	// __consumer_offsets in a cluster (Kafka's
	// offsets.topic.replication.factor): 1 keeps each partition on its
	// coordinator; above 1 every partition is a Raft group and the
	// coordinator moves with its leadership. Read once, when the cluster
	// first places its coordinators.
	OffsetsTopicReplicationFactor int
	// TransactionStateLogReplicationFactor is the replication factor of
	// __transaction_state in a cluster (Kafka's
	// transaction.state.log.replication.factor): 1 keeps each partition's
	// transaction state on its coordinator; above 1 every partition is a
	// Raft group and the transaction coordinator moves with its
	// leadership. Read once, when the cluster first places the
	// transaction coordinators.
	TransactionStateLogReplicationFactor int
	// Rack is reported in Metadata; empty means none.
	Rack string
	// HTTPAddr is the host:port of the HTTP listener (health, metrics,
	// native API). Empty disables the HTTP listener.
	HTTPAddr string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// LogFormat is json, console, or auto (console when stderr is a
	// terminal, else json).
	LogFormat string
	// AutoCreateTopics creates unknown topics on Metadata and Produce.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics.
	DefaultPartitions int32
	// Fsync is "always" (acks after fsync) or "never" (relaxed mode: acks
	// before fsync; writes can be lost on a machine crash).
	Fsync string
	// DiskFreeMin is the least free space of the data directory's
	// filesystem, in bytes: below it new data is refused until free space
	// is back above DiskFreeMin + 25% (pebblestore.SpaceGuard). 0 disables.
	DiskFreeMin int64
	// MessageMaxBytes is the default max.message.bytes of topics.
	MessageMaxBytes int32
	// MaxRequestBytes is the largest request frame accepted.
	MaxRequestBytes int32
	// MaxInflightRequests is the number of pipelined requests per
	// connection before the broker stops reading from it.
	MaxInflightRequests int
	// MaxConnections caps the number of open Kafka client connections.
	MaxConnections int
	// MaxConnectionsPerIP caps the open Kafka connections from one IP
	// address.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides sets other limits for some addresses:
	// "ip:count,ip:count" (Kafka max.connections.per.ip.overrides).
	MaxConnectionsPerIPOverrides string
	// QueuedMaxRequestBytes is the broker-wide budget for the bytes of
	// Kafka requests being read or waiting for their replies; 0 means
	// derived from memory (requestMemoryBudget). When set, Validate
	// guarantees it is at least MaxRequestBytes.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle closes Kafka connections idle for this long.
	ConnectionsMaxIdle time.Duration
	// QuotaWindowNum and QuotaWindowSize are the samples client quota
	// rates are measured over (Kafka quota.window.num,
	// quota.window.size.seconds).
	QuotaWindowNum  int
	QuotaWindowSize time.Duration
	// RequestReadTimeout closes a Kafka connection whose request frame is
	// not complete this long after its first byte.
	RequestReadTimeout time.Duration
	// HTTPMaxConnections and HTTPMaxConnectionsPerIP cap the open HTTP
	// connections, all and from one IP address.
	HTTPMaxConnections      int
	HTTPMaxConnectionsPerIP int
	// HTTPMaxStreams caps the SSE tails and long polls open at once.
	HTTPMaxStreams int
	// HTTPMaxInflightBodyBytes is the broker-wide budget for HTTP request
	// bodies being read or handled; 0 means derived from memory
	// (httpBodyBudget). When set, Validate guarantees it holds the largest
	// request body.
	HTTPMaxInflightBodyBytes int64
	// HTTPWriteTimeout bounds an HTTP response write: a whole ordinary
	// response, a long poll's answer after its wait, each SSE write.
	HTTPWriteTimeout time.Duration
	// MemtableSize is Pebble's memtable size in bytes.
	MemtableSize int64
	// CacheSize is Pebble's block cache size in bytes.
	CacheSize int64
	// MemoryLimit is Go's soft memory limit (runtime/debug.SetMemoryLimit)
	// in bytes; 0 means derived (goMemoryLimit).
	MemoryLimit int64
	// GroupInitialRebalanceDelay is how long a new consumer group waits
	// for more members before its first rebalance.
	GroupInitialRebalanceDelay time.Duration
	// GroupConsumerSessionTimeout and GroupConsumerHeartbeatInterval are
	// the session timeout and heartbeat interval of consumer groups
	// (KIP-848 group.protocol=consumer).
	GroupConsumerSessionTimeout    time.Duration
	GroupConsumerHeartbeatInterval time.Duration
	// GroupConsumerMigrationPolicy is Kafka's
	// group.consumer.migration.policy (KIP-848 online migration).
	GroupConsumerMigrationPolicy string
	// GroupShareRecordLockDuration, GroupShareDeliveryCountLimit and
	// GroupShareAutoOffsetReset are the delivery settings of share groups
	// (KIP-932).
	GroupShareRecordLockDuration time.Duration
	GroupShareDeliveryCountLimit int
	GroupShareAutoOffsetReset    string
	// OffsetsRetention is how long committed offsets of an empty group are
	// kept.
	OffsetsRetention time.Duration
	// TransactionMaxTimeout bounds the transaction.timeout.ms producers may
	// ask for; TransactionalIDExpiration is how long an idle transactional
	// ID is remembered.
	TransactionMaxTimeout     time.Duration
	TransactionalIDExpiration time.Duration
	// Log retention and compaction defaults of topics, and their loops
	// (see logs.go).
	LogCleanupPolicy            string
	LogRetention                time.Duration // negative: keep forever
	LogRetentionBytes           int64         // negative: no size limit
	LogSegmentBytes             int64
	LogRoll                     time.Duration
	LogCleanerDeleteRetention   time.Duration
	LogCleanerMinCompactionLag  time.Duration
	LogCleanerMinCleanableRatio float64
	LogRetentionCheckInterval   time.Duration
	LogCleanerBackoff           time.Duration
	LogCleanerEnable            bool
	LogCleanerDedupeBufferSize  int64
	// Security is listeners, TLS and SASL (security.go).
	Security SecurityConfig

	// source records where each key's value came from ("--data-dir",
	// "BROKER_DATA_DIR", "broker.yaml line 3") so that Validate can say
	// which setting to fix. Keys absent from the map have their default.
	source map[string]string
}

// configKey declares one configuration key, once, for the file, the
// environment, the flags, the validation and the documentation.
type configKey struct {
	// name is the YAML key and the flag name.
	name string
	// def is the default, written as a user would write it.
	def string
	// usage is one line for --help and the example file.
	usage string
	// doc is optional further explanation for the example file.
	doc string
	// isBool makes the flag a boolean flag (--auto-create-topics alone
	// means true) and is otherwise only cosmetic.
	isBool bool
	// quoted writes the value as a YAML string in the example file.
	quoted bool
	// set parses value into the Config. Its error completes the sentence
	// `<key> "<value>" (from <source>) ...`.
	set func(c *Config, value string) error
	// get formats the current value the way set parses it.
	get func(c *Config) string
	// check returns "" or the rest of a sentence saying what is wrong with
	// the value and how to fix it.
	check func(c *Config) string
}

// envName returns the environment variable of the key.
func (k *configKey) envName() string {
	return envName(k.name)
}

func envName(key string) string {
	return "BROKER_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

const (
	// configFlag names the YAML file to read.
	configFlag = "config"
	// configEnv is the BROKER_* variable naming the config file.
	configEnv = "BROKER_CONFIG"
	// bootstrapEnv is read by the Kafka client subcommands (topics, groups);
	// serve accepts it in its environment and ignores it.
	bootstrapEnv = "BROKER_BOOTSTRAP_SERVER"
)

// configKeys is the table of every configuration key, in documentation
// order. Defaults are parsed by the same setters as user input.
var configKeys = append([]configKey{
	stringKey(keyInfo{name: "data-dir", def: "./data", usage: "data directory: the Pebble store and the FORMAT marker", doc: "Created at first start. A directory written by a broker with another\nstorage format is refused, never rewritten."},
		func(c *Config) *string { return &c.DataDir },
		func(v string) string {
			if v == "" {
				return "is empty; give the directory that holds the broker's data, e.g. ./data"
			}
			return ""
		}),
	stringKey(keyInfo{name: "kafka-addr", def: "localhost:9092", usage: "host:port of the Kafka listener", doc: "Use :9092 or 0.0.0.0:9092 to accept connections from other machines; see advertised-addr."},
		func(c *Config) *string { return &c.KafkaAddr },
		func(v string) string { return checkHostPort(v, hostPortRules{example: "localhost:9092"}) }),
	stringKey(keyInfo{name: "advertised-addr", def: "", usage: "host:port given to clients in Metadata; empty means kafka-addr", doc: "Set it when clients reach the broker through another name or address\nthan the one it listens on (containers, NAT). When empty and kafka-addr\nlistens on every interface (:9092, 0.0.0.0:9092), the machine's hostname\nis advertised."},
		func(c *Config) *string { return &c.AdvertisedAddr },
		func(v string) string {
			return checkHostPort(v, hostPortRules{example: "broker1.example.com:9092", allowEmpty: true, dialable: true})
		}),
	int32Key(keyInfo{name: "node-id", def: "1", usage: "broker node id", doc: ""},
		func(c *Config) *int32 { return &c.NodeID }, parseInteger, int64Range{low: 0, high: math.MaxInt32}, strconv.FormatInt),
	stringKey(keyInfo{name: "cluster-peers", def: "", usage: "voters of the cluster's metadata raft group, id@host:port of their inter-broker listeners, comma-separated; empty means a single node", doc: "Example: 1@broker1:9093,2@broker2:9093,3@broker3:9093, the same on every\nnode, each started with its own node-id. The metadata group holds the\nbrokers' registrations, topics, placements and leaders (broker cluster\nstatus); topics created with replication factor 3 are replicated by a\nraft group per partition, RF 1 topics live on their leader only."},
		func(c *Config) *string { return &c.ClusterPeers }, checkClusterPeers),
	{
		name:   "cluster-join",
		def:    "false",
		usage:  "join an existing cluster: with an empty data directory, wait to be added (broker cluster add-node) instead of bootstrapping a new cluster with cluster-peers",
		doc:    "For a node added to a running cluster (and for a node whose disk was\nlost, which rejoins under a new node-id): its cluster-peers lists the\ncurrent members and itself. Once it holds the cluster's log the setting\nchanges nothing.",
		isBool: true,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("is not true or false")
			}
			c.ClusterJoin = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(c.ClusterJoin) },
	},
	stringKey(keyInfo{name: "inter-broker-addr", def: "", usage: "host:port the inter-broker (raft) listener binds; empty means this node's address in cluster-peers", doc: "Set it when the node must listen on another address than the one its\npeers dial (e.g. 0.0.0.0:9093). Only with cluster-peers. Expose it to\nthe other brokers only: its peers are not authenticated yet."},
		func(c *Config) *string { return &c.InterBrokerAddr },
		func(v string) string {
			return checkHostPort(v, hostPortRules{example: "0.0.0.0:9093", allowEmpty: true})
		}),
	intKey(keyInfo{name: "offsets-topic-replication-factor", def: "1", usage: "replication factor of __consumer_offsets in a cluster (Kafka's offsets.topic.replication.factor); above 1 the group coordinator fails over with its partition's raft leadership", doc: "Only with cluster-peers; read once, when the cluster first places its\ncoordinators (the first FindCoordinator), and kept for good. 1: each\npartition of __consumer_offsets lives on its coordinator only (a\ncoordinator that stops takes its groups' offsets with it until it is\nback). 3: each partition is a raft group of 3 brokers, committed offsets,\ngroup metadata and pending transactional offsets survive a coordinator's\ndeath."},
		func(c *Config) *int { return &c.OffsetsTopicReplicationFactor }, 1, 7),
	intKey(keyInfo{name: "transaction-state-log-replication-factor", def: "1", usage: "replication factor of __transaction_state in a cluster (Kafka's transaction.state.log.replication.factor); above 1 the transaction coordinator fails over with its partition's raft leadership", doc: "Only with cluster-peers; read once, when the cluster first places its\ntransaction coordinators (the first FindCoordinator of a transactional\nid), and kept for good. 1: a transactional id's state lives on its\ncoordinator only (its transactions hang while it is down). 3: each\npartition is a raft group of 3 brokers; a new coordinator loads the\nstate, completes decided transactions and aborts open ones. Needs the\nmarker sender (a PLAINTEXT first listener), else 1 is used."},
		func(c *Config) *int { return &c.TransactionStateLogReplicationFactor }, 1, 7),
	stringKey(keyInfo{name: "rack", def: "", usage: "rack reported in Metadata; empty means none", doc: ""},
		func(c *Config) *string { return &c.Rack },
		func(v string) string {
			if len(v) > 255 {
				return "is longer than 255 bytes; use a short rack or zone name, e.g. eu-west-1a"
			}
			for _, r := range v {
				if !unicode.IsPrint(r) {
					return "contains a control character; use a plain rack or zone name, e.g. eu-west-1a"
				}
			}
			return ""
		}),
	stringKey(keyInfo{name: "http-addr", def: "localhost:8080", usage: "host:port of the HTTP listener (/healthz, /readyz, /metrics, native API); empty disables it", doc: ""},
		func(c *Config) *string { return &c.HTTPAddr },
		func(v string) string {
			return checkHostPort(v, hostPortRules{example: "localhost:8080", allowEmpty: true})
		}),
	enumKey(keyInfo{name: "log-level", def: "info", usage: "least severe log level written: debug, info, warn or error", doc: ""},
		func(c *Config) *string { return &c.LogLevel }, "debug", "info", "warn", "error"),
	enumKey(keyInfo{name: "log-format", def: "auto", usage: "log format: json, console, or auto (console when stderr is a terminal, else json)", doc: ""},
		func(c *Config) *string { return &c.LogFormat }, "auto", "json", "console"),
	{
		name:   "auto-create-topics",
		def:    "true",
		usage:  "create unknown topics when a client asks for them in a Metadata request (as Kafka auto.create.topics.enable)",
		doc:    "Auto-created topics get default-partitions partitions.",
		isBool: true,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("is not true or false")
			}
			c.AutoCreateTopics = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(c.AutoCreateTopics) },
	},
	int32Key(keyInfo{name: "default-partitions", def: "1", usage: "partitions of auto-created topics (Kafka num.partitions)", doc: ""},
		func(c *Config) *int32 { return &c.DefaultPartitions }, parseInteger, int64Range{low: 1, high: 10000}, strconv.FormatInt),
	enumKey(keyInfo{name: "fsync", def: "always", usage: "always: acknowledge writes after fsync; never: relaxed mode, acknowledge before fsync", doc: "With never, acknowledged messages can be lost when the machine crashes\n(not when only the broker process does). The broker logs a warning at start."},
		func(c *Config) *string { return &c.Fsync }, "always", "never"),
	byteSizeKey(keyInfo{name: "disk-free-min", def: "512MiB", usage: "least free space on the data directory's filesystem; below it new data is refused (Kafka KAFKA_STORAGE_ERROR, HTTP 507 storage_full); 0 disables the check", doc: "Accepts a byte size such as 512MiB or 2GiB. New data = produce, queue sends, event appends,\n" +
		"dead-letter and redrive moves; reads, acks, offset commits, transaction markers and\n" +
		"deletions (DeleteRecords, DeleteTopics, queue purge and delete, retention) go on, so\n" +
		"space can be freed: the range of a deleted topic, queue, event store or of deleted\n" +
		"records is compacted at once (values that share Pebble blob files with data that\n" +
		"stays come back later, see README). Writes are accepted again, without a restart,\n" +
		"once free space is back above this\n" +
		"limit + 25%. The space below the limit is what Pebble needs to flush its memtables\n" +
		"(up to 4 x memtable-size) and compact; if the disk fills up anyway the broker stops\n" +
		"(Pebble cannot survive a failed write). Free space is measured every second and after\n" +
		"every 16MiB of new data."},
		func(c *Config) *int64 { return &c.DiskFreeMin }, 0, math.MaxInt64),
	int32Key(keyInfo{name: "message-max-bytes", def: "1048588", usage: "default max.message.bytes of topics: the largest record batch accepted", doc: "Accepts a byte size such as 1MiB. At most max-request-bytes."},
		func(c *Config) *int32 { return &c.MessageMaxBytes }, parseByteSize, int64Range{low: 1, high: math.MaxInt32}, formatByteSize),
	int32Key(keyInfo{name: "max-request-bytes", def: "104857600", usage: "largest request frame accepted (Kafka socket.request.max.bytes)", doc: "Accepts a byte size such as 100MiB."},
		func(c *Config) *int32 { return &c.MaxRequestBytes }, parseByteSize, int64Range{low: 1024, high: math.MaxInt32}, formatByteSize),
	intKey(keyInfo{name: "max-inflight-requests", def: "64", usage: "pipelined requests per connection before the broker pauses reading it", doc: ""},
		func(c *Config) *int { return &c.MaxInflightRequests }, 1, 1024),
	intKey(keyInfo{name: "max-connections", def: "10000", usage: "most open Kafka client connections; further connections are refused", doc: ""},
		func(c *Config) *int { return &c.MaxConnections }, 1, 1_000_000),
	intKey(keyInfo{name: "max-connections-per-ip", def: "1000", usage: "most open Kafka client connections from one IP address (Kafka max.connections.per.ip); further ones are refused", doc: "Kafka's default is unlimited; 1000 keeps one misbehaving host (a connection leak, a\n" +
		"reconnect storm) from taking all of max-connections, while leaving room for many\n" +
		"clients behind one NAT address. Refusals are counted in\n" +
		"broker_kafka_connections_refused_total and logged at most every 10s. Set it to\n" +
		"max-connections to have no per-address limit."},
		func(c *Config) *int { return &c.MaxConnectionsPerIP }, 1, 1_000_000),
	stringKey(keyInfo{name: "max-connections-per-ip-overrides", def: "", usage: "other max-connections-per-ip limits for some addresses, as ip:count,ip:count (Kafka max.connections.per.ip.overrides; IP addresses, not host names)", doc: "E.g. 10.0.0.5:5000,192.0.2.7:10 gives a proxy more room and one host less. An\n" +
		"address not listed gets max-connections-per-ip."},
		func(c *Config) *string { return &c.MaxConnectionsPerIPOverrides },
		func(v string) string {
			if _, err := parseConnectionOverrides(v); err != nil {
				return err.Error()
			}
			return ""
		}),
	byteSizeKey(keyInfo{name: "queued-max-request-bytes", def: "0", usage: "memory for Kafka requests being read or waiting for their replies, all connections together (Kafka queued.max.request.bytes); 0 derives it from memory", doc: "0 means min(1/8 of the machine's or the container's memory, 1GiB), and at least\n" +
		"max-request-bytes; the value chosen is logged at start. Each request reserves its\n" +
		"claimed size before more than 64KiB of it is read (buffers grow as bytes arrive)\n" +
		"and gives it back once its reply is written;\n" +
		"while the budget is used up the broker stops reading from client sockets (back\n" +
		"pressure) instead of allocating more. Must be at least max-request-bytes, so that a\n" +
		"request of the largest size can always be read. Fetch responses are charged to it\n" +
		"too, from their read until written: a fetch's max_bytes is shrunk to what is free\n" +
		"(never below one batch, KIP-74), without waiting. Metrics:\n" +
		"broker_kafka_request_memory_bytes, broker_kafka_request_memory_waits_total,\n" +
		"broker_kafka_fetch_memory_bytes, broker_kafka_fetch_memory_shrunk_total."},
		func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }, 0, math.MaxInt64),
	durationKey(keyInfo{name: "connections-max-idle", def: "10m", usage: "close a Kafka connection after this long without a request in progress or a reply outstanding (Kafka connections.max.idle.ms)", doc: "A long-polling fetch is outstanding, so its connection is not idle. A client that reads\n" +
		"none of its replies for this long is closed too."},
		func(c *Config) *time.Duration { return &c.ConnectionsMaxIdle }, 100*time.Millisecond, 7*24*time.Hour),
	durationKey(keyInfo{name: "request-read-timeout", def: "30s", usage: "close a Kafka connection whose request frame is not complete this long after its first byte", doc: "Bounds how long a stalled or trickling client holds its request memory. 30s is the\n" +
		"request.timeout.ms of Kafka clients, which give up on a request by then anyway; the\n" +
		"largest request (max-request-bytes, 100MiB) must then arrive at about 3.5MB/s. Time\n" +
		"spent waiting for request memory does not count."},
		func(c *Config) *time.Duration { return &c.RequestReadTimeout }, 100*time.Millisecond, time.Hour),
	intKey(keyInfo{name: "quota-window-num", def: "11", usage: "samples a client quota's rate is measured over (Kafka quota.window.num)", doc: "A client's rate (producer_byte_rate, consumer_byte_rate, request_percentage; set\n" +
		"with broker quotas set or AlterClientQuotas) is its bytes or request time in the last\n" +
		"quota-window-num x quota-window-size, at least (quota-window-num - 1) windows; a\n" +
		"client over its quota is throttled until its rate is back at it. Longer windows\n" +
		"allow longer bursts."},
		func(c *Config) *int { return &c.QuotaWindowNum }, 2, 1000),
	durationKey(keyInfo{name: "quota-window-size", def: "1s", usage: "length of one client quota sample (Kafka quota.window.size.seconds)", doc: ""},
		func(c *Config) *time.Duration { return &c.QuotaWindowSize }, 10*time.Millisecond, time.Hour),
	intKey(keyInfo{name: "http-max-connections", def: "10000", usage: "most open HTTP connections; further connections are closed at once", doc: ""},
		func(c *Config) *int { return &c.HTTPMaxConnections }, 1, 1_000_000),
	intKey(keyInfo{name: "http-max-connections-per-ip", def: "1000", usage: "most open HTTP connections from one IP address; further ones are closed at once", doc: "As max-connections-per-ip for Kafka: keeps one misbehaving host from taking all of\n" +
		"http-max-connections. Refusals are counted in broker_http_connections_refused_total\n" +
		"and logged at most every 10s. Set it to http-max-connections to have no per-address\n" +
		"limit."},
		func(c *Config) *int { return &c.HTTPMaxConnectionsPerIP }, 1, 1_000_000),
	intKey(keyInfo{name: "http-max-streams", def: "1000", usage: "most SSE tails and waiting long polls (queue receive and store reads with wait_ms) open at once; further ones get 503 too_many_streams", doc: "Each holds a connection and a goroutine for as long as it waits. The answer carries\n" +
		"Retry-After: 1; a poll without wait_ms is not counted. Gauge: broker_http_streams."},
		func(c *Config) *int { return &c.HTTPMaxStreams }, 1, 1_000_000),
	byteSizeKey(keyInfo{name: "http-max-inflight-body-bytes", def: "0", usage: "memory for HTTP request bodies being read or handled, all connections together; 0 derives it from memory", doc: "0 means min(1/16 of the machine's or the container's memory, 256MiB), and at least\n" +
		"32MiB; the value chosen is logged at start. A request reserves its declared\n" +
		"Content-Length (a chunked body: the largest body a route accepts, 17MiB) before its\n" +
		"body is read and gives it back when it is answered; a request that does not fit is\n" +
		"answered 503 body_memory_exhausted with Retry-After: 1 at once, unread. Must be at\n" +
		"least 17MiB (the largest request body, a queue send). Metrics:\n" +
		"broker_http_body_memory_bytes, broker_http_requests_refused_total{reason=\"body_memory\"}."},
		func(c *Config) *int64 { return &c.HTTPMaxInflightBodyBytes }, 0, math.MaxInt64),
	durationKey(keyInfo{name: "http-write-timeout", def: "30s", usage: "close an HTTP connection whose response is not written within this: an ordinary response after its request headers, a long poll after its wait, each event or heartbeat of an SSE tail", doc: "An SSE tail whose client stops reading is closed when one write misses it, and counted\n" +
		"in broker_http_stream_write_timeouts_total. Go's http.Server WriteTimeout for\n" +
		"ordinary requests, so a handler must also answer within it (pprof profiles\n" +
		"included)."},
		func(c *Config) *time.Duration { return &c.HTTPWriteTimeout }, 100*time.Millisecond, time.Hour),
	byteSizeKey(keyInfo{name: "memtable-size", def: "64MiB", usage: "size of one Pebble memtable", doc: "Larger memtables let more concurrent writers share one flush."},
		func(c *Config) *int64 { return &c.MemtableSize }, 1<<20, 4095<<20), // Pebble: < 4GiB
	byteSizeKey(keyInfo{name: "cache-size", def: "256MiB", usage: "size of Pebble's block cache", doc: ""},
		func(c *Config) *int64 { return &c.CacheSize }, 0, math.MaxInt64),
	byteSizeKey(keyInfo{name: "memory-limit", def: "0", usage: "Go's soft memory limit for the broker (GOMEMLIMIT): the garbage collector works harder as the process nears it; 0 derives it from memory", doc: "0 means 90% of the machine's or the container's memory, unless the GOMEMLIMIT\n" +
		"environment variable is set (then Go's own setting stands); no limit when memory\n" +
		"cannot be read. The value chosen is logged at start. A soft limit: the process may\n" +
		"pass it, but the GC collects more often near it, so RSS stays below the container's\n" +
		"limit instead of growing to twice the live heap (GOGC=100) before a collection. It\n" +
		"counts Go's memory only: in the Docker image (CGO_ENABLED=0) Pebble's block cache\n" +
		"and memtables are in it; in a cgo build they are outside it. Keep it well above\n" +
		"cache-size + 4 x memtable-size + queued-max-request-bytes (a warning is logged below\n" +
		"the first two): below the working set the GC runs almost continuously (BENCHMARKS.md,\n" +
		"256MiB: 5x the CPU per GB consumed)."},
		func(c *Config) *int64 { return &c.MemoryLimit }, 0, math.MaxInt64),
	durationKey(keyInfo{name: "group-initial-rebalance-delay", def: "3s", usage: "how long a new consumer group waits for more members before its first rebalance", doc: "Kafka group.initial.rebalance.delay.ms."},
		func(c *Config) *time.Duration { return &c.GroupInitialRebalanceDelay }, 0, 10*time.Minute),
	durationKey(keyInfo{name: "group-consumer-session-timeout", def: "45s", usage: "how long a member of a consumer group using the new protocol (KIP-848) may go without a heartbeat", doc: "Kafka group.consumer.session.timeout.ms. Must exceed group-consumer-heartbeat-interval."},
		func(c *Config) *time.Duration { return &c.GroupConsumerSessionTimeout }, time.Second, time.Hour),
	durationKey(keyInfo{name: "group-consumer-heartbeat-interval", def: "5s", usage: "how often members of a consumer group using the new protocol (KIP-848) heartbeat", doc: "Kafka group.consumer.heartbeat.interval.ms."},
		func(c *Config) *time.Duration { return &c.GroupConsumerHeartbeatInterval }, 100*time.Millisecond, 10*time.Minute),
	enumKey(keyInfo{name: "group-consumer-migration-policy", def: "bidirectional", usage: "whether a group with members moves between the classic and the new protocol (KIP-848): bidirectional, upgrade, downgrade or disabled", doc: "Kafka group.consumer.migration.policy. upgrade: a classic group becomes a consumer group when a member of the new protocol joins it; downgrade: a consumer group of classic members only becomes classic when its last member of the new protocol leaves; bidirectional: both. Empty groups convert under every policy."},
		func(c *Config) *string { return &c.GroupConsumerMigrationPolicy }, "bidirectional", "upgrade", "downgrade", "disabled"),
	durationKey(keyInfo{name: "group-share-record-lock-duration", def: "30s", usage: "how long a share group member holds a record it fetched before the record is delivered again", doc: "Kafka group.share.record.lock.duration.ms (KIP-932), the acquisition lock."},
		func(c *Config) *time.Duration { return &c.GroupShareRecordLockDuration }, time.Second, time.Hour),
	intKey(keyInfo{name: "group-share-delivery-count-limit", def: "5", usage: "how many times a share group delivers a record before it archives it", doc: "Kafka group.share.delivery.count.limit (KIP-932). An archived record is skipped, never delivered again."},
		func(c *Config) *int { return &c.GroupShareDeliveryCountLimit }, 1, 1000),
	enumKey(keyInfo{name: "group-share-auto-offset-reset", def: "latest", usage: "where a share group starts in a partition it has not read before: latest or earliest", doc: "Kafka's group config share.auto.offset.reset (KIP-932), here for every share group."},
		func(c *Config) *string { return &c.GroupShareAutoOffsetReset }, "latest", "earliest"),
	durationKey(keyInfo{name: "offsets-retention", def: "168h", usage: "how long committed offsets of an empty consumer group are kept", doc: "Kafka offsets.retention.minutes."},
		func(c *Config) *time.Duration { return &c.OffsetsRetention }, time.Minute, math.MaxInt64),
	durationKey(keyInfo{name: "transaction-max-timeout", def: "15m", usage: "the largest transaction.timeout.ms a transactional producer may ask for", doc: "Kafka transaction.max.timeout.ms."},
		func(c *Config) *time.Duration { return &c.TransactionMaxTimeout }, time.Second, 24*time.Hour),
	durationKey(keyInfo{name: "transactional-id-expiration", def: "168h", usage: "how long a transactional ID without an open transaction is remembered after its last use", doc: "Kafka transactional.id.expiration.ms."},
		func(c *Config) *time.Duration { return &c.TransactionalIDExpiration }, time.Minute, math.MaxInt64),
}, append(logConfigKeys, // log retention and compaction: logs.go
	securityConfigKeys...)...) // listeners, TLS, SASL: security.go

// lookupKey returns the key named name, or nil.
func lookupKey(name string) *configKey {
	for i := range configKeys {
		if configKeys[i].name == name {
			return &configKeys[i]
		}
	}
	return nil
}

// defaultConfig returns the configuration with every key at its default.
func defaultConfig() *Config {
	c := &Config{}
	for i := range configKeys {
		k := &configKeys[i]
		if err := k.set(c, k.def); err != nil {
			panic(fmt.Sprintf("config: default %q of %s does not parse: %v", k.def, k.name, err))
		}
	}
	return c
}

// flagLookup reports the value of a flag the user set on the command line.
type flagLookup func(name string) (value string, ok bool)

// loadConfig layers the configuration: defaults, then the YAML file at path
// (if path is not empty), then the BROKER_* variables in environ, then the
// flags. Every problem found is reported, one sentence per line; the result
// still needs Validate.
func loadConfig(path string, environ []string, flags flagLookup) (*Config, error) {
	c := defaultConfig()
	c.source = make(map[string]string)
	var errs []error
	apply := func(k *configKey, value, source string) {
		if err := k.set(c, value); err != nil {
			errs = append(errs, fmt.Errorf("%s %q (from %s) %v", k.name, value, source, err))
			return
		}
		c.source[k.name] = source
	}

	if path != "" {
		values, err := readConfigFile(path)
		errs = append(errs, err...)
		for _, v := range values {
			apply(v.key, v.value, v.source)
		}
	}

	envNames := []string{configEnv}
	for i := range configKeys {
		envNames = append(envNames, configKeys[i].envName())
	}
	envs := make(map[string]string)
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "BROKER_") {
			envs[name] = value
		}
	}
	for _, name := range sortedKeys(envs) {
		if name == configEnv || name == bootstrapEnv || isClientEnv(name) {
			continue
		}
		found := false
		for i := range configKeys {
			if k := &configKeys[i]; k.envName() == name {
				apply(k, envs[name], "environment variable "+name)
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("unknown environment variable %s%s", name,
				didYouMean(name, envNames)))
		}
	}

	if flags != nil {
		for i := range configKeys {
			k := &configKeys[i]
			if v, ok := flags(k.name); ok {
				apply(k, v, "--"+k.name)
			}
		}
	}
	return c, errors.Join(errs...)
}

// fileValue is one key: value pair of the config file.
type fileValue struct {
	key    *configKey
	value  string
	source string
}

// readConfigFile parses the YAML file at path: one mapping of known keys to
// single values. It walks the YAML nodes rather than decoding into a struct
// with KnownFields(true) so that every message can name the file and the
// line, suggest the key meant, and catch a key given twice.
func readConfigFile(path string) ([]fileValue, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{fmt.Errorf("cannot read config file: %w; check the --config path (or %s)", err, configEnv)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil // empty file: all defaults
	} else if err != nil {
		return nil, []error{fmt.Errorf("config file %s is not valid YAML: %v", path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, []error{fmt.Errorf("config file %s holds more than one YAML document (a second --- line); keep one", path)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, []error{fmt.Errorf("config file %s line %d: the file must be a list of key: value lines, as in config.example.yaml", path, root.Line)}
	}

	var names []string
	for i := range configKeys {
		names = append(names, configKeys[i].name)
	}
	var values []fileValue
	var errs []error
	seen := make(map[string]int)
	for i := 0; i+1 < len(root.Content); i += 2 {
		keyNode, valueNode := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s line %d", path, keyNode.Line)
		k := lookupKey(keyNode.Value)
		if keyNode.Kind != yaml.ScalarNode || k == nil {
			errs = append(errs, fmt.Errorf("unknown key %q in config file %s%s", keyNode.Value, at, didYouMean(keyNode.Value, names)))
			continue
		}
		if line, ok := seen[k.name]; ok {
			errs = append(errs, fmt.Errorf("key %s appears twice in config file %s (lines %d and %d); keep one", k.name, path, line, keyNode.Line))
			continue
		}
		seen[k.name] = keyNode.Line
		if valueNode.Kind == yaml.AliasNode && valueNode.Alias != nil {
			valueNode = valueNode.Alias
		}
		switch {
		case valueNode.Kind != yaml.ScalarNode:
			errs = append(errs, fmt.Errorf("%s in config file %s must be a single value, not a list or a map; e.g. %s: %s", k.name, at, k.name, k.def))
		case valueNode.Tag == "!!null":
			errs = append(errs, fmt.Errorf("%s in config file %s has no value; give one (e.g. %s: %q) or delete the line", k.name, at, k.name, k.def))
		default:
			values = append(values, fileValue{key: k, value: valueNode.Value, source: at})
		}
	}
	return values, errs
}

// Validate checks every value and every rule between values. Each problem
// is one sentence saying what to fix; all problems are reported.
func (c *Config) Validate() error {
	var errs []error
	for i := range configKeys {
		k := &configKeys[i]
		if k.check == nil {
			continue
		}
		if problem := k.check(c); problem != "" {
			errs = append(errs, fmt.Errorf("%s %q%s %s", k.name, k.get(c), c.from(k.name), problem))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	if c.MessageMaxBytes > c.MaxRequestBytes {
		errs = append(errs, fmt.Errorf("message-max-bytes (%d) is larger than max-request-bytes (%d), so no producer could send a message of the largest allowed size; raise max-request-bytes or lower message-max-bytes",
			c.MessageMaxBytes, c.MaxRequestBytes))
	}
	if c.QueuedMaxRequestBytes != 0 && c.QueuedMaxRequestBytes < int64(c.MaxRequestBytes) {
		errs = append(errs, fmt.Errorf("queued-max-request-bytes (%d)%s is smaller than max-request-bytes (%d), so a request of the largest allowed size could never be read; raise queued-max-request-bytes, lower max-request-bytes, or set queued-max-request-bytes to 0 to derive it from memory",
			c.QueuedMaxRequestBytes, c.from("queued-max-request-bytes"), c.MaxRequestBytes))
	}
	if c.HTTPMaxInflightBodyBytes != 0 && c.HTTPMaxInflightBodyBytes < httpapi.QueueSendBodyMax {
		errs = append(errs, fmt.Errorf("http-max-inflight-body-bytes (%d)%s is smaller than the largest HTTP request body (%s, a queue send), which could then never be read; raise it, or set it to 0 to derive it from memory",
			c.HTTPMaxInflightBodyBytes, c.from("http-max-inflight-body-bytes"), formatByteSize(httpapi.QueueSendBodyMax, 10)))
	}
	if c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout {
		errs = append(errs, fmt.Errorf("group-consumer-heartbeat-interval (%v)%s is not below group-consumer-session-timeout (%v), so members would expire between heartbeats; lower the interval or raise the timeout",
			c.GroupConsumerHeartbeatInterval, c.from("group-consumer-heartbeat-interval"), c.GroupConsumerSessionTimeout))
	}
	errs = append(errs, c.validateSecurity()...)
	errs = append(errs, c.validateCluster()...)
	if c.HTTPAddr != "" && c.Security.Listeners == "" && sameListenAddr(c.HTTPAddr, c.KafkaAddr) {
		errs = append(errs, fmt.Errorf("http-addr %q%s is the address of the Kafka listener; give the HTTP listener its own port, e.g. localhost:8080",
			c.HTTPAddr, c.from("http-addr")))
	}
	return errors.Join(errs...)
}

// from returns " (from <source>)" for a key the user set, "" for a default.
func (c *Config) from(key string) string {
	if s, ok := c.source[key]; ok {
		return " (from " + s + ")"
	}
	return ""
}

// configFlags returns --config and one flag per key. Flags declare no
// EnvVars: the environment is layered by loadConfig, so that a flag wins
// over the environment and the environment over the file.
func configFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{
			Name:      configFlag,
			Aliases:   []string{"c"},
			Usage:     "read configuration keys from this YAML `FILE` (see config.example.yaml)",
			EnvVars:   []string{configEnv},
			TakesFile: true,
		},
	}
	for i := range configKeys {
		k := &configKeys[i]
		usage := fmt.Sprintf("%s (env %s)", k.usage, k.envName())
		def := k.def
		if def == "" {
			def = `""`
		}
		if k.isBool {
			flags = append(flags, &cli.BoolFlag{Name: k.name, Usage: usage, DefaultText: def})
		} else {
			flags = append(flags, &cli.StringFlag{Name: k.name, Usage: usage, DefaultText: def})
		}
	}
	return flags
}

// cliFlagLookup reads the key flags the user set on cCtx.
func cliFlagLookup(cCtx *cli.Context) flagLookup {
	return func(name string) (string, bool) {
		if !cCtx.IsSet(name) {
			return "", false
		}
		if k := lookupKey(name); k != nil && k.isBool {
			return strconv.FormatBool(cCtx.Bool(name)), true
		}
		return cCtx.String(name), true
	}
}

// renderExampleConfig returns config.example.yaml: every key at its
// default with its documentation.
func renderExampleConfig() string {
	var b strings.Builder
	b.WriteString(`# Configuration of the broker ("broker serve --config config.example.yaml").
#
# Every key below is set to its default. Each key can also be given as a
# flag (--data-dir) or an environment variable (BROKER_DATA_DIR); a flag wins
# over the environment, the environment over this file, this file over the
# default. Unknown keys and unknown BROKER_* variables are rejected at start.
#
# Byte sizes: 1048576, 64MiB, 1GB (KiB/MiB/GiB/TiB are powers of 1024,
# KB/MB/GB/TB powers of 1000). Durations: 500ms, 3s, 10m, 168h.
#
# Generated from cmd/broker/config.go: edit the table there, then run
#   go test ./cmd/broker -run TestExampleConfig -update
`)
	for i := range configKeys {
		k := &configKeys[i]
		b.WriteString("\n")
		lines := []string{strings.ToUpper(k.usage[:1]) + k.usage[1:] + "."}
		if k.doc != "" {
			lines = append(lines, strings.Split(k.doc, "\n")...)
		}
		def := k.def
		if def == "" {
			def = `""`
		}
		lines = append(lines, fmt.Sprintf("Default: %s. Flag: --%s. Environment: %s.", def, k.name, k.envName()))
		for _, line := range lines {
			b.WriteString("# " + line + "\n")
		}
		value := k.def
		if k.quoted {
			value = strconv.Quote(value)
		}
		fmt.Fprintf(&b, "%s: %s\n", k.name, value)
	}
	return b.String()
}

// Key constructors. Each returns a configKey whose set, get and check
// close over one field of Config.

// keyInfo is what every key declares: its name, default, one-line usage
// and optional further doc (the fields of configKey of the same names).
type keyInfo struct {
	name, def, usage, doc string
}

// int64Range bounds an integer key's values (inclusive).
type int64Range struct {
	low, high int64
}

func stringKey(k keyInfo, field func(*Config) *string, check func(string) string) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc, quoted: true,
		set:   func(c *Config, v string) error { *field(c) = v; return nil },
		get:   func(c *Config) string { return *field(c) },
		check: func(c *Config) string { return check(*field(c)) },
	}
}

func enumKey(k keyInfo, field func(*Config) *string, allowed ...string) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc,
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c *Config) string { return *field(c) },
		check: func(c *Config) string {
			for _, a := range allowed {
				if *field(c) == a {
					return ""
				}
			}
			return "is not one of " + orList(allowed)
		},
	}
}

// int32Key declares an int32 key whose text is read by parse (a plain
// integer or a byte size) and written back by format.
func int32Key(k keyInfo, field func(*Config) *int32,
	parse func(string) (int64, error), bounds int64Range, format func(int64, int) string) configKey {
	low, high := bounds.low, bounds.high
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc,
		set: func(c *Config, v string) error {
			n, err := parse(v)
			if err != nil {
				return err
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return fmt.Errorf("is out of range; use a value between %s and %s", format(low, 10), format(high, 10))
			}
			*field(c) = int32(n)
			return nil
		},
		get:   func(c *Config) string { return format(int64(*field(c)), 10) },
		check: func(c *Config) string { return checkRange(int64(*field(c)), low, high, format) },
	}
}

func intKey(k keyInfo, field func(*Config) *int, low, high int64) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc,
		set: func(c *Config, v string) error {
			n, err := parseInteger(v)
			if err != nil {
				return err
			}
			*field(c) = int(n)
			return nil
		},
		get:   func(c *Config) string { return strconv.Itoa(*field(c)) },
		check: func(c *Config) string { return checkRange(int64(*field(c)), low, high, strconv.FormatInt) },
	}
}

func byteSizeKey(k keyInfo, field func(*Config) *int64, low, high int64) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc,
		set: func(c *Config, v string) error {
			n, err := parseByteSize(v)
			if err != nil {
				return err
			}
			*field(c) = n
			return nil
		},
		get:   func(c *Config) string { return formatByteSize(*field(c), 10) },
		check: func(c *Config) string { return checkRange(*field(c), low, high, formatByteSize) },
	}
}

func durationKey(k keyInfo, field func(*Config) *time.Duration, low, high time.Duration) configKey {
	return configKey{
		name: k.name, def: k.def, usage: k.usage, doc: k.doc,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return errors.New("is not a duration; use e.g. 500ms, 3s, 10m or 168h")
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return formatDuration(*field(c)) },
		check: func(c *Config) string {
			d := *field(c)
			switch {
			case d < low:
				return "is shorter than " + formatDuration(low) + "; use at least " + formatDuration(low)
			case d > high:
				return "is longer than " + formatDuration(high) + "; use at most " + formatDuration(high)
			}
			return ""
		},
	}
}

func checkRange(n, low, high int64, format func(int64, int) string) string {
	unbounded := high == math.MaxInt32 || high == math.MaxInt64
	switch {
	case n < low && unbounded:
		return "is less than " + format(low, 10) + "; use at least " + format(low, 10)
	case n < low:
		return "is less than " + format(low, 10) + "; use a value from " + format(low, 10) + " to " + format(high, 10)
	case n > high:
		return "is more than " + format(high, 10) + "; use a value from " + format(low, 10) + " to " + format(high, 10)
	}
	return ""
}

// parseInteger parses a decimal integer.
func parseInteger(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, errors.New("is not an integer; use digits only, e.g. 1")
	}
	return n, nil
}

var byteUnits = []struct {
	suffix string
	size   int64
}{
	// Longest suffixes first so that "MiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// parseByteSize parses a byte count: "1048576", "64MiB", "1GB", "512 KiB".
// Units are case-insensitive; KiB..TiB are powers of 1024, KB..TB of 1000.
func parseByteSize(s string) (int64, error) {
	bad := fmt.Errorf("is not a byte size; use e.g. 64MiB, 1GB or 1048576")
	t := strings.ToLower(strings.TrimSpace(s))
	multiplier := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			multiplier = u.size
			break
		}
	}
	if t == "" || strings.ContainsAny(t, "+-") {
		return 0, bad
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("is too large a byte size")
		}
		return 0, bad
	}
	if n > math.MaxInt64/multiplier {
		return 0, errors.New("is too large a byte size")
	}
	return n * multiplier, nil
}

// formatByteSize writes n with the largest binary unit that divides it
// exactly, so that parseByteSize(formatByteSize(n)) == n. The second
// argument makes it usable where strconv.FormatInt is.
func formatByteSize(n int64, _ int) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// formatDuration is time.Duration.String without trailing zero units:
// 168h instead of 168h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

type hostPortRules struct {
	example    string
	allowEmpty bool
	// dialable requires a concrete host and port (an address given to
	// clients), not a listen address.
	dialable bool
}

// checkHostPort returns "" or what is wrong with s as a host:port.
func checkHostPort(s string, rules hostPortRules) string {
	if s == "" {
		if rules.allowEmpty {
			return ""
		}
		return "is empty; use e.g. " + rules.example
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "is not host:port; use e.g. " + rules.example
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "has port " + strconv.Quote(port) + ", which is not a number between 0 and 65535; use e.g. " + rules.example
	}
	if strings.ContainsAny(host, " \t/") {
		return "is not host:port; use e.g. " + rules.example
	}
	if rules.dialable {
		if !dialableHost(host) {
			return "does not name a host clients can dial; use e.g. " + rules.example
		}
		if p == 0 {
			return "has port 0, which clients cannot dial; use e.g. " + rules.example
		}
	}
	return ""
}

// dialableHost reports whether host names one machine: not empty and not
// an unspecified address such as 0.0.0.0 or ::.
func dialableHost(host string) bool {
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return false
	}
	return true
}

// sameListenAddr reports whether two listen addresses certainly collide:
// same host text and the same non-zero port.
func sameListenAddr(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && portA == portB && portA != "0" && hostA == hostB
}

// didYouMean returns "; did you mean X?" for the candidate closest to
// name, or "" when none is close.
func didYouMean(name string, candidates []string) string {
	normalize := func(s string) string {
		s = strings.ToLower(s)
		return strings.NewReplacer("-", "", "_", "").Replace(s)
	}
	best, bestDistance := "", math.MaxInt
	for _, c := range candidates {
		d := editDistance(normalize(name), normalize(c))
		if d < bestDistance {
			best, bestDistance = c, d
		}
	}
	if best == "" || bestDistance > max(1, len(normalize(name))/4) {
		return ""
	}
	return "; did you mean " + best + "?"
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbors cost one.
func editDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			rows[i][j] = min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				rows[i][j] = min(rows[i][j], rows[i-2][j-2]+1)
			}
		}
	}
	return rows[len(a)][len(b)]
}

func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseConnectionOverrides reads max-connections-per-ip-overrides:
// ip:count pairs, comma-separated (an IPv6 address in brackets or bare:
// the count is after the last colon).
func parseConnectionOverrides(v string) (map[netip.Addr]int, error) {
	out := map[netip.Addr]int{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		i := strings.LastIndexByte(p, ':')
		if i < 0 {
			return nil, fmt.Errorf("names %q, which is not ip:count; use e.g. 10.0.0.5:5000", p)
		}
		ip, err := netip.ParseAddr(strings.Trim(p[:i], "[]"))
		n, nerr := strconv.Atoi(p[i+1:])
		if err != nil || nerr != nil || n < 0 || n > 1_000_000 {
			return nil, fmt.Errorf("names %q, which is not ip:count with an IP address and a count from 0 to 1000000; use e.g. 10.0.0.5:5000", p)
		}
		out[ip.Unmap()] = n
	}
	return out, nil
}
