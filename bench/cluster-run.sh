#!/usr/bin/env bash
# bench/cluster-run.sh [ROUNDS]: the replicated cluster beside one node
# (issue 13), one command, one run, the variants interleaved.
#
# Starts four `broker serve` processes built from ROOT (default: this
# checkout), fsync on, serve's defaults otherwise: three form a cluster
# (--cluster-peers), the fourth is a single node without cluster
# settings. As root with iproute2 (NETNS=auto, the default) each broker
# runs in a network namespace of its own behind a veth pair on a bridge
# (the clustertests layout: 10.78.0.<n>, kafka :9092, http :8080, raft
# :9093) and the load generator runs in the bridge's namespace; else
# (NETNS=0 or not root) everything is on 127.0.0.1 with distinct ports.
#
# Each round runs, for each target in TARGETS (single, rf1: the cluster
# with a topic of replication factor 1, rf3: the cluster with RF 3) and
# each partition count in PARTITIONS (1 8), bench/run.sh's suite with
# broker-load (1 KiB records, acks=all, idempotent, no compression):
#   produce  1 producer, PRODUCE_RECORDS or PRODUCE_DURATION, into a new topic
#   consume  1 consumer reads that topic back, verified
#   e2e      E2E_RATE records/s for E2E_DURATION, linger 0, a new topic
# and the CPU seconds all brokers of the target spent during each step
# (per GB moved), plus, on the cluster, the Raft hosts' counters from
# /metrics (fsyncs, Readies and entries per fsync, leader changes).
# Prints every result and a table of medians (min-max) with ratios
# against the single node. BEFORE=<git revision> also builds that
# revision of ROOT and starts a second cluster of it (nodes 5-7), whose
# targets are rf1-before and rf3-before (e.g. TARGETS="single rf3
# rf3-before"): a before/after in one run. OUT=dir keeps logs, JSON lines and the
# metrics; PROFILE=1 takes a CPU profile of each cluster node during the
# rf3 produce and e2e steps (into OUT); LOG_LEVEL sets the brokers' (warn).
# A replicated topic is measured once every partition is led by its
# preferred replica (settle, below; SETTLE_LEADERS=0: not waited for). Everything else (build, data,
# namespaces) is removed on exit. BENCHMARKS.md "Replicated cluster".
set -euo pipefail
ROUNDS=${1:-3}
ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
TARGETS=${TARGETS:-"single rf1 rf3"}
PARTITIONS=${PARTITIONS:-"1 8"}
PRODUCE_RECORDS=${PRODUCE_RECORDS:-2000000}
PRODUCE_DURATION=${PRODUCE_DURATION:-10s}
E2E_RATE=${E2E_RATE:-5000}
E2E_DURATION=${E2E_DURATION:-10s}
SETTLE=${SETTLE:-2}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-cr.XXXXXX")
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
NS=vmqcb$$
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${USE_NETNS:-0}" = 1 ]; then
    for n in hub n1 n2 n3 n4 n5 n6 n7; do
      for p in $(ip netns pids "$NS-$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
      ip netns del "$NS-$n" 2>/dev/null || true
    done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { printf '%s cluster-run: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

USE_NETNS=0
if [ "${NETNS:-auto}" != 0 ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then USE_NETNS=1; fi
log "building $ROOT into $WORK"
(cd "$ROOT" && go build -o "$WORK/broker" ./cmd/broker && go build -o "$WORK/broker-load" ./cmd/broker-load)
NODES="1 2 3 4"
if [ -n "${BEFORE:-}" ]; then # a second cluster (nodes 5-7) of revision BEFORE: the targets rf1-before, rf3-before
  log "building $BEFORE of $ROOT into $WORK/before"
  mkdir "$WORK/before"
  git -C "$ROOT" archive "$BEFORE" | tar -x -C "$WORK/before"
  (cd "$WORK/before" && go build -o "$WORK/broker-before" ./cmd/broker)
  rm -rf "$WORK/before"
  NODES="1 2 3 4 5 6 7"
fi

# addr N PORT: node N's address for one of its listeners (N=4: the single node).
if [ $USE_NETNS = 1 ]; then
  ip netns add "$NS-hub"
  ip -n "$NS-hub" link add br0 type bridge
  ip -n "$NS-hub" addr add 10.78.0.100/24 dev br0
  ip -n "$NS-hub" link set br0 up
  ip -n "$NS-hub" link set lo up
  for n in $NODES; do
    ip netns add "$NS-n$n"
    ip link add "h$n-$NS" netns "$NS-hub" type veth peer name eth0 netns "$NS-n$n"
    ip -n "$NS-hub" link set "h$n-$NS" master br0 up
    ip -n "$NS-n$n" addr add "10.78.0.$n/24" dev eth0
    ip -n "$NS-n$n" link set eth0 up
    ip -n "$NS-n$n" link set lo up
  done
  addr() { echo "10.78.0.$1:$2"; }
  inns() { local n=$1; shift; ip netns exec "$NS-$n" "$@"; }
  NETWORK="network namespaces (veth pairs on a bridge)"
else
  BASE=$((20000 + RANDOM % 20000))
  addr() { # kafka BASE+10(n-1)+1, http +2, raft +3
    local o=1; case $2 in 8080) o=2 ;; 9093) o=3 ;; esac
    echo "127.0.0.1:$((BASE + 10 * ($1 - 1) + o))"
  }
  inns() { shift; "$@"; }
  NETWORK="loopback (not root: no network namespaces)"
fi
log "network: $NETWORK"
PEERS="1@$(addr 1 9093),2@$(addr 2 9093),3@$(addr 3 9093)"
PEERS_B="5@$(addr 5 9093),6@$(addr 6 9093),7@$(addr 7 9093)"
for n in $NODES; do
  cl=(--node-id $n --cluster-peers "$PEERS") bin=$WORK/broker
  [ $n = 4 ] && cl=()
  [ $n -gt 4 ] && cl=(--node-id $n --cluster-peers "$PEERS_B") bin=$WORK/broker-before
  nsx=(); [ $USE_NETNS = 1 ] && nsx=(ip netns exec "$NS-n$n") # a command, not a function: $! must be the broker
  "${nsx[@]}" "$bin" serve --data-dir "$WORK/data-$n" "${cl[@]}" --kafka-addr "$(addr $n 9092)" \
    --http-addr "$(addr $n 8080)" --log-level "${LOG_LEVEL:-warn}" >"$OUT/serve-$n.log" 2>&1 &
  PIDS+=($!) # ip netns exec execs the broker: this is its pid
done
CLUSTER="$(addr 1 9092),$(addr 2 9092),$(addr 3 9092)"
CLUSTER_B="$(addr 5 9092),$(addr 6 9092),$(addr 7 9092)"
SINGLE=$(addr 4 9092)
client() { inns hub "$@"; }

# cpu PIDS...: utime+stime of the processes, in clock ticks.
cpu() { local s=0 p; for p in "$@"; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $s; }
# raftstats NODES...: the cluster's summed Raft host counters (name value lines).
raftstats() {
  for n in "$@"; do client curl -s "http://$(addr $n 8080)/metrics" || true; done |
    awk '/^broker_raft_host_longest/ { if ($2 > s[$1]) s[$1] = $2; next } /^broker_raft_host_/ { s[$1] += $2 } END { for (k in s) printf "%s %.3f\n", k, s[k] }' | sort
}
create() { # create BOOTSTRAP TOPIC PARTITIONS [RF [NODES...]]: retried until the cluster has registered its brokers
  local boot=$1 topic=$2 p=$3 rf=(); [ -n "${4:-}" ] && rf=(--replication-factor "$4")
  shift 4 || shift $#
  for _ in $(seq 60); do
    if client "$WORK/broker" topics create --partitions "$p" "${rf[@]}" --bootstrap-server "$boot" "$topic" >/dev/null 2>&1; then
      [ "${rf[1]:-1}" -gt 1 ] && [ "${SETTLE_LEADERS:-1}" = 1 ] && settle "$topic" "$p" "$@"
      sleep "$SETTLE"
      return
    fi
    sleep 1
  done
  log "cannot create $topic on $boot"; exit 1
}
# settle TOPIC PARTITIONS NODES...: wait (up to 30 s) until every partition
# of a replicated topic is led by its preferred replica (the first) with
# every replica in sync, in every node's view: a group that elected
# another leader first is handed back to the preferred one after 2 s of
# leading (cmd/broker/cluster_replicas.go preferLeader), a leader change
# that would otherwise fall into the measurement.
settle() {
  local topic=$1 p=$2 n; shift 2
  for _ in $(seq 300); do
    for n in "$@"; do client "$WORK/broker" cluster status --output json --server "http://$(addr "$n" 8080)" 2>/dev/null || echo '{}'; echo; done |
      python3 -c '
import json, sys
topic, want = sys.argv[1], int(sys.argv[2])
text, views, dec = sys.stdin.read(), [], json.JSONDecoder()
while text.strip():  # one JSON document per node, each over several lines
    v, end = dec.raw_decode(text.lstrip())
    views.append(v)
    text = text.lstrip()[end:]
ok = 0
for v in views:
    for q in v.get("partitions") or []:
        if q["topic"] != topic or q["leader"] != q["replicas"][0]:
            continue
        ok += 1 if q.get("isr") is None or len(q["isr"]) == len(q["replicas"]) else 0
sys.exit(0 if ok == want * len(views) and any(q.get("isr") for v in views for q in v.get("partitions") or [] if q["topic"] == topic) else 1)
' "$topic" "$p" && return
    sleep 0.1
  done
  log "WARNING: $topic: partitions not led by their preferred replicas after 30 s; measuring anyway"
}
# step TARGET P ROUND MODE ARGS...: one broker-load step, one JSON line in $OUT/results.jsonl
step() {
  local t=$1 p=$2 r=$3 mode=$4; shift 4
  local boot=$CLUSTER pids=("${PIDS[@]:0:3}") nodes=(1 2 3)
  case $t in
    single) boot=$SINGLE pids=("${PIDS[3]}") nodes=() ;;
    *-before) boot=$CLUSTER_B pids=("${PIDS[@]:4:3}") nodes=(5 6 7) ;;
  esac
  local c0 c1 line prof=()
  [ "$t" = single ] || raftstats "${nodes[@]}" >"$OUT/raft-$t-p$p-$r-$mode.before"
  if [ -n "${PROFILE:-}" ] && [ "${t%-before}" = rf3 ] && [ "$mode" != consume ]; then
    for n in "${nodes[@]}"; do
      client curl -s -o "$OUT/cpu-$t-p$p-$r-$mode-$n.pprof" "http://$(addr $n 8080)/debug/pprof/profile?seconds=8" &
      prof+=($!)
    done
  fi
  c0=$(cpu "${pids[@]}")
  line=$(client "$WORK/broker-load" "$mode" --brokers "$boot" --json --target "$t" --case "$mode-p$p-run$r" \
    --record-size 1024 --acks all --idempotent=true --compression none "$@" | tail -1)
  c1=$(cpu "${pids[@]}")
  [ ${#prof[@]} -gt 0 ] && wait "${prof[@]}"
  if [ "$t" != single ]; then
    raftstats "${nodes[@]}" >"$OUT/raft-$t-p$p-$r-$mode.after"
    # leader of each partition after the step (a leader change shows in the counters too)
    client "$WORK/broker" cluster status --server "http://$(addr "${nodes[0]}" 8080)" >"$OUT/status-$t-p$p-$r-$mode.txt" 2>&1 || true
  fi
  python3 - "$line" $((c1 - c0)) "$(getconf CLK_TCK)" "$OUT/raft-$t-p$p-$r-$mode" "$t" >>"$OUT/results.jsonl" <<'PY'
import json, os, sys
d = json.loads(sys.argv[1]); ticks, hz, raft, t = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
d["target"] = t
d["brokers_cpu_sec"] = ticks / hz
if d.get("bytes"):
    d["brokers_cpu_sec_per_gb"] = ticks / hz / (d["bytes"] / 2**30)
if os.path.exists(raft + ".before"):
    rd = lambda f: dict((k, float(v)) for k, v in (l.split() for l in open(f)))
    b, a = rd(raft + ".before"), rd(raft + ".after")
    d["raft"] = {k.replace("broker_raft_host_", ""): a[k] - (0 if "longest" in k else b.get(k, 0)) for k in a}
print(json.dumps(d))
PY
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); r=d.get("raft",{}); print(d["target"], d["case"], "MB/s=%.1f" % d["mb_per_sec"], "p50=%s p99=%s" % (d.get("p50_ms"), d.get("p99_ms")), "cpu_s/GB=%.1f" % d.get("brokers_cpu_sec_per_gb", 0), "errors=%s" % d["errors"], " ".join("%s=%.0f" % kv for kv in sorted(r.items())))' "$(tail -1 "$OUT/results.jsonl")" >&2
}

