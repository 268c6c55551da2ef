// Command kfake-server runs a one-broker kfake cluster as a reference Kafka
// broker for bench/run.sh. It listens on 127.0.0.1 only (kfake's listener
// always binds loopback), persists to --data-dir, and by default fsyncs every
// produced batch (kfake.SyncWrites) so that acks=all means "on disk", as it
// does for our broker.
//
// It is its own Go module so that the main module's `go test ./...` never
// builds it and the main go.mod does not carry kfake.
//
// Usage:
//
//	kfake-server --port 9092 --data-dir /tmp/kfake-data [--sync=true] [--log-level warn]
//
// It prints the listen address on stdout once it accepts connections and runs
// until SIGINT or SIGTERM, then closes the cluster (flushing its data dir).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	var (
		port              int
		dataDir           string
		syncWrites        bool
		logLevelName      string
		defaultPartitions int
		autoCreateTopics  bool
		seedTopic         string
	)
	flag.IntVar(&port, "port", 9092, "TCP port to listen on (127.0.0.1 only); 0 picks a free one")
	flag.StringVar(&dataDir, "data-dir", "", "directory for on-disk persistence (required)")
	flag.BoolVar(&syncWrites, "sync", true, "fsync every produced batch (kfake.SyncWrites)")
	flag.StringVar(&logLevelName, "log-level", "warn", "none, error, warn, info or debug")
	flag.IntVar(&defaultPartitions, "default-partitions", 1, "partitions of auto-created topics")
	flag.BoolVar(&autoCreateTopics, "auto-create-topics", false, "allow auto topic creation from Metadata")
	flag.StringVar(&seedTopic, "seed-topic", "", "optional topic to create at start, with --default-partitions")
	flag.Parse()

	if dataDir == "" {
		fmt.Fprintln(os.Stderr, "kfake-server: --data-dir is required")
		os.Exit(2)
	}
	logLevel, ok := map[string]kfake.LogLevel{
		"none":  kfake.LogLevelNone,
		"error": kfake.LogLevelError,
		"warn":  kfake.LogLevelWarn,
		"info":  kfake.LogLevelInfo,
		"debug": kfake.LogLevelDebug,
	}[strings.ToLower(logLevelName)]
	if !ok {
		fmt.Fprintf(os.Stderr, "kfake-server: unknown --log-level %q\n", logLevelName)
		os.Exit(2)
	}

	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DataDir(dataDir),
		kfake.DefaultNumPartitions(defaultPartitions),
		kfake.WithLogger(kfake.BasicLogger(os.Stderr, logLevel)),
	}
	if syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	if autoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if seedTopic != "" {
		opts = append(opts, kfake.SeedTopics(int32(defaultPartitions), seedTopic))
	}

	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake-server: start: %v\n", err)
		os.Exit(1)
	}
	for _, addr := range cluster.ListenAddrs() {
		fmt.Println(addr)
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	<-signals
	fmt.Fprintln(os.Stderr, "kfake-server: shutting down (signal again to force)")
	done := make(chan struct{})
	go func() {
		cluster.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-signals:
		fmt.Fprintln(os.Stderr, "kfake-server: forced exit")
		os.Exit(1)
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "kfake-server: close timed out after 30s")
		os.Exit(1)
	}
}
