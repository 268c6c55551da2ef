#!/usr/bin/env bash
# bench/run.sh — Kafka produce/consume benchmark: our broker vs kfake and
# Apache Kafka.
#
# Builds cmd/broker, bench/kfake-server and cmd/broker-load into a temp dir,
# then for each run (default 3) and each target (ours, kfake; kafka and
# kafka-flush are Apache Kafka 4.2 from compat-tests/reference, with its
# defaults (no fsync) and with flush.messages=1 (an fsync per append, our
# durability), once its jars are fetched, see README): starts the
# target on a free 127.0.0.1 port with a fresh data dir, waits until it
# answers, runs the suite, stops it and deletes its data. Prints a markdown
# table of medians and keeps raw JSON lines in bench/results/ (gitignored).
#
# Suite, for 1 and 8 partitions, 1 KiB records, acks=all, idempotent, no
# compression:
#   produce  1 producer, PRODUCE_RECORDS records or PRODUCE_MAX_DURATION,
#            whichever first (throughput, produce latency, broker CPU/GB)
#   consume  read back everything produced, verified (throughput, CPU/GB)
#   e2e      E2E_RATE records/s for E2E_DURATION with linger 0 (latency)
#
# Usage: bench/run.sh [-n RUNS] [-t "ours kfake kafka kafka-flush"] [-g perf-test]
# Environment overrides: RUNS TARGETS PARTITIONS PRODUCE_RECORDS
#   PRODUCE_MAX_DURATION E2E_DURATION E2E_RATE RESULTS_DIR LOADGEN
#   PERF_TEST_PROPS
#
# -g perf-test (LOADGEN=perf-test): the produce step only, with Apache
# Kafka's own load generator instead of broker-load: kafka-producer-perf-test
# (org.apache.kafka.tools.ProducerPerformance, the Java client, from
# compat-tests/reference/target/lib), PRODUCE_RECORDS records of 1 KiB,
# unthrottled, producer properties PERF_TEST_PROPS (default: acks=all,
# idempotent, no compression, linger.ms=10, batch.size=1000000, as
# broker-load's). Its summary line becomes a result line (mode produce, case
# perf-test-pP-runN) with the broker's CPU over the run.
# All traffic stays on 127.0.0.1. Each step is bounded by --timeout.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
TARGETS=${TARGETS:-"ours kfake"}
PARTITIONS=${PARTITIONS:-"1 8"}
PRODUCE_RECORDS=${PRODUCE_RECORDS:-2000000}
PRODUCE_MAX_DURATION=${PRODUCE_MAX_DURATION:-20s}
E2E_DURATION=${E2E_DURATION:-15s}
E2E_RATE=${E2E_RATE:-5000}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}

LOADGEN=${LOADGEN:-broker-load}
PERF_TEST_PROPS=${PERF_TEST_PROPS:-"acks=all enable.idempotence=true compression.type=none linger.ms=10 batch.size=1000000"}

while getopts "n:t:g:h" opt; do
	case $opt in
	n) RUNS=$OPTARG ;;
	t) TARGETS=$OPTARG ;;
	g) LOADGEN=$OPTARG ;;
	*) sed -n '2,32p' "$0"; exit 2 ;;
	esac
done

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-bench.XXXXXX")
TARGET_PID=""
cleanup() {
	if [[ -n $TARGET_PID ]] && kill -0 "$TARGET_PID" 2>/dev/null; then
		kill -KILL "$TARGET_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build ------------------------------------------------------------------
log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/broker-load" ./cmd/broker-load)
(cd "$ROOT/bench/kfake-server" && go build -o "$WORK/kfake-server" .)
BUILT_TARGETS=""
for target in $TARGETS; do
	case $target in
	ours)
		if (cd "$ROOT" && go build -o "$WORK/broker" ./cmd/broker); then
			BUILT_TARGETS+=" ours"
		else
			log "WARNING: cmd/broker does not build; skipping target ours"
		fi
		;;
	kfake) BUILT_TARGETS+=" kfake" ;;
	kafka | kafka-flush)
		if ls "$ROOT"/compat-tests/reference/target/lib/kafka_2.13-*.jar >/dev/null 2>&1; then
			BUILT_TARGETS+=" $target"
		else
			log "WARNING: Apache Kafka's jars are missing; skipping target $target (mvn -B -q -f compat-tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib)"
		fi
		;;
	*) log "unknown target $target (want ours, kfake, kafka or kafka-flush)"; exit 2 ;;
	esac
done