for r in $(seq "$ROUNDS"); do
  for p in $PARTITIONS; do
    for t in $TARGETS; do
      boot=$CLUSTER rf=3 nodes="1 2 3"
      case $t in single) boot=$SINGLE rf="" ;; rf1) rf=1 ;; rf1-before) boot=$CLUSTER_B rf=1 ;; rf3-before) boot=$CLUSTER_B nodes="5 6 7" ;; esac
      create "$boot" "bench-$t-p$p-$r" "$p" "$rf" $nodes
      step "$t" "$p" "$r" produce --topic "bench-$t-p$p-$r" --records "$PRODUCE_RECORDS" --duration "$PRODUCE_DURATION" \
        --producers 1 --timeout 3m
      step "$t" "$p" "$r" consume --topic "bench-$t-p$p-$r" --consumers 1 --idle-timeout 10s --timeout 3m
      create "$boot" "bench-e2e-$t-p$p-$r" "$p" "$rf" $nodes
      step "$t" "$p" "$r" e2e --topic "bench-e2e-$t-p$p-$r" --duration "$E2E_DURATION" --rate "$E2E_RATE" \
        --linger 0 --idle-timeout 10s --timeout 2m
    done
  done
done
commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "commit $commit; $ROUNDS rounds; $NETWORK; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/results.jsonl" "$TARGETS" "$PARTITIONS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
targets, parts = sys.argv[2].split(), [int(p) for p in sys.argv[3].split()]
def vals(t, mode, p, f):
    return sorted(f(r) for r in rows if r["target"] == t and r["mode"] == mode and r["partitions"] == p and f(r) is not None)
