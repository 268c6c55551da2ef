#!/usr/bin/env bash
# bench/cluster-produce.sh [ROUNDS]: produce throughput of a replicated
# cluster (issue 13), saturated by 4 producers (the first figures;
# bench/cluster-run.sh is the side-by-side suite: produce, consume, e2e). Three `broker serve` processes on loopback (distinct
# ports and data directories, fsync on) and, beside them, one single-node
# broker; 6-partition topics of replication factor 1 and 3 on the cluster
# and one on the single node. Each round runs `broker-load produce` (4
# idempotent acks=all franz-go producers, 1 KiB records, 10 s; env
# DURATION, PRODUCERS) on the three in turn (interleaved), each time on a
# fresh topic. Prints one line per run (target, MB/s, p50 and p99 ms) and
# the medians with min-max. ROOT=/path/to/checkout builds another
# version; PROFILE=1 takes CPU profiles of the brokers during RF 3 runs;
# OUT keeps the logs and JSON results (else nothing is left in TMPDIR);
# MAX_BUFFERED: records each producer buffers (10000); TARGETS picks among rf3 rf1
# single; SETTLE is the pause after creating a topic (3 s). BENCHMARKS.md, "Replicated cluster (issue 13)".
set -euo pipefail
ROUNDS=${1:-3}
DURATION=${DURATION:-10s}; PRODUCERS=${PRODUCERS:-4}
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)} # the checkout to build
BIN=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-cp.XXXXXX")
OUT=${OUT:-$BIN/out} # removed with BIN unless set
mkdir -p "$OUT"
(cd "$ROOT" && go build -o "$BIN/broker" ./cmd/broker && go build -o "$BIN/broker-load" ./cmd/broker-load)
BASE=$((20000 + RANDOM % 20000))
PEERS="1@127.0.0.1:$((BASE + 3)),2@127.0.0.1:$((BASE + 13)),3@127.0.0.1:$((BASE + 23))"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -TERM $p 2>/dev/null || true; done; wait; rm -rf "$BIN"' EXIT
for n in 1 2 3; do
  P=$((BASE + 10 * (n - 1)))
  "$BIN/broker" serve --data-dir "$BIN/data-$n" --node-id $n --cluster-peers "$PEERS" \
    --kafka-addr 127.0.0.1:$((P + 1)) --http-addr 127.0.0.1:$((P + 2)) --log-level warn >"$OUT/serve-$n.log" 2>&1 &
  PIDS+=($!)
done
SP=$((BASE + 40))
"$BIN/broker" serve --data-dir "$BIN/data-single" --kafka-addr 127.0.0.1:$((SP + 1)) --http-addr 127.0.0.1:$((SP + 2)) \
  --log-level warn >"$OUT/serve-single.log" 2>&1 &
PIDS+=($!)
CLUSTER="127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 21))"
SINGLE=127.0.0.1:$((SP + 1))
create() { # create BOOTSTRAP RF TOPIC: retried until the cluster has registered its brokers
  for i in $(seq 60); do
    "$BIN/broker" topics create --partitions 6 --replication-factor $2 --bootstrap-server $1 $3 >/dev/null 2>&1 && return
    sleep 1
  done
  echo "cannot create $3 on $1" >&2; exit 1
}
run() { # run TARGET BOOTSTRAP RF ROUND
  local topic=bench-$1-$4
  create $2 $3 $topic
  sleep ${SETTLE:-3} # leaders elected and in the metadata
  if [ -n "${PROFILE:-}" ] && [ $1 = rf3 ]; then # PROFILE=1: 5 s CPU profiles of the three brokers
    for n in 1 2 3; do
      curl -s -o "$OUT/cpu-$1-$4-$n.pprof" "http://127.0.0.1:$((BASE + 10 * (n - 1) + 2))/debug/pprof/profile?seconds=5" &
    done
  fi
  "$BIN/broker-load" produce --brokers $2 --json --topic $topic --partitions 6 --duration $DURATION \
    --producers $PRODUCERS --max-buffered-records ${MAX_BUFFERED:-10000} --record-size 1024 --acks all --idempotent=true --compression none --timeout 2m \
    | tail -1 >"$OUT/load-$1-$4.json"
  if [ $1 = rf3 ]; then # the replicas' high watermarks, per partition
    "$BIN/broker" cluster status --server http://127.0.0.1:$((BASE + 2)) >"$OUT/status-$1-$4.txt" 2>&1 || true
  fi
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], "mbps=%.1f" % d["mb_per_sec"], "p50_ms=%s" % d.get("p50_ms"), "p99_ms=%s" % d.get("p99_ms"))' \
    "$OUT/load-$1-$4.json" $1
}
TARGETS=${TARGETS:-rf3 rf1 single}
for r in $(seq $ROUNDS); do
  for t in $TARGETS; do
    case $t in
      rf3) run rf3 $CLUSTER 3 $r ;;
      rf1) run rf1 $CLUSTER 1 $r ;;
      single) run single $SINGLE 1 $r ;;
    esac
  done
done | tee "$OUT/runs.txt"
python3 - "$OUT/runs.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    d = dict(x.split("=") for x in f[1:])
    runs.setdefault(f[0], []).append(d)
for t, rs in runs.items():
    for k in ("mbps", "p99_ms"):
        v = sorted(float(r[k]) for r in rs if r[k] != "None")
        print(t, k, "%.1f (%.1f-%.1f)" % (statistics.median(v), v[0], v[-1]), end="  ")
    print()
PY
