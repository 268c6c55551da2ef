#!/usr/bin/env bash
# bench/share-run.sh — KIP-932 share-group consume+ack beside the native
# queue's receive+ack (issue 10 "Done means"), our broker vs Apache Kafka 4.2.
#
# For each run (default 3) and each target: start the target fresh on
# 127.0.0.1, load MESSAGES records of 1 KiB, then consume them all with
# CONSUMERS clients that acknowledge each one, stop the target. Targets:
#   ours-topic   our broker, a plain topic (PARTITIONS), filled by an idempotent
#                franz-go producer; consumed by share-group members
#                (broker-load consume --share-group, kgo.ShareGroup, AckAccept)
#   ours-queue   our broker, a native queue (PARTITIONS) filled by the same Kafka
#                producer (records produced into a queue's topic are its
#                messages); consumed by share-group members on the queue's topic
#   ours-http    our broker, a native queue filled and drained over HTTP
#                (broker-load queue --batch 10: receive 10, acks riding on the
#                next receive), as "Native queue vs NATS JetStream" measures it
#   kafka        Apache Kafka 4.2 (compat-tests/reference/run-kafka.sh, its
#                defaults: no fsync) with group.share.record.lock.duration.ms
#                and group.share.delivery.count.limit at Kafka's defaults (30 s, 5);
#                a plain topic, the same producer and share consumers
# Prints one JSON line per measurement and a markdown table of medians
# (min-max) over the runs; raw lines go to bench/results/share-<stamp>.jsonl.
#
# Usage: bench/share-run.sh   Environment: RUNS TARGETS MESSAGES PARTITIONS CONSUMERS
#   KAFKA_REFERENCE_LIB (Apache Kafka's jars, default compat-tests/reference/target/lib)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=${RUNS:-3}
TARGETS=${TARGETS:-"ours-topic ours-queue ours-http kafka"}
MESSAGES=${MESSAGES:-40000}
PARTITIONS=${PARTITIONS:-1}
CONSUMERS=${CONSUMERS:-4}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}

log() { printf '%s share-bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-sbench.XXXXXX")
PID=""
stop_target() {
	if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PID" 2>/dev/null || true
	fi
	PID=""
}
cleanup() { stop_target; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

log "building into $WORK"
(cd "$ROOT" && go build -o "$WORK/broker" ./cmd/broker && go build -o "$WORK/broker-load" ./cmd/broker-load)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
# wait_kafka PORT: until a Metadata request succeeds (a JVM takes 10-30 s here).
wait_kafka() {
	for _ in $(seq 900); do
		kill -0 "$PID" 2>/dev/null || return 1
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null &&
			{ ! command -v kcat >/dev/null || kcat -L -b "127.0.0.1:$1" -m 2 >/dev/null 2>&1; }; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=$RESULTS_DIR/share-$STAMP.jsonl
: >"$RESULTS"

# fill_and_share TARGET KAFKA_PORT TOPIC CREATE: produce MESSAGES records, then
# consume them with share-group members.
fill_and_share() {
	local target=$1 kport=$2 topic=$3 create=$4
	"$WORK/broker-load" produce --brokers "127.0.0.1:$kport" --topic "$topic" $create --partitions "$PARTITIONS" \
		--records "$MESSAGES" --duration 0 --record-size 1024 --json >/dev/null
	"$WORK/broker-load" consume --brokers "127.0.0.1:$kport" --topic "$topic" --share-group "bench-$topic" \
		--consumers "$CONSUMERS" --record-size 1024 --broker-pid "$PID" --idle-timeout 30s \
		--target "$target" --case share --json | tee -a "$RESULTS"
}

run_target() { # target run
	local target=$1 data=$WORK/data-$1-$2 kport hport
	rm -rf "$data"; mkdir -p "$data"
	kport=$(free_port); hport=$(free_port)
	case $target in
	ours-topic | ours-queue | ours-http)
		"$WORK/broker" serve --data-dir "$data" --kafka-addr "127.0.0.1:$kport" --http-addr "127.0.0.1:$hport" \
			--log-level warn >"$data.log" 2>&1 &
		PID=$!
		wait_kafka "$kport" || { log "broker did not start"; return 1; }
		case $target in
		ours-topic) fill_and_share "$target" "$kport" bench-topic --create-topic ;;
		ours-queue)
			curl -sf -X PUT "http://127.0.0.1:$hport/v1/queues/bench-queue" -H 'Content-Type: application/json' \
				-d "{\"partitions\": $PARTITIONS}" >/dev/null
			fill_and_share "$target" "$kport" bench-queue ""
			;;
		ours-http)
			"$WORK/broker-load" queue --target ours --addr "127.0.0.1:$hport" --batch 10 --messages "$MESSAGES" \
				--consumers "$CONSUMERS" --case share --json |
				python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r["target"]="ours-http"; r["records_per_sec"]=r["receive_ack_msgs_per_sec"]; print(json.dumps(r))' |
				tee -a "$RESULTS"
			;;
		esac
		;;
	kafka)
		if ! ls "${KAFKA_REFERENCE_LIB:-$ROOT/compat-tests/reference/target/lib}"/kafka_2.13-*.jar >/dev/null 2>&1; then
			log "WARNING: Apache Kafka's jars are missing; skipping (mvn -B -q -f compat-tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=target/lib)"
			return 0
		fi
		KAFKA_REFERENCE_HEAP=-Xmx2g "$ROOT/compat-tests/reference/run-kafka.sh" "$data" "$kport" "$(free_port)" \
			group.share.record.lock.duration.ms=30000 group.share.delivery.count.limit=5 >"$data.log" 2>&1 &
		PID=$!
		wait_kafka "$kport" || { log "Apache Kafka did not start"; return 1; }
		fill_and_share "$target" "$kport" bench-topic --create-topic
		;;
	*) log "unknown target $target"; return 1 ;;
	esac
	stop_target
}

for run in $(seq "$RUNS"); do
	for target in $TARGETS; do
		log "run $run: $target (messages=$MESSAGES partitions=$PARTITIONS consumers=$CONSUMERS)"
		run_target "$target" "$run" || log "WARNING: $target run $run failed"
		stop_target
	done
done

python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["target"], []).append(r["records_per_sec"])
print("| target | consume+ack records/s, median (min-max) | runs |")
print("|---|---:|---|")
for t, v in by.items():
    print(f"| {t} | {statistics.median(v):,.0f} ({min(v):,.0f}-{max(v):,.0f}) | {', '.join(f'{x:,.0f}' for x in v)} |")
PY
log "raw results: $RESULTS"