def med(v): return statistics.median(v) if v else None
def cell(v, fmt="%.1f"): return (fmt + " (" + fmt + "-" + fmt + ")") % (med(v), v[0], v[-1]) if v else "-"
metrics = [("produce MB/s", "produce", lambda r: r["mb_per_sec"]),
           ("consume MB/s", "consume", lambda r: r["mb_per_sec"]),
           ("e2e p99 ms", "e2e", lambda r: r.get("p99_ms")),
           ("produce brokers' CPU s/GB", "produce", lambda r: r.get("brokers_cpu_sec_per_gb")),
           ("consume brokers' CPU s/GB", "consume", lambda r: r.get("brokers_cpu_sec_per_gb")),
           ("produce p99 ms", "produce", lambda r: r.get("p99_ms")),
           ("fsyncs/s (3 nodes, produce)", "produce", lambda r: r["raft"]["saves_total"] / r["seconds"] if "raft" in r and r["raft"].get("saves_total") else None),
           ("entries per fsync (produce)", "produce", lambda r: r["raft"]["entries_saved_total"] / r["raft"]["saves_total"] if "raft" in r and r["raft"].get("saves_total") else None)]
print("| | " + " | ".join("%s p%d" % (t, p) for p in parts for t in targets) + " |")
print("|---|" + "---|" * (len(parts) * len(targets)))
for name, mode, f in metrics:
    print("| %s | " % name + " | ".join(cell(vals(t, mode, p, f)) for p in parts for t in targets) + " |")
if "single" in targets:
    print()
    for p in parts:
        for name, mode, f in metrics[:3]:
            s = med(vals("single", mode, p, f))
            print("p%d %s vs single: " % (p, name) + ", ".join("%s %.2fx" % (t, med(vals(t, mode, p, f)) / s) for t in targets if t != "single" and s and vals(t, mode, p, f)))
errs = sum(r["errors"] for r in rows)
print("errors over all steps:", errs)
for t in targets:
    for p in parts:
        lc = sum(r["raft"].get("leader_changes_total", 0) for r in rows if r["target"] == t and r["partitions"] == p and "raft" in r)
        if any("raft" in r for r in rows if r["target"] == t):
            print("%s p%d: partition leader changes during the steps (all rounds, 3 nodes): %d" % (t, p, lc))
PY
