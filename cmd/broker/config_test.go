package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

var update = flag.Bool("update", false, "rewrite config.example.yaml from the key table")

const examplePath = "../../config.example.yaml"

// loadFromArgs parses args as "broker serve" would and loads the
// configuration from them, the file they name and environ.
func loadFromArgs(t *testing.T, args, environ []string) (*Config, error) {
	t.Helper()
	var cfg *Config
	var loadErr error
	cmd := serveCommand()
	cmd.Action = func(cCtx *cli.Context) error {
		cfg, loadErr = loadConfig(cCtx.String(configFlag), environ, cliFlagLookup(cCtx))
		return nil
	}
	cmd.OnUsageError = usageError
	app := &cli.App{
		Name:           "broker",
		Commands:       []*cli.Command{cmd},
		ExitErrHandler: func(*cli.Context, error) {},
		Writer:         &bytes.Buffer{},
		ErrWriter:      &bytes.Buffer{},
	}
	if err := app.Run(append([]string{"broker", "serve"}, args...)); err != nil {
		return nil, err
	}
	return cfg, loadErr
}

// writeFile writes content to a file in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	c := defaultConfig()
	want := &Config{
		DataDir:                              "./data",
		KafkaAddr:                            "localhost:9092",
		AdvertisedAddr:                       "",
		NodeID:                               1,
		OffsetsTopicReplicationFactor:        1,
		TransactionStateLogReplicationFactor: 1,
		Rack:                                 "",
		HTTPAddr:                             "localhost:8080",
		LogLevel:                             "info",
		LogFormat:                            "auto",
		AutoCreateTopics:                     true,
		DefaultPartitions:                    1,
		Fsync:                                "always",
		DiskFreeMin:                          512 << 20,
		MessageMaxBytes:                      1048588,
		MaxRequestBytes:                      104857600,
		MaxInflightRequests:                  64,
		MaxConnections:                       10000,
		MaxConnectionsPerIP:                  1000,
		QueuedMaxRequestBytes:                0,
		ConnectionsMaxIdle:                   10 * time.Minute,
		QuotaWindowNum:                       11,
		QuotaWindowSize:                      time.Second,
		RequestReadTimeout:                   30 * time.Second,
		HTTPMaxConnections:                   10000,
		HTTPMaxConnectionsPerIP:              1000,
		HTTPMaxStreams:                       1000,
		HTTPMaxInflightBodyBytes:             0,
		HTTPWriteTimeout:                     30 * time.Second,
		MemtableSize:                         64 << 20,
		CacheSize:                            256 << 20,
		GroupInitialRebalanceDelay:           3 * time.Second,
		GroupConsumerSessionTimeout:          45 * time.Second,
		GroupConsumerHeartbeatInterval:       5 * time.Second,
		GroupConsumerMigrationPolicy:         "bidirectional",
		GroupShareRecordLockDuration:         30 * time.Second,
		GroupShareDeliveryCountLimit:         5,
		GroupShareAutoOffsetReset:            "latest",
		OffsetsRetention:                     168 * time.Hour,
		TransactionMaxTimeout:                15 * time.Minute,
		TransactionalIDExpiration:            168 * time.Hour,
		// Log retention and compaction (logs.go).
		LogCleanupPolicy:            "delete",
		LogRetention:                168 * time.Hour,
		LogRetentionBytes:           -1,
		LogSegmentBytes:             1 << 30,
		LogRoll:                     168 * time.Hour,
		LogCleanerDeleteRetention:   24 * time.Hour,
		LogCleanerMinCleanableRatio: 0.5,
		LogRetentionCheckInterval:   5 * time.Minute,
		LogCleanerBackoff:           15 * time.Second,
		LogCleanerEnable:            true,
		LogCleanerDedupeBufferSize:  64 << 20,
		// Listeners, TLS, SASL (security.go).
		Security: SecurityConfig{
			SSLClientAuth:             "none",
			SSLPrincipalMappingRules:  "DEFAULT",
			SASLMechanisms:            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			FailedAuthenticationDelay: 100 * time.Millisecond,
			OAuthSubClaim:             "sub",
			OAuthClockSkew:            30 * time.Second,
			OAuthJWKSRefresh:          time.Hour,
			HTTPAuth:                  "none",
			HTTPAuthMetrics:           "required",
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

// TestKeyTable checks the table itself: unique names, env names derived
// from them, and get/set round trips of every default.
func TestKeyTable(t *testing.T) {
	seen := map[string]bool{configFlag: true}
	for i := range configKeys {
		k := &configKeys[i]
		if seen[k.name] {
			t.Errorf("key %s declared twice", k.name)
		}
		seen[k.name] = true
		if k.name != strings.ToLower(k.name) || strings.Contains(k.name, "_") {
			t.Errorf("key %s: use lower-kebab-case", k.name)
		}
		if k.usage == "" || k.set == nil || k.get == nil {
			t.Errorf("key %s: missing usage, set or get", k.name)
		}
		c := defaultConfig()
		if err := k.set(c, k.get(c)); err != nil {
			t.Errorf("key %s: get %q does not parse back: %v", k.name, k.get(c), err)
		}
		if !reflect.DeepEqual(c, defaultConfig()) {
			t.Errorf("key %s: set(get()) changed the config", k.name)
		}
	}
	if got := envName("group-initial-rebalance-delay"); got != "BROKER_GROUP_INITIAL_REBALANCE_DELAY" {
		t.Errorf("envName = %s", got)
	}
	// Every key is a Config field and every field a key.
	// (Security's fields count one by one: it groups security.go's keys.)
	fields := reflect.TypeFor[Config]().NumField() - 2 + reflect.TypeFor[SecurityConfig]().NumField() // minus source and Security
	if fields != len(configKeys) {
		t.Errorf("Config has %d fields but the table %d keys", fields, len(configKeys))
	}
}

// TestExampleConfig checks that config.example.yaml is generated from the
// table, names every key, loads, validates, and holds the defaults.
func TestExampleConfig(t *testing.T) {
	want := renderExampleConfig()
	if *update {
		if err := os.WriteFile(examplePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("config.example.yaml is out of date with the key table; run go test ./cmd/broker -run TestExampleConfig -update")
	}
	for i := range configKeys {
		if !strings.Contains(string(got), "\n"+configKeys[i].name+": ") {
			t.Errorf("config.example.yaml lacks key %s", configKeys[i].name)
		}
	}
	c, err := loadConfig(examplePath, nil, nil)
	if err != nil {
		t.Fatalf("config.example.yaml does not load: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("config.example.yaml does not validate: %v", err)
	}
	if len(c.source) != len(configKeys) {
		t.Errorf("config.example.yaml sets %d keys, want all %d", len(c.source), len(configKeys))
	}
	c.source = nil
	if !reflect.DeepEqual(c, defaultConfig()) {
		t.Errorf("config.example.yaml does not hold the defaults:\n got %+v\nwant %+v", c, defaultConfig())
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "broker.yaml", `
data-dir: /from/file
node-id: 7
auto-create-topics: false
memtable-size: 32MiB
offsets-retention: 24h
rack: file-rack
`)
	tests := []struct {
		name    string
		args    []string
		environ []string
		check   func(t *testing.T, c *Config)
	}{
		{
			name: "defaults without sources",
			check: func(t *testing.T, c *Config) {
				if c.DataDir != "./data" || c.NodeID != 1 || !c.AutoCreateTopics {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name: "file over default",
			args: []string{"--config", file},
			check: func(t *testing.T, c *Config) {
				if c.DataDir != "/from/file" || c.NodeID != 7 || c.AutoCreateTopics || c.MemtableSize != 32<<20 ||
					c.OffsetsRetention != 24*time.Hour || c.Rack != "file-rack" {
					t.Errorf("got %+v", c)
				}
				if c.KafkaAddr != "localhost:9092" {
					t.Errorf("key absent from the file: got %q, want the default", c.KafkaAddr)
				}
				if got := c.source["node-id"]; !strings.HasSuffix(got, "broker.yaml line 3") {
					t.Errorf("source of node-id = %q", got)
				}
			},
		},
		{
			name:    "env over file",
			args:    []string{"--config", file},
			environ: []string{"BROKER_DATA_DIR=/from/env", "BROKER_AUTO_CREATE_TOPICS=true", "BROKER_RACK=", "PATH=/bin", "BROKER_CONFIG=ignored"},
			check: func(t *testing.T, c *Config) {
				if c.DataDir != "/from/env" || !c.AutoCreateTopics || c.Rack != "" || c.NodeID != 7 {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name:    "flag over env over file",
			args:    []string{"--config", file, "--data-dir", "/from/flag", "--auto-create-topics=false", "--memtable-size", "1GiB"},
			environ: []string{"BROKER_DATA_DIR=/from/env", "BROKER_AUTO_CREATE_TOPICS=true", "BROKER_MEMTABLE_SIZE=128MiB"},
			check: func(t *testing.T, c *Config) {
				if c.DataDir != "/from/flag" || c.AutoCreateTopics || c.MemtableSize != 1<<30 || c.NodeID != 7 {
					t.Errorf("got %+v", c)
				}
				if c.source["data-dir"] != "--data-dir" {
					t.Errorf("source of data-dir = %q", c.source["data-dir"])
				}
			},
		},
		{
			name:    "bool flag alone means true",
			args:    []string{"--config", file, "--auto-create-topics"},
			environ: []string{"BROKER_AUTO_CREATE_TOPICS=false"},
			check: func(t *testing.T, c *Config) {
				if !c.AutoCreateTopics {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name:    "every kind from env",
			environ: []string{"BROKER_NODE_ID=3", "BROKER_CACHE_SIZE=1GB", "BROKER_GROUP_INITIAL_REBALANCE_DELAY=250ms", "BROKER_MESSAGE_MAX_BYTES=2MiB", "BROKER_FSYNC=never", "BROKER_MAX_INFLIGHT_REQUESTS=8"},
			check: func(t *testing.T, c *Config) {
				if c.NodeID != 3 || c.CacheSize != 1e9 || c.GroupInitialRebalanceDelay != 250*time.Millisecond ||
					c.MessageMaxBytes != 2<<20 || c.Fsync != "never" || c.MaxInflightRequests != 8 {
					t.Errorf("got %+v", c)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadFromArgs(t, tt.args, tt.environ)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("does not validate: %v", err)
			}
			tt.check(t, c)
		})
	}
}

// TestBadConfigs: every way to get the configuration wrong is rejected
// with a sentence naming the key, where it came from, and what to use.
func TestBadConfigs(t *testing.T) {
	tests := []struct {
		name    string
		file    string // YAML content; "" means no --config
		environ []string
		args    []string
		want    []string // substrings of the error
	}{
		// File problems.
		{name: "unknown yaml key", file: "data-dir: x\ndatadir: y\n",
			want: []string{`unknown key "datadir" in config file`, "line 2", "did you mean data-dir?"}},
		{name: "snake case yaml key", file: "kafka_addr: localhost:9092\n",
			want: []string{`unknown key "kafka_addr"`, "did you mean kafka-addr?"}},
		{name: "unknown yaml key without suggestion", file: "zookeeper: localhost:2181\n",
			want: []string{`unknown key "zookeeper" in config file`, "line 1"}},
		{name: "nested yaml", file: "storage:\n  fsync: always\n",
			want: []string{`unknown key "storage"`}},
		{name: "list value", file: "kafka-addr: [a, b]\n",
			want: []string{"kafka-addr in config file", "line 1 must be a single value"}},
		{name: "null value", file: "node-id:\n",
			want: []string{"node-id in config file", "has no value"}},
		{name: "duplicate key", file: "node-id: 1\nrack: a\nnode-id: 2\n",
			want: []string{"key node-id appears twice", "lines 1 and 3"}},
		{name: "not yaml", file: "node-id: [1\n",
			want: []string{"is not valid YAML"}},
		{name: "not a mapping", file: "- node-id\n",
			want: []string{"must be a list of key: value lines"}},
		{name: "two documents", file: "node-id: 1\n---\nnode-id: 2\n",
			want: []string{"more than one YAML document"}},
		{name: "bad int in file", file: "node-id: one\n",
			want: []string{`node-id "one" (from `, "line 1) is not an integer"}},
		{name: "bad bool in file", file: "auto-create-topics: yes\n",
			want: []string{`auto-create-topics "yes"`, "is not true or false"}},
		{name: "bad value in file", file: "kafka-addr: bogus\n",
			want: []string{`kafka-addr "bogus" (from `, "line 1) is not host:port; use e.g. localhost:9092"}},
		{name: "missing file", args: []string{"--config", "/nonexistent/broker.yaml"},
			want: []string{"cannot read config file", "/nonexistent/broker.yaml"}},

		// Environment problems.
		{name: "unknown env", environ: []string{"BROKER_DATADIR=x"},
			want: []string{"unknown environment variable BROKER_DATADIR; did you mean BROKER_DATA_DIR?"}},
		{name: "unknown env without suggestion", environ: []string{"BROKER_ZOOKEEPER=x"},
			want: []string{"unknown environment variable BROKER_ZOOKEEPER"}},
		{name: "bad duration env", environ: []string{"BROKER_OFFSETS_RETENTION=7d"},
			want: []string{`offsets-retention "7d" (from environment variable BROKER_OFFSETS_RETENTION) is not a duration; use e.g.`}},
		{name: "duration without unit", environ: []string{"BROKER_GROUP_INITIAL_REBALANCE_DELAY=3000"},
			want: []string{`group-initial-rebalance-delay "3000"`, "is not a duration"}},
		{name: "bad size env", environ: []string{"BROKER_MEMTABLE_SIZE=64XB"},
			want: []string{`memtable-size "64XB" (from environment variable BROKER_MEMTABLE_SIZE) is not a byte size; use e.g. 64MiB`}},
		{name: "negative disk-free-min env", environ: []string{"BROKER_DISK_FREE_MIN=-1"},
			want: []string{`disk-free-min "-1" (from environment variable BROKER_DISK_FREE_MIN) is not a byte size`}},
		{name: "empty int env", environ: []string{"BROKER_NODE_ID="},
			want: []string{`node-id "" (from environment variable BROKER_NODE_ID) is not an integer`}},
		{name: "int32 overflow env", environ: []string{"BROKER_NODE_ID=3000000000"},
			want: []string{`node-id "3000000000"`, "is out of range"}},
		{name: "all problems reported", environ: []string{"BROKER_DATADIR=x", "BROKER_NODEID=1"},
			want: []string{"BROKER_DATADIR", "BROKER_NODEID; did you mean BROKER_NODE_ID?"}},

		// Flag problems.
		{name: "unknown flag", args: []string{"--datadir", "x"},
			want: []string{"unknown flag -datadir; did you mean --data-dir?"}},
		{name: "bad kafka-addr flag", args: []string{"--kafka-addr", "bogus"},
			want: []string{`kafka-addr "bogus" (from --kafka-addr) is not host:port; use e.g. localhost:9092`}},
		{name: "bad port", args: []string{"--kafka-addr", "localhost:99999"},
			want: []string{`kafka-addr "localhost:99999"`, "is not a number between 0 and 65535"}},
		{name: "named port", args: []string{"--http-addr", "localhost:http"},
			want: []string{`http-addr "localhost:http"`, `has port "http"`}},
		{name: "negative node id", args: []string{"--node-id", "-1"},
			want: []string{`node-id "-1" (from --node-id) is less than 0; use at least 0`}},
		{name: "too many partitions", args: []string{"--default-partitions", "10001"},
			want: []string{`default-partitions "10001" (from --default-partitions) is more than 10000; use a value from 1 to 10000`}},
		{name: "zero partitions", args: []string{"--default-partitions", "0"},
			want: []string{`default-partitions "0"`, "is less than 1"}},
		{name: "bad fsync", args: []string{"--fsync", "sometimes"},
			want: []string{`fsync "sometimes" (from --fsync) is not one of always or never`}},
		{name: "bad log level", args: []string{"--log-level", "verbose"},
			want: []string{`log-level "verbose"`, "is not one of debug, info, warn or error"}},
		{name: "bad log format", args: []string{"--log-format", "text"},
			want: []string{`log-format "text"`, "is not one of auto, json or console"}},
		{name: "empty data dir", args: []string{"--data-dir", ""},
			want: []string{`data-dir "" (from --data-dir) is empty`}},
		{name: "inflight out of range", args: []string{"--max-inflight-requests", "0"},
			want: []string{`max-inflight-requests "0"`, "is less than 1; use a value from 1 to 1024"}},
		{name: "memtable too large", args: []string{"--memtable-size", "4GiB"},
			want: []string{`memtable-size "4GiB"`, "is more than 4095MiB"}},
		{name: "max request too small", args: []string{"--max-request-bytes", "100"},
			want: []string{`max-request-bytes "100"`, "is less than 1KiB"}},
		{name: "rebalance delay too long", args: []string{"--group-initial-rebalance-delay", "1h"},
			want: []string{`group-initial-rebalance-delay "1h"`, "is longer than 10m"}},
		{name: "negative delay", args: []string{"--group-initial-rebalance-delay", "-1s"},
			want: []string{"is shorter than 0s"}},
		{name: "offsets retention too short", args: []string{"--offsets-retention", "1s"},
			want: []string{`offsets-retention "1s"`, "is shorter than 1m"}},
		{name: "advertised unspecified host", args: []string{"--advertised-addr", "0.0.0.0:9092"},
			want: []string{`advertised-addr "0.0.0.0:9092"`, "does not name a host clients can dial"}},
		{name: "advertised port zero", args: []string{"--advertised-addr", "broker:0"},
			want: []string{"has port 0, which clients cannot dial"}},
		{name: "rack with control character", args: []string{"--rack", "a\tb"},
			want: []string{`rack "a\tb"`, "contains a control character"}},

		// Rules between keys.
		{name: "message larger than request", args: []string{"--message-max-bytes", "2MiB", "--max-request-bytes", "1MiB"},
			want: []string{"message-max-bytes (2097152) is larger than max-request-bytes (1048576)"}},
		{name: "request memory below max request", args: []string{"--queued-max-request-bytes", "64MiB"},
			want: []string{"queued-max-request-bytes (67108864) (from --queued-max-request-bytes) is smaller than max-request-bytes (104857600)"}},
		{name: "consumer heartbeat not below session", args: []string{"--group-consumer-session-timeout", "5s"},
			want: []string{"group-consumer-heartbeat-interval (5s) is not below group-consumer-session-timeout (5s)"}},
		{name: "idle timeout too short", args: []string{"--connections-max-idle", "10ms"},
			want: []string{`connections-max-idle "10ms"`, "is shorter than 100ms"}},
		{name: "request read timeout too long", args: []string{"--request-read-timeout", "2h"},
			want: []string{`request-read-timeout "2h"`, "is longer than 1h"}},
		{name: "per-ip limit zero", args: []string{"--max-connections-per-ip", "0"},
			want: []string{`max-connections-per-ip "0"`, "is less than 1"}},
		{name: "per-ip override not ip:count", args: []string{"--max-connections-per-ip-overrides", "10.0.0.1:5,broker.local:7"},
			want: []string{`max-connections-per-ip-overrides "10.0.0.1:5,broker.local:7"`, `names "broker.local:7", which is not ip:count`}},
		{name: "quota window too small", args: []string{"--quota-window-num", "1"},
			want: []string{`quota-window-num "1"`, "is less than 2"}},
		{name: "http body budget below the largest body", args: []string{"--http-max-inflight-body-bytes", "1MiB"},
			want: []string{"http-max-inflight-body-bytes (1048576) (from --http-max-inflight-body-bytes) is smaller than the largest HTTP request body (17MiB"}},
		{name: "http write timeout too short", args: []string{"--http-write-timeout", "1ms"},
			want: []string{`http-write-timeout "1ms"`, "is shorter than 100ms"}},
		{name: "http streams zero", args: []string{"--http-max-streams", "0"},
			want: []string{`http-max-streams "0"`, "is less than 1"}},
		{name: "http on kafka port", args: []string{"--http-addr", "localhost:9092"},
			want: []string{`http-addr "localhost:9092" (from --http-addr) is the address of the Kafka listener`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeFile(t, "broker.yaml", tt.file)}, args...)
			}
			c, err := loadFromArgs(t, args, tt.environ)
			if err == nil {
				err = c.Validate()
			}
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestGoodEdgeConfigs: values at the edges of their ranges are accepted.
func TestGoodEdgeConfigs(t *testing.T) {
	for _, args := range [][]string{
		{"--kafka-addr", ":9092", "--advertised-addr", "broker1.example.com:9092"},
		{"--kafka-addr", ":9092"},
		{"--kafka-addr", "0.0.0.0:9092"},
		{"--kafka-addr", "[::1]:9092", "--http-addr", "[::1]:8080"},
		{"--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"--http-addr", ""},
		{"--node-id", "0", "--default-partitions", "10000", "--max-inflight-requests", "1024"},
		{"--memtable-size", "1MiB", "--cache-size", "0"},
		{"--memtable-size", "4095MiB"},
		{"--group-initial-rebalance-delay", "0s", "--offsets-retention", "1m"},
		{"--message-max-bytes", "100MiB"},
		{"--disk-free-min", "0"},
		{"--disk-free-min", "8388607TiB"},
	} {
		c, err := loadFromArgs(t, args, nil)
		if err == nil {
			err = c.Validate()
		}
		if err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1048576", 1 << 20, true},
		{"64MiB", 64 << 20, true},
		{"64mib", 64 << 20, true},
		{"64 MiB", 64 << 20, true},
		{"1GB", 1e9, true},
		{"1KB", 1000, true},
		{"1KiB", 1024, true},
		{"2TiB", 2 << 40, true},
		{"10B", 10, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5GiB", 0, false},
		{"64M", 0, false},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"9000000TiB", 0, false},
	} {
		got, err := parseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for _, n := range []int64{0, 1, 1023, 1024, 1048588, 64 << 20, 1e9, 3 << 40} {
		back, err := parseByteSize(formatByteSize(n, 10))
		if err != nil || back != n {
			t.Errorf("formatByteSize(%d) = %q does not parse back", n, formatByteSize(n, 10))
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 3 * time.Second: "3s", 168 * time.Hour: "168h", 90 * time.Minute: "1h30m",
		90 * time.Second: "1m30s", 10 * time.Minute: "10m", 250 * time.Millisecond: "250ms",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestConfigEnvVar: BROKER_CONFIG names the file and is not an unknown
// variable; --config wins over it.
func TestConfigEnvVar(t *testing.T) {
	fromEnv := writeFile(t, "env.yaml", "node-id: 5\n")
	fromFlag := writeFile(t, "flag.yaml", "node-id: 6\n")
	t.Setenv(configEnv, fromEnv)
	environ := []string{configEnv + "=" + fromEnv}
	c, err := loadFromArgs(t, nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 5 {
		t.Errorf("node-id = %d, want 5 from %s", c.NodeID, configEnv)
	}
	c, err = loadFromArgs(t, []string{"--config", fromFlag}, environ)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != 6 {
		t.Errorf("node-id = %d, want 6 from --config", c.NodeID)
	}
}

func TestEmptyConfigFiles(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "~\n", "---\n"} {
		c, err := loadConfig(writeFile(t, "empty.yaml", content), nil, nil)
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		c.source = nil
		if !reflect.DeepEqual(c, defaultConfig()) {
			t.Errorf("%q: not the defaults", content)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	names := []string{"serve", "version", "topics"}
	for in, want := range map[string]string{
		"sevre":   "; did you mean serve?",
		"serv":    "; did you mean serve?",
		"verison": "; did you mean version?",
		"Topics":  "; did you mean topics?",
		"xyz":     "",
		"":        "",
	} {
		if got := didYouMean(in, names); got != want {
			t.Errorf("didYouMean(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRealMain runs the command line end to end, short of starting the
// broker: exit codes and what reaches stdout and stderr.
func TestRealMain(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "version", args: []string{"version"}, wantCode: 0, wantStdout: "storage format: 1\n"},
		{name: "help", args: []string{}, wantCode: 0, wantStdout: "serve"},
		{name: "bad kafka-addr", args: []string{"serve", "--data-dir", "/tmp/x", "--kafka-addr", "bogus"}, wantCode: 2,
			wantStderr: "broker: kafka-addr \"bogus\" (from --kafka-addr) is not host:port; use e.g. localhost:9092\n"},
		{name: "unknown flag", args: []string{"serve", "--datadir", "x"}, wantCode: 2,
			wantStderr: "broker serve: unknown flag -datadir; did you mean --data-dir?\n"},
		{name: "unknown env", args: []string{"serve"}, env: map[string]string{"BROKER_DATADIR": "x"}, wantCode: 2,
			wantStderr: "broker: unknown environment variable BROKER_DATADIR; did you mean BROKER_DATA_DIR?\n"},
		{name: "two problems two lines", args: []string{"serve", "--fsync", "no", "--node-id", "-2"}, wantCode: 2,
			wantStderr: "broker: node-id \"-2\" (from --node-id) is less than 0; use at least 0\nbroker: fsync \"no\" (from --fsync) is not one of always or never\n"},
		{name: "argument to serve", args: []string{"serve", "now"}, wantCode: 2,
			wantStderr: "broker: serve takes no arguments, got \"now\""},
		{name: "unknown command", args: []string{"sevre"}, wantCode: 2,
			wantStderr: "broker: unknown command \"sevre\"; did you mean serve?\n"},
		{name: "unknown global flag", args: []string{"--verbose"}, wantCode: 2,
			wantStderr: "broker: unknown flag -verbose; run 'broker --help' for the flags\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := realMain(append([]string{"broker"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestExitCodeOneLine(t *testing.T) {
	var stderr bytes.Buffer
	code := exitCode(&exitError{code: exitFailure, err: errorString("pebblestore: a\nb")}, &stderr)
	if code != 1 || stderr.String() != "broker: pebblestore: a; b\n" {
		t.Errorf("exitCode = %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := exitCode(&exitError{code: exitFailure, err: errorString("broker: x")}, &stderr); code != 1 || stderr.String() != "broker: x\n" {
		t.Errorf("exitCode = %d, stderr %q", code, stderr.String())
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestWatchSignals(t *testing.T) {
	signals := make(chan os.Signal, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan int, 1)
	stop := watchSignals(signals, cancel, zerolog.Nop(), func(code int) { exited <- code })

	signals <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("first signal did not cancel the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("first signal exited with %d", code)
	default:
	}
	signals <- os.Interrupt
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("second signal exited with %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second signal did not exit")
	}
	stop()
}

func TestWatchSignalsStop(t *testing.T) {
	signals := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := watchSignals(signals, cancel, zerolog.Nop(), func(int) { t.Error("exit called") })
	stop() // returns only once the watcher is gone
	signals <- os.Interrupt
	if ctx.Err() != nil {
		t.Error("a signal after stop cancelled the context")
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	sub := log.With().Str("component", "test").Logger()
	sub.Info().Msg("shown")
	var entry map[string]any
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("not one JSON entry: %q: %v", buf.String(), err)
	}
	if entry["message"] != "shown" || entry["component"] != "test" || entry["level"] != "info" || entry["time"] == nil {
		t.Errorf("entry = %v", entry)
	}

	buf.Reset()
	log, err = newLogger("debug", "console", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Str("k", "v").Msg("hello")
	if out := buf.String(); !strings.Contains(out, "DBG") || !strings.Contains(out, "hello") || strings.HasPrefix(out, "{") {
		t.Errorf("console output %q", out)
	}

	buf.Reset()
	log, err = newLogger("warn", "auto", &buf) // a buffer is not a terminal: JSON
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Msg("w")
	if !strings.HasPrefix(buf.String(), "{") {
		t.Errorf("auto format on a non-terminal wrote %q, want JSON", buf.String())
	}

	if _, err := newLogger("verbose", "json", &buf); err == nil {
		t.Error("accepted log level verbose")
	}
	if _, err := newLogger("info", "text", &buf); err == nil {
		t.Error("accepted log format text")
	}
}

// TestClientEnvVarsAccepted pins that the client commands' own variable
// (BROKER_BOOTSTRAP_SERVER, read by `broker topics` and `broker groups`) does
// not make `broker serve` refuse to start as an unknown BROKER_* variable.
func TestClientEnvVarsAccepted(t *testing.T) {
	c, err := loadFromArgs(t, nil, []string{"BROKER_BOOTSTRAP_SERVER=localhost:9092"})
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Fatalf("BROKER_BOOTSTRAP_SERVER in the environment: %v", err)
	}
}

// TestRequestMemoryBudget: queued-max-request-bytes 0 derives the budget
// from memory (1/8, at most 1GiB, at least max-request-bytes); a set value
// is used as is.
func TestRequestMemoryBudget(t *testing.T) {
	tests := []struct {
		name       string
		configured int64
		maxRequest int32
		memory     int64
		want       int64
	}{
		{"large machine: capped at 1GiB", 0, 100 << 20, 64 << 30, 1 << 30},
		{"4GiB container: 1/8", 0, 100 << 20, 4 << 30, 512 << 20},
		{"512MiB container: floor at max-request-bytes", 0, 100 << 20, 512 << 20, 100 << 20},
		{"memory unknown: 1GiB", 0, 100 << 20, 0, 1 << 30},
		{"configured", 200 << 20, 100 << 20, 64 << 30, 200 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.QueuedMaxRequestBytes, cfg.MaxRequestBytes = tt.configured, tt.maxRequest
			if got, _ := requestMemoryBudget(cfg, tt.memory); got != tt.want {
				t.Errorf("budget %d, want %d", got, tt.want)
			}
		})
	}
	if m := systemMemory(); m <= 0 {
		t.Logf("note: systemMemory() = %d on this machine", m)
	}
}

// TestGoMemoryLimit: memory-limit 0 derives Go's soft memory limit from
// memory (90%), unless GOMEMLIMIT is set (Go's setting stands) or memory is
// unknown (no limit); a set value is used as is, GOMEMLIMIT or not.
func TestGoMemoryLimit(t *testing.T) {
	tests := []struct {
		name       string
		configured int64
		memory     int64
		env        string
		want       int64
	}{
		{"derived: 90% of memory", 0, 10 << 30, "", 9 << 30},
		{"GOMEMLIMIT set: left to Go", 0, 10 << 30, "2GiB", 0},
		{"memory unknown: no limit", 0, 0, "", 0},
		{"configured", 3 << 30, 10 << 30, "", 3 << 30},
		{"configured beats GOMEMLIMIT", 3 << 30, 10 << 30, "off", 3 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.MemoryLimit = tt.configured
			if got, _ := goMemoryLimit(cfg, tt.memory, tt.env); got != tt.want {
				t.Errorf("limit %d, want %d", got, tt.want)
			}
		})
	}
}

// TestHTTPBodyBudget: http-max-inflight-body-bytes 0 derives the budget
// from memory (1/16, from 32MiB to 256MiB); a set value is used as is.
func TestGCHeadroom(t *testing.T) {
	for _, tt := range []struct {
		memory int64
		want   uint64
	}{
		{64 << 30, 128 << 20}, // large machine: capped
		{1 << 30, 64 << 20},   // 1GiB container: 1/16
		{0, 128 << 20},        // memory unknown
	} {
		if got := gcHeadroom(tt.memory); got != tt.want {
			t.Errorf("gcHeadroom(%d) = %d, want %d", tt.memory, got, tt.want)
		}
	}
}

func TestHTTPBodyBudget(t *testing.T) {
	tests := []struct {
		name       string
		configured int64
		memory     int64
		want       int64
	}{
		{"large machine: capped at 256MiB", 0, 64 << 30, 256 << 20},
		{"1GiB container: 1/16", 0, 1 << 30, 64 << 20},
		{"256MiB container: floor at 32MiB", 0, 256 << 20, 32 << 20},
		{"memory unknown: 256MiB", 0, 0, 256 << 20},
		{"configured", 100 << 20, 64 << 30, 100 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.HTTPMaxInflightBodyBytes = tt.configured
			if got, _ := httpBodyBudget(cfg, tt.memory); got != tt.want {
				t.Errorf("budget %d, want %d", got, tt.want)
			}
		})
	}
}
