#!/usr/bin/env bash
# bench/produce-once.sh BIN P TAG [ENV=VALUE...]: one 1 GB produce (1,000,000 1 KiB records,
# acks=all, idempotent, one producer) against a fresh broker from BIN (started with the
# given environment) on a fresh data directory; prints one line: broker CPU s/GB, MB/s,
# bytes allocated per byte produced (TotalAlloc), garbage collections (NumGC) and peak RSS.
# Outputs go to OUT (default $BIN/once). BENCHMARKS.md, issue 14, "The garbage collector".
set -uo pipefail
BIN=$1; P=$2; TAG=$3; shift 3
OUT=${OUT:-$BIN/once}; mkdir -p $OUT
DATA=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-once.XXXXXX")
for try in 1 2 3 4 5; do # a random port may be taken: try another
  KP=$((30000 + RANDOM % 20000)); HP=$((KP + 1))
  env "$@" $BIN/broker serve --data-dir $DATA --kafka-addr 127.0.0.1:$KP --http-addr 127.0.0.1:$HP --log-level warn >$OUT/broker-$TAG.log 2>&1 &
  BPID=$!
  sleep 0.5
  kill -0 $BPID 2>/dev/null && break
done
trap 'kill -TERM $BPID 2>/dev/null; wait $BPID 2>/dev/null; rm -rf $DATA' EXIT
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$KP) 2>/dev/null && break; sleep 0.1; done
$BIN/broker-load produce --brokers 127.0.0.1:$KP --broker-pid $BPID --json --topic bench-p$P --create-topic --partitions $P \
  --records ${RECORDS:-1000000} --duration 0 --producers 1 --record-size 1024 --acks all --idempotent=true --compression none --timeout 3m >$OUT/load-$TAG.json
curl -s -o $OUT/mem-$TAG.txt "http://127.0.0.1:$HP/debug/pprof/allocs?debug=1"
python3 - "$OUT" "$TAG" "$P" <<'PY'
import json, re, sys
out, tag, p = sys.argv[1:]
d = json.loads(open(f"{out}/load-{tag}.json").read().strip().splitlines()[-1])
m = open(f"{out}/mem-{tag}.txt").read()
ta = int(re.search(r"# TotalAlloc = (\d+)", m).group(1))
ngc = int(re.search(r"# NumGC = (\d+)", m).group(1))
print(tag, "P=" + p, "cpu_s_gb=%.3f" % d["broker_cpu_sec_per_gb"], "mbps=%.1f" % d["mb_per_sec"],
      "alloc_per_B=%.3f" % (ta / d["bytes"]), "ngc=%d" % ngc, "peak_rss=%.0f" % d["broker_peak_rss_mb"], "ok=%s" % d["ok"])
PY