LIB=$ROOT/compat-tests/reference/target/lib
case $LOADGEN in
broker-load) ;;
perf-test)
	if ! ls "$LIB"/kafka-tools-*.jar >/dev/null 2>&1; then
		log "kafka-producer-perf-test is missing: mvn -B -q -f compat-tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib"
		exit 2
	fi
	;;
*) log "unknown load generator $LOADGEN (want broker-load or perf-test)"; exit 2 ;;
esac

mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=$RESULTS_DIR/$STAMP.jsonl
TABLE=$RESULTS_DIR/$STAMP.md
: >"$RESULTS"

# --- target control -----------------------------------------------------------
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
	local port
	for _ in $(seq 1 100); do
		port=$((20000 + RANDOM % 40000))
		if ! port_in_use "$port"; then
			echo "$port"
			return
		fi
	done
	log "no free port found"
	return 1
}

# start_target TARGET DATA_DIR PORT LOG: starts it in the background and sets
# TARGET_PID to the broker process itself (so /proc/PID/stat is its CPU).
start_target() {
	local target=$1 data=$2 port=$3 logfile=$4
	case $target in
	ours)
		local http_port
		http_port=$(free_port)
		"$WORK/broker" serve --data-dir "$data" --kafka-addr "127.0.0.1:$port" \
			--http-addr "127.0.0.1:$http_port" --log-level warn >"$logfile" 2>&1 &
		;;
	kfake)
		"$WORK/kfake-server" --port "$port" --data-dir "$data" --sync=true \
			--log-level warn >"$logfile" 2>&1 &
		;;
	kafka | kafka-flush)
		# run-kafka.sh formats the directory, then execs the JVM: the PID is
		# the broker's. KRaft's controller listener takes a second port.
		local extra=()
		[[ $target == kafka-flush ]] && extra=(flush.messages=1)
		KAFKA_REFERENCE_HEAP=-Xmx2g "$ROOT/compat-tests/reference/run-kafka.sh" "$data" "$port" "$(free_port)" \
			"${extra[@]}" >"$logfile" 2>&1 &
		;;
	esac
	TARGET_PID=$!
}

# wait_ready PORT: until the Kafka port accepts connections and, if kcat is
# installed, answers a Metadata request; at most 90 s (a JVM broker takes
# 10-20 s on two cores).
wait_ready() {
	local port=$1
	for _ in $(seq 1 900); do
		if ! kill -0 "$TARGET_PID" 2>/dev/null; then
			return 1
		fi
		if port_in_use "$port"; then
			if ! command -v kcat >/dev/null || kcat -L -b "127.0.0.1:$port" -m 2 >/dev/null 2>&1; then
				return 0
			fi
		fi
		sleep 0.1
	done
	return 1
}

stop_target() {
	[[ -n $TARGET_PID ]] || return 0
	kill -TERM "$TARGET_PID" 2>/dev/null || true
	for _ in $(seq 1 300); do
		kill -0 "$TARGET_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$TARGET_PID" 2>/dev/null; then
		log "target pid $TARGET_PID did not stop in 30 s; killing it"
		kill -KILL "$TARGET_PID" 2>/dev/null || true
	fi
	wait "$TARGET_PID" 2>/dev/null || true
	TARGET_PID=""
}

# load MODE ARGS...: one load-tool step; its JSON line goes to $RESULTS. A
# failed step is logged and the suite goes on (its line says ok:false).
load() {
	local mode=$1
	shift
	if ! "$WORK/broker-load" "$mode" --json "$@" >>"$RESULTS"; then
		log "WARNING: $mode $* failed"
	fi
	tail -n 1 "$RESULTS" >&2
}

# cpu_ticks: utime+stime of the target so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$TARGET_PID/stat"; }

