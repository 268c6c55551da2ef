#!/usr/bin/env bash
# bench/queue-run.sh — native queue benchmark: our broker (HTTP API, fsync
# always) vs NATS JetStream (work-queue stream, file storage) vs Redis
# streams (consumer group, appendfsync always), in one run on this machine.
#
# For each case (batch 10, batch 1) and each target: start the target with a
# fresh data dir on 127.0.0.1, send MESSAGES 1 KiB messages from 4 producers
# (BATCH per request), then drain them with 4 consumers (receive up to BATCH,
# ack them), stop the target. Prints one result line per run and a markdown
# table; raw JSON lines go to bench/results/queue-<stamp>.jsonl.
#
# Needs: nats-server and redis-server (Debian: apt-get install -y nats-server
# redis-server). Targets that are missing are skipped with a warning.
# Targets:
#   ours             our broker, fsync always (the default), acks riding on the next receive
#   ours-separate    the same with an ack request per batch (two syncs per batch)
#   ours-nokeepalive ours with a new HTTP connection per request (keep-alive off)
#   ours-nosync      our relaxed mode (--fsync never): acknowledged before the
#                    fsync, like JetStream's default
#   jetstream        Debian's nats-server (2.9: no per-message fsync, no option for it),
#                    fire-and-forget acks
#   jetstream-sync   nats-server $NATS_SYNC_VERSION built from the Go module proxy
#                    with jetstream { sync_interval: always } and AckSync: the
#                    durable configuration (the option arrived in 2.10)
#   redis            Redis streams, appendfsync always
# Usage: bench/queue-run.sh   Environment: MESSAGES_B10 MESSAGES_B1 TARGETS NATS_SYNC_VERSION
#   BATCHES (default "10 1"); ROUNDS (default 1: every target once per batch
#   size; more rounds interleave the targets, so the machine's noise falls on
#   all of them); BIN: a directory with prebuilt broker and broker-load
#   binaries (skips their build, e.g. to compare two commits in one run with
#   TARGETS="ours ours@/tmp/old ..."; a target ours@DIR runs DIR's binaries).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MESSAGES_B10=${MESSAGES_B10:-40000}
MESSAGES_B1=${MESSAGES_B1:-10000}
TARGETS=${TARGETS:-"ours ours-separate ours-nosync jetstream jetstream-sync redis"}
BATCHES=${BATCHES:-"10 1"}
ROUNDS=${ROUNDS:-1}
BIN=${BIN:-}
NATS_SYNC_VERSION=${NATS_SYNC_VERSION:-v2.15.2}
RESULTS_DIR=${RESULTS_DIR:-$ROOT/bench/results}

log() { printf '%s queue-bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-qbench.XXXXXX")
PID=""
stop_target() {
	if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$PID" 2>/dev/null || true
	fi
	PID=""
}
cleanup() { stop_target; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -n $BIN ]]; then
	cp "$BIN/broker" "$BIN/broker-load" "$WORK/"
else
	log "building into $WORK"
	(cd "$ROOT" && go build -o "$WORK/broker" ./cmd/broker && go build -o "$WORK/broker-load" ./cmd/broker-load)
fi
(cd "$ROOT/bench/queue-jetstream" && go build -o "$WORK/queue-jetstream" .)
if [[ " $TARGETS " == *" jetstream-sync "* ]]; then
	log "building nats-server $NATS_SYNC_VERSION from the module proxy"
	GOBIN=$WORK GOFLAGS= go install "github.com/nats-io/nats-server/v2@$NATS_SYNC_VERSION" ||
		log "WARNING: cannot build nats-server $NATS_SYNC_VERSION; jetstream-sync is skipped"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

mkdir -p "$RESULTS_DIR"
STAMP=$(date +%Y%m%d-%H%M%S)
RESULTS=$RESULTS_DIR/queue-$STAMP.jsonl
: >"$RESULTS"

