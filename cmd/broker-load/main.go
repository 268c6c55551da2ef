// Command broker-load generates Kafka load against a broker and measures it.
// It speaks the Kafka protocol through franz-go (kgo, kadm), so it can drive
// our broker and any reference broker (bench/kfake-server, Apache Kafka) alike.
//
// Modes:
//
//	broker-load produce [flags]   N producer clients, throughput and produce latency
//	broker-load consume [flags]   read a topic from its start, verify, throughput
//	                              (--share-group: as share-group members, share.go)
//	broker-load e2e [flags]       paced produce + consume, end-to-end latency
//	broker-load report FILE...    median table from --json result lines
//	broker-load queue [flags]     native queue (or Redis) send, then receive+ack
//	broker-load torture [flags]   start the broker binary and run kill -9
//	                              loops, hostile frames and HTTP, a disk-full
//	                              cycle against it (torture.go; TESTING.md)
//
// Every mode prints one result line: human readable, or one JSON object with
// --json. A run that fails its checks (produce errors, consume read less than
// expected, e2e lost records) prints its result and exits with status 1.
//
// Units: MB is 2^20 bytes and GB 2^30 bytes; bytes count record keys plus
// values, not protocol overhead. Latencies are in milliseconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: broker-load MODE [flags]

MODE is one of:
  produce   N producers x in-flight requests; records/s, MB/s, produce latency
  consume   N consumers read --topic from its start (direct assignment, no group;
            or --share-group G: members of a KIP-932 share group, accepting each record)
  e2e       produce at --rate records/s while consuming; end-to-end latency
  report    read --json result lines from files and print a median table
  queue     native queue send then receive+ack (ours over HTTP, or Redis)
  torture   start the broker binary and run kill -9 loops, hostile frames,
            hostile HTTP and a disk-full cycle against it; prints a report

