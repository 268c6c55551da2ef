#!/usr/bin/env bash
# bench/scale.sh — how our broker grows with partitions and with stored data
# (issue 14, item 4): memory, topic creation, produce, consume and restart.
#
# For each run (default 3) and each partition count P (default 1 8 100 1000
# 10000) it starts a fresh broker on a free 127.0.0.1 port with its data
# under DATA_ROOT, then:
#   create   broker-load produce --create-topic --partitions P --records 1:
#            create_ms (CreateTopics until every partition has a leader);
#            then, after IDLE_WAIT, the idle RSS (VmRSS)
#   produce  PRODUCE_RECORDS records of 1 KiB or PRODUCE_MAX_DURATION, 1
#            producer, acks=all, idempotent, no compression: MB/s, broker
#            CPU s/GB, peak RSS during the step (VmHWM reset at its start)
#   consume  read it all back, verified: MB/s, CPU s/GB, peak RSS
#   restart  SIGKILL the broker, start it on the same data and time until a
#            one-record idempotent produce to the topic is acknowledged
#            (restart_ms, from the exec of the new process); recovery_ms
#            from the broker's "broker started" log line; RSS after it
# Then, with DATA_GB > 0, one more broker per run: DATA_GB GiB of 1 KiB
# records into DATA_PARTITIONS partitions, the idle RSS, a full verified
# consume, and the SIGKILL restart as above, then a SIGTERM restart.
#
# Usage: bench/scale.sh [-n RUNS] [-p "1 8 100 1000 10000"] [-g DATA_GB]
#   (PARTITIONS="" DATA_GB=10: the stored-data run only)
# Environment: RUNS PARTITIONS PRODUCE_RECORDS PRODUCE_MAX_DURATION DATA_GB
#   DATA_PARTITIONS DATA_ROOT RESULTS_DIR SCALE_BROKER_BIN (a prebuilt broker, to
#   measure another commit with this script) IDLE_WAIT
# Prints a markdown table (median (min-max) of the runs) and keeps the raw
# JSON lines in bench/results/scale-STAMP.jsonl (gitignored).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
PARTITIONS=${PARTITIONS-"1 8 100 1000 10000"}
PRODUCE_RECORDS=${PRODUCE_RECORDS:-2000000}
PRODUCE_MAX_DURATION=${PRODUCE_MAX_DURATION:-20s}
DATA_GB=${DATA_GB:-0}
DATA_PARTITIONS=${DATA_PARTITIONS:-100}
DATA_ROOT=${DATA_ROOT:-/tmp}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}
IDLE_WAIT=${IDLE_WAIT:-3}

while getopts "n:p:g:h" opt; do
	case $opt in
	n) RUNS=$OPTARG ;;
	p) PARTITIONS=$OPTARG ;;
	g) DATA_GB=$OPTARG ;;
	*) sed -n '2,30p' "$0"; exit 2 ;;
	esac
done