# perf_test TARGET RUN PORT P: one kafka-producer-perf-test run into a new
# topic of P partitions (created by broker-load with one record), written
# to $RESULTS as a produce result line.
perf_test() {
	local target=$1 run=$2 port=$3 p=$4 topic=bench-pt-p$4 out summary t0 t1
	if ! "$WORK/broker-load" produce --brokers "127.0.0.1:$port" --topic "$topic" --create-topic \
		--partitions "$p" --records 1 --duration 0 --timeout 1m >/dev/null; then
		log "WARNING: cannot create $topic"
		return
	fi
	t0=$(cpu_ticks)
	# shellcheck disable=SC2086 # PERF_TEST_PROPS is a list of properties
	out=$(java -Xmx1g -cp "$LIB/*" org.apache.kafka.tools.ProducerPerformance \
		--bootstrap-server "127.0.0.1:$port" --topic "$topic" --num-records "$PRODUCE_RECORDS" \
		--record-size 1024 --throughput -1 --command-property $PERF_TEST_PROPS 2>&1) || true
	t1=$(cpu_ticks)
	# "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
	# latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
	summary=$(grep 'records sent' <<<"$out" | tail -n 1)
	if [[ -z $summary ]]; then
		log "WARNING: kafka-producer-perf-test against $target failed:"
		tail -n 5 <<<"$out" >&2
		printf '{"mode":"produce","target":"%s","case":"perf-test-p%s-run%s","topic":"%s","partitions":%s,"record_size":1024,"records":0,"bytes":0,"seconds":0,"records_per_sec":0,"mb_per_sec":0,"errors":1,"ok":false}\n' \
			"$target" "$p" "$run" "$topic" "$p" >>"$RESULTS"
		return
	fi
	awk -v target="$target" -v p="$p" -v run="$run" -v topic="$topic" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '{
		gsub(/[(),]/, "")
		n = $1; rps = $4; mbps = $6; mx = $12; p50 = $16; p99 = $22; p999 = $25
		bytes = n * 1024; cpu = ticks / hz
		printf "{\"mode\":\"produce\",\"target\":\"%s\",\"case\":\"perf-test-p%s-run%s\",\"topic\":\"%s\",\"partitions\":%s,\"record_size\":1024,\"acks\":\"all\",\"idempotent\":true,\"compression\":\"none\",\"records\":%d,\"bytes\":%d,\"seconds\":%.3f,\"records_per_sec\":%s,\"mb_per_sec\":%s,\"p50_ms\":%s,\"p99_ms\":%s,\"p999_ms\":%s,\"max_ms\":%s,\"errors\":0,\"acked\":%d,\"ok\":true,\"broker_cpu_sec\":%.2f,\"broker_cpu_sec_per_gb\":%.3f}\n",
			target, p, run, topic, p, n, bytes, n / rps, rps, mbps, p50, p99, p999, mx, n, cpu, cpu / (bytes / 1073741824)
	}' <<<"$summary" >>"$RESULTS"
	tail -n 1 "$RESULTS" >&2
}

# --- suite ---------------------------------------------------------------------
run_suite() {
	local target=$1 run=$2 port=$3
	if [[ $LOADGEN == perf-test ]]; then
		for p in $PARTITIONS; do
			perf_test "$target" "$run" "$port" "$p"
		done
		return
	fi
	local common=(--brokers "127.0.0.1:$port" --target "$target" --broker-pid "$TARGET_PID"
		--record-size 1024 --acks all --idempotent=true --compression none)
	for p in $PARTITIONS; do
		load produce "${common[@]}" --case "produce-p$p-run$run" --topic "bench-p$p" \
			--create-topic --partitions "$p" --records "$PRODUCE_RECORDS" \
			--duration "$PRODUCE_MAX_DURATION" --producers 1 --timeout 3m
		load consume "${common[@]}" --case "consume-p$p-run$run" --topic "bench-p$p" \
			--consumers 1 --idle-timeout 10s --timeout 3m
		load e2e "${common[@]}" --case "e2e-p$p-run$run" --topic "bench-e2e-p$p" \
			--create-topic --partitions "$p" --duration "$E2E_DURATION" --rate "$E2E_RATE" \
			--linger 0 --idle-timeout 10s --timeout 2m
	done
}

START=$(date +%s)
for run in $(seq 1 "$RUNS"); do
	for target in $BUILT_TARGETS; do
		data=$(mktemp -d "$WORK/data-$target-$run.XXXXXX")
		port=$(free_port)
		logfile=$WORK/$target-$run.log
		log "run $run/$RUNS: $target on 127.0.0.1:$port, data $data"
		start_target "$target" "$data" "$port" "$logfile"
		if wait_ready "$port"; then
			run_suite "$target" "$run" "$port"
		else
			log "WARNING: $target did not answer on port $port; its log:"
			tail -n 20 "$logfile" >&2 || true
		fi
		stop_target
		cp "$logfile" "$RESULTS_DIR/$STAMP-$target-$run.log" 2>/dev/null || true
		rm -rf "$data"
	done
done
ELAPSED=$(($(date +%s) - START))

# --- report --------------------------------------------------------------------
report_targets=$(echo "$TARGETS" | tr -s ' ' ',' | sed 's/^,//; s/,$//')
commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(cd "$ROOT" && git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
	commit+=" (uncommitted changes)"
fi
{
	echo "Runs: $RUNS; targets: $TARGETS; commit $commit; suite took ${ELAPSED}s;" \
		"$(nproc) cores; $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
	echo
	"$WORK/broker-load" report --targets "$report_targets" "$RESULTS"
} | tee "$TABLE"
log "raw results: $RESULTS; table: $TABLE"