Run "broker-load MODE -h" for the flags of a mode.
`

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	mode, args := os.Args[1], os.Args[2:]
	if mode == "queue" {
		os.Exit(runQueueMode(args))
	}
	if mode == "torture" {
		os.Exit(runTortureMode(args))
	}
	if mode == "report" {
		if err := runReport(os.Stdout, args); err != nil {
			fmt.Fprintf(os.Stderr, "broker-load: %v\n", err)
			os.Exit(1)
		}
		return
	}

	cfg, err := parseFlags(mode, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "broker-load: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A hard bound on the whole run: nothing we start may outlive it.
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	result, err := run(ctx, cfg)
	if result != nil {
		printResult(os.Stdout, cfg, result)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "broker-load %s: %v\n", cfg.Mode, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *Config) (*Result, error) {
	start := time.Now()
	if err := prepareTopic(ctx, cfg); err != nil {
		return nil, err
	}
	created := time.Since(start)
	result, err := runMode(ctx, cfg)
	if result != nil && cfg.CreateTopic {
		result.CreateMs = round(float64(created)/float64(time.Millisecond), 1)
	}
	return result, err
}

func runMode(ctx context.Context, cfg *Config) (*Result, error) {
	switch cfg.Mode {
	case "produce":
		return runProduce(ctx, cfg)
	case "consume":
		if cfg.ShareGroup != "" {
			return runShareConsume(ctx, cfg)
		}
		return runConsume(ctx, cfg)
	case "e2e":
		return runEndToEnd(ctx, cfg)
	}
	return nil, fmt.Errorf("unknown mode %q", cfg.Mode) // Validate rejects this first
}

// Config is one run of the tool. Defaults are in parseFlags.
type Config struct {
	Mode        string
	Brokers     []string
	Topic       string
	CreateTopic bool
	Partitions  int

	// Duration bounds the produce phase of produce and e2e; Records bounds
	// the record count (total over producers). When both are set the first
	// reached wins; consume uses Records as the count it expects.
	Duration   time.Duration
	Records    int64
	RecordSize int
	// RecordSizeSet is whether --record-size was given: consume then checks
	// every value has that length.
	RecordSizeSet bool

	Producers          int
	Consumers          int
	InFlight           int
	Acks               string
	Idempotent         bool
	TransactionRecords int64
	Compression        string
	Linger             time.Duration
	BatchMaxBytes      int
	MaxBufferedRecords int
	Rate               int

	IdleTimeout time.Duration
	Timeout     time.Duration
	BrokerPID   int
	JSON        bool
	Target      string
	Case        string
	// ShareGroup, in consume mode, consumes as members of this KIP-932
	// share group (share.go) instead of by direct assignment.
	ShareGroup string

	// Security of the connections (security.go): SASL_SSL and the like.
	SecurityProtocol string
	SASLMechanism    string
	SASLUser         string
	SASLPassword     string
	TLSCAFile        string
}

func parseFlags(mode string, args []string) (*Config, error) {
	cfg := &Config{Mode: mode}
	fs := flag.NewFlagSet("broker-load "+mode, flag.ContinueOnError)
	var brokers string
	fs.StringVar(&brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&cfg.Topic, "topic", "broker-load", "topic to use")
	fs.BoolVar(&cfg.CreateTopic, "create-topic", false, "create --topic with --partitions (replication 1) if it is missing")
	fs.IntVar(&cfg.Partitions, "partitions", 1, "partitions for --create-topic")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to produce (produce, e2e); 0 means until --records")
	fs.Int64Var(&cfg.Records, "records", 0, "records to produce (total), or to read in consume mode (0: up to the end offsets seen at start)")
	fs.IntVar(&cfg.RecordSize, "record-size", 1024, "value bytes per record (e2e needs at least 16)")
	fs.IntVar(&cfg.Producers, "producers", 1, "producer clients (produce mode; e2e paces one producer)")
	fs.IntVar(&cfg.Consumers, "consumers", 1, "consumer clients; partitions are split between them")
	fs.IntVar(&cfg.InFlight, "inflight", 1, "produce requests in flight per broker when not idempotent (kgo caps idempotent producers at 5)")
	fs.StringVar(&cfg.Acks, "acks", "all", "all, leader or none")
	fs.BoolVar(&cfg.Idempotent, "idempotent", true, "idempotent producer (needs --acks all)")
	fs.Int64Var(&cfg.TransactionRecords, "transaction-records", 0, "produce mode: commit a transaction every N records per producer (0: no transactions; needs --idempotent)")
	fs.StringVar(&cfg.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&cfg.Linger, "linger", 10*time.Millisecond, "producer linger per partition (kgo default 10ms)")
	fs.IntVar(&cfg.BatchMaxBytes, "batch-max-bytes", 1000012, "max bytes of one record batch (kgo default 1000012)")
	fs.IntVar(&cfg.MaxBufferedRecords, "max-buffered-records", 10000, "records a producer buffers before Produce blocks; bounds produce latency at saturation")
	fs.IntVar(&cfg.Rate, "rate", 5000, "records per second to produce in e2e mode")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 10*time.Second, "consume/e2e: stop after this long without a new record")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "hard limit for the whole run (0: --duration + 2m)")
	fs.IntVar(&cfg.BrokerPID, "broker-pid", 0, "if set, report the broker's CPU seconds (utime+stime from /proc/PID/stat) per GB moved, and its RSS at the end and at its peak over the phase (VmRSS, VmHWM)")
	fs.BoolVar(&cfg.JSON, "json", false, "print results as one JSON object per line")
	fs.StringVar(&cfg.Target, "target", "", "label of the broker under test, copied into results (e.g. ours, kfake)")
	fs.StringVar(&cfg.ShareGroup, "share-group", "", "consume mode: consume as --consumers members of this KIP-932 share group, accepting every record (sets its share.auto.offset.reset=earliest); records/s count up to the last acknowledgement flushed")
	fs.StringVar(&cfg.Case, "case", "", "label of the benchmark case, copied into results (e.g. produce-p8)")
	fs.StringVar(&cfg.SecurityProtocol, "security-protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
	fs.StringVar(&cfg.SASLMechanism, "sasl-mechanism", "SCRAM-SHA-512", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&cfg.SASLUser, "sasl-user", "", "SASL user")
	fs.StringVar(&cfg.SASLPassword, "sasl-password", "", "SASL password (a benchmark tool: for test users only)")
	fs.StringVar(&cfg.TLSCAFile, "tls-ca-file", "", "PEM CA of the broker's certificate")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "record-size" {
			cfg.RecordSizeSet = true
		}
	})
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Brokers = append(cfg.Brokers, b)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Duration + 2*time.Minute
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := securityOptions(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate reports the first problem with cfg as a plain sentence.
func (cfg *Config) Validate() error {
	switch {
	case cfg.Mode != "produce" && cfg.Mode != "consume" && cfg.Mode != "e2e":
		return fmt.Errorf("mode %q is not one of produce, consume, e2e, report", cfg.Mode)
	case len(cfg.Brokers) == 0:
		return errors.New("--brokers needs at least one host:port")
	case cfg.Topic == "":
		return errors.New("--topic must not be empty")
	case cfg.Partitions < 1 || cfg.Partitions > 10000:
		return fmt.Errorf("--partitions is %d; it must be between 1 and 10000", cfg.Partitions)
	case cfg.Duration < 0 || cfg.Records < 0:
		return errors.New("--duration and --records must not be negative")
	case cfg.Mode != "consume" && cfg.Duration == 0 && cfg.Records == 0:
		return errors.New("set --duration or --records, or the run would never end")
	case cfg.RecordSize < 0 || cfg.RecordSize > 64<<20:
		return fmt.Errorf("--record-size is %d; it must be between 0 and 64 MiB", cfg.RecordSize)
	case cfg.Mode == "e2e" && cfg.RecordSize < e2eHeaderSize:
		return fmt.Errorf("e2e records carry a %d-byte header, so --record-size must be at least %d", e2eHeaderSize, e2eHeaderSize)
	case cfg.Producers < 1 || cfg.Producers > 1000:
		return fmt.Errorf("--producers is %d; it must be between 1 and 1000", cfg.Producers)
	case cfg.Consumers < 1 || cfg.Consumers > 1000:
		return fmt.Errorf("--consumers is %d; it must be between 1 and 1000", cfg.Consumers)
	case cfg.InFlight < 1 || cfg.InFlight > 1000:
		return fmt.Errorf("--inflight is %d; it must be between 1 and 1000", cfg.InFlight)
	case cfg.Acks != "all" && cfg.Acks != "leader" && cfg.Acks != "none":
		return fmt.Errorf("--acks is %q; it must be all, leader or none", cfg.Acks)
	case cfg.TransactionRecords < 0:
		return errors.New("--transaction-records must be 0 or more")
	case cfg.TransactionRecords > 0 && !cfg.Idempotent:
		return errors.New("--transaction-records needs an idempotent producer; drop --idempotent=false")
	case cfg.Idempotent && cfg.Acks != "all":
		return errors.New("an idempotent producer needs --acks all; pass --idempotent=false for other acks")
	case !validCompression(cfg.Compression):
		return fmt.Errorf("--compression is %q; it must be none, gzip, snappy, lz4 or zstd", cfg.Compression)
	case cfg.Linger < 0:
		return errors.New("--linger must not be negative")
	case cfg.BatchMaxBytes < 1024:
		return fmt.Errorf("--batch-max-bytes is %d; it must be at least 1024", cfg.BatchMaxBytes)
	case cfg.MaxBufferedRecords < 1:
		return errors.New("--max-buffered-records must be at least 1")
	case cfg.Mode == "e2e" && (cfg.Rate < 1 || cfg.Rate > 10_000_000):
		return fmt.Errorf("--rate is %d; it must be between 1 and 10000000 records per second", cfg.Rate)
	case cfg.IdleTimeout <= 0:
		return errors.New("--idle-timeout must be positive")
	case cfg.Timeout <= 0:
		return errors.New("--timeout must be positive")
	case cfg.ShareGroup != "" && cfg.Mode != "consume":
		return errors.New("--share-group is for consume mode")
	case cfg.BrokerPID < 0:
		return errors.New("--broker-pid must not be negative")
	}
	return nil
}