log() { printf '%s scale: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

WORK=$(mktemp -d "$DATA_ROOT/vibemq-scale.XXXXXX")
PID=""
cleanup() {
	if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/broker-load" ./cmd/broker-load)
BROKER=${SCALE_BROKER_BIN:-$WORK/broker}
[[ -n ${SCALE_BROKER_BIN:-} ]] || (cd "$ROOT" && go build -o "$WORK/broker" ./cmd/broker)
LOAD=$WORK/broker-load

mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=$RESULTS_DIR/scale-$STAMP.jsonl
: >"$RESULTS"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local port
	for _ in $(seq 1 100); do
		port=$((20000 + RANDOM % 40000))
		port_in_use "$port" || { echo "$port"; return; }
	done
	log "no free port found"
	return 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
rss_mb() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }

# start DATA PORT LOG: the broker in the background; PID is the broker's.
start() {
	HTTP_PORT=$(free_port)
	"$BROKER" serve --data-dir "$1" --kafka-addr "127.0.0.1:$2" --http-addr "127.0.0.1:$HTTP_PORT" \
		--log-level info --log-format json >>"$3" 2>&1 &
	PID=$!
}

# store_gauge NAME: a gauge of the broker's /metrics (0 if unavailable).
store_gauge() {
	curl -sf "http://127.0.0.1:$HTTP_PORT/metrics" 2>/dev/null | awk -v n="$1" '$1 == n {printf "%.0f", $2; found=1} END {if (!found) print 0}'
}

# ready PORT TOPIC: until a one-record produce to TOPIC is acknowledged
# (at most 120 s). The record stays in the topic.
ready() {
	local deadline=$(($(now_ms) + 120000))
	until "$LOAD" produce --brokers "127.0.0.1:$1" --topic "$2" --records 1 --duration 0 \
		--timeout 20s >/dev/null 2>&1; do
		kill -0 "$PID" 2>/dev/null || return 1
		(($(now_ms) < deadline)) || return 1
		sleep 0.05
	done
}

# stop SIGNAL: signal the broker and wait until it is gone.
stop() {
	kill "-$1" "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	PID=""
}

# restart KIND P RUN DATA PORT LOG TOPIC CASE: stops the broker with SIGKILL
# (kind kill) or SIGTERM (kind term), starts it again and writes a result
# line.
restart() {
	local kind=$1 p=$2 run=$3 data=$4 port=$5 logfile=$6 topic=$7 label=$8 t0 t1 recovery store_open
	if [[ $kind == kill ]]; then stop KILL; else stop TERM; fi
	local attempt
	for attempt in 1 2 3; do
		: >"$logfile.restart"
		t0=$(now_ms)
		start "$data" "$port" "$logfile.restart"
		ready "$port" "$topic" && break
		# A broker that exited (e.g. its HTTP port, free a moment ago,
		# was taken by another process) is started again.
		log "WARNING: broker did not come back after $kind (attempt $attempt); its log:"
		tail -n 3 "$logfile.restart" >&2
		if kill -0 "$PID" 2>/dev/null || ((attempt == 3)); then
			return 1
		fi
	done
	t1=$(now_ms)
	recovery=$(grep -o '"recovery":[0-9.]*' "$logfile.restart" | head -n 1 | cut -d: -f2)
	# The part of it that opened the store (WAL replay), from its own line.
	store_open=$(grep '"store opened"' "$logfile.restart" | grep -o '"took":[0-9.]*' | head -n 1 | cut -d: -f2)
	printf '{"mode":"restart","case":"%s","kind":"%s","partitions":%s,"run":%s,"restart_ms":%s,"recovery_ms":%s,"store_open_ms":%s,"broker_rss_mb":%s,"data_bytes":%s,"ok":true}\n' \
		"$label" "$kind" "$p" "$run" $((t1 - t0)) "${recovery:-0}" "${store_open:-0}" "$(rss_mb)" "$(du -sb "$data" | cut -f1)" | tee -a "$RESULTS" >&2
	cat "$logfile.restart" >>"$logfile"
}

# step MODE ARGS...: one broker-load step against the running broker.
step() {
	local mode=$1
	shift
	if ! "$LOAD" "$mode" --json --broker-pid "$PID" "$@" >>"$RESULTS"; then
		log "WARNING: $mode $* failed"
	fi
	tail -n 1 "$RESULTS" >&2
}

# one P RUN: the partition-count suite on a fresh broker.
one() {
	local p=$1 run=$2 data port logfile topic=scale-p$1
	data=$(mktemp -d "$WORK/data-p$p-$run.XXXXXX")
	port=$(free_port)
	logfile=$WORK/p$p-$run.log
	log "run $run/$RUNS: $p partitions on 127.0.0.1:$port"
	start "$data" "$port" "$logfile"
	local common=(--brokers "127.0.0.1:$port" --topic "$topic" --record-size 1024
		--acks all --idempotent=true --compression none --timeout 5m)
	sleep 0.5
	step produce "${common[@]}" --case "create-p$p-run$run" --create-topic --partitions "$p" --records 1 --duration 0
	sleep "$IDLE_WAIT"
	printf '{"mode":"idle","partitions":%s,"run":%s,"broker_rss_mb":%s,"ok":true}\n' "$p" "$run" "$(rss_mb)" | tee -a "$RESULTS" >&2
	step produce "${common[@]}" --case "produce-p$p-run$run" --records "$PRODUCE_RECORDS" --duration "$PRODUCE_MAX_DURATION"
	step consume "${common[@]}" --case "consume-p$p-run$run" --consumers 1 --idle-timeout 10s
	restart kill "$p" "$run" "$data" "$port" "$logfile" "$topic" "restart-p$p-run$run" || true
	stop TERM
	cp "$logfile" "$RESULTS_DIR/scale-$STAMP-p$p-$run.log" 2>/dev/null || true
	rm -rf "$data"
}

# data RUN: DATA_GB GiB into DATA_PARTITIONS partitions, then restarts.
data_run() {
	local run=$1 p=$DATA_PARTITIONS data port logfile topic=scale-data
	data=$(mktemp -d "$WORK/data-gb-$run.XXXXXX")
	port=$(free_port)
	logfile=$WORK/gb-$run.log
	log "run $run/$RUNS: $DATA_GB GiB in $p partitions on 127.0.0.1:$port"
	start "$data" "$port" "$logfile"
	local common=(--brokers "127.0.0.1:$port" --topic "$topic" --record-size 1024
		--acks all --idempotent=true --compression none --timeout 30m)
	sleep 0.5
	step produce "${common[@]}" --case "data-produce-run$run" --create-topic --partitions "$p" \
		--records $((DATA_GB * 1024 * 1024)) --duration 0
	sleep "$IDLE_WAIT"
	# What a crash now leaves to replay: the live WAL and the memtables.
	printf '{"mode":"idle","case":"data-idle","partitions":%s,"run":%s,"broker_rss_mb":%s,"data_bytes":%s,"wal_bytes":%s,"memtable_bytes":%s,"l0_files":%s,"ok":true}\n' \
		"$p" "$run" "$(rss_mb)" "$(du -sb "$data" | cut -f1)" "$(store_gauge broker_pebble_wal_bytes)" \
		"$(store_gauge broker_pebble_memtable_bytes)" "$(store_gauge broker_pebble_l0_files)" | tee -a "$RESULTS" >&2
	restart kill "$p" "$run" "$data" "$port" "$logfile" "$topic" data-restart || true
	step consume "${common[@]}" --case "data-consume-run$run" --consumers 1 --idle-timeout 10s
	restart term "$p" "$run" "$data" "$port" "$logfile" "$topic" data-restart || true
	stop TERM
	cp "$logfile" "$RESULTS_DIR/scale-$STAMP-gb-$run.log" 2>/dev/null || true
	rm -rf "$data"
}

START=$(date +%s)
for run in $(seq 1 "$RUNS"); do
	for p in $PARTITIONS; do
		one "$p" "$run"
	done
	if ((DATA_GB > 0)); then
		data_run "$run"
	fi
done
ELAPSED=$(($(date +%s) - START))

commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
	echo "Runs: $RUNS; partitions: $PARTITIONS; data: ${DATA_GB} GiB in $DATA_PARTITIONS partitions;" \
		"broker ${SCALE_BROKER_BIN:-built from $commit}; took ${ELAPSED}s; $(nproc) cores; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	python3 "$ROOT/bench/scale-report.py" "$RESULTS"
} | tee "$RESULTS_DIR/scale-$STAMP.md"
log "raw results: $RESULTS"