run_case() { # target batch messages
	local target=$1 batch=$2 messages=$3 data=$WORK/data-$1-$2 port
	rm -rf "$data"; mkdir -p "$data"
	port=$(free_port)
	local bin=$WORK
	if [[ $target == *@* ]]; then bin=${target#*@}; fi
	case ${target%@*} in
	ours | ours-separate | ours-nosync | ours-nokeepalive)
		local fsync=always ackmode=next keepalive=
		[[ $target == ours-nosync* ]] && fsync=never
		[[ $target == ours-separate* ]] && ackmode=separate
		[[ $target == ours-nokeepalive* ]] && keepalive=--no-keep-alive
		"$bin/broker" serve --data-dir "$data" --kafka-addr "127.0.0.1:$(free_port)" --http-addr "127.0.0.1:$port" \
			--fsync "$fsync" --log-level warn --log-format json >"$data.log" 2>&1 &
		PID=$!
		wait_port "$port" || { log "broker did not start"; return 1; }
		sleep 0.3
		"$bin/broker-load" queue --target ours --addr "127.0.0.1:$port" --batch "$batch" --messages "$messages" \
			--ack-mode "$ackmode" --case "batch$batch" --server-pid "$PID" $keepalive --json | sed "s|\"target\":\"ours\"|\"target\":\"$target\"|" | tee -a "$RESULTS"
		;;
	jetstream)
		command -v nats-server >/dev/null || { log "WARNING: nats-server missing; skipping"; return 0; }
		nats-server -js -sd "$data" -a 127.0.0.1 -p "$port" >"$data.log" 2>&1 &
		PID=$!
		wait_port "$port" || { log "nats-server did not start"; return 1; }
		"$WORK/queue-jetstream" --url "nats://127.0.0.1:$port" --batch "$batch" --messages "$messages" \
			--case "batch$batch" --server-pid "$PID" --json | tee -a "$RESULTS"
		;;
	jetstream-sync)
		[[ -x $WORK/nats-server ]] || { log "WARNING: nats-server $NATS_SYNC_VERSION missing; skipping"; return 0; }
		printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s", sync_interval: always }\n' "$port" "$data" >"$data.conf"
		"$WORK/nats-server" -c "$data.conf" >"$data.log" 2>&1 &
		PID=$!
		wait_port "$port" || { log "nats-server $NATS_SYNC_VERSION did not start"; return 1; }
		"$WORK/queue-jetstream" --url "nats://127.0.0.1:$port" --batch "$batch" --messages "$messages" --ack-sync \
			--case "batch$batch" --server-pid "$PID" --json | sed 's/"target":"jetstream"/"target":"jetstream-sync"/' | tee -a "$RESULTS"
		;;
	redis)
		command -v redis-server >/dev/null || { log "WARNING: redis-server missing; skipping"; return 0; }
		redis-server --bind 127.0.0.1 --port "$port" --dir "$data" --appendonly yes --appendfsync always \
			--save '' --daemonize no >"$data.log" 2>&1 &
		PID=$!
		wait_port "$port" || { log "redis-server did not start"; return 1; }
		"$WORK/broker-load" queue --target redis --addr "127.0.0.1:$port" --batch "$batch" --messages "$messages" \
			--case "batch$batch" --server-pid "$PID" --json | tee -a "$RESULTS"
		;;
	esac
	stop_target
}

for batch in $BATCHES; do
	messages=$MESSAGES_B10
	[[ $batch == 1 ]] && messages=$MESSAGES_B1
	for round in $(seq "$ROUNDS"); do
		for target in $TARGETS; do
			log "$target batch=$batch messages=$messages round=$round"
			run_case "$target" "$batch" "$messages" || log "WARNING: $target batch=$batch failed"
		done
	done
done

python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| case | target | send msg/s | receive+ack msg/s | receive p50 ms | receive p99 ms |")
print("|---|---|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['case']} | {r['target']} | {r['send_msgs_per_sec']:.0f} | {r['receive_ack_msgs_per_sec']:.0f} | {r['receive_p50_ms']:.2f} | {r['receive_p99_ms']:.2f} |")
# With several rounds: medians (min-max) per case and target.
groups = {}
for r in rows:
    groups.setdefault((r['case'], r['target']), []).append(r)
if any(len(g) > 1 for g in groups.values()):
    med = lambda v: sorted(v)[len(v) // 2]
    print()
    print("| case | target | runs | send msg/s median (min-max) | receive+ack msg/s median (min-max) | server CPU us/msg send, receive+ack (medians) |")
    print("|---|---|---:|---:|---:|---:|")
    for (case, target), g in groups.items():
        s = [x['send_msgs_per_sec'] for x in g]; c = [x['receive_ack_msgs_per_sec'] for x in g]
        cs = [x.get('send_server_cpu_us_per_msg', 0) for x in g]; cr = [x.get('receive_server_cpu_us_per_msg', 0) for x in g]
        cpu = f"{med(cs):.1f}, {med(cr):.1f}" if med(cs) else "-"
        print(f"| {case} | {target} | {len(g)} | {med(s):.0f} ({min(s):.0f}-{max(s):.0f}) | {med(c):.0f} ({min(c):.0f}-{max(c):.0f}) | {cpu} |")
PY
log "raw results: $RESULTS"
