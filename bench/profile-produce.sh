#!/usr/bin/env bash
# bench/profile-produce.sh P RUN: starts one broker on a fresh data dir, runs one
# broker-load produce of P partitions (20 s, 1 KiB records, idempotent), takes a 12 s CPU
# profile from 3 s in and the allocation profile after it (BENCHMARKS.md, "Where the CPU per
# byte goes"). Binaries from BIN (go build -o $BIN/broker ./cmd/broker; likewise
# cmd/broker-load); profiles and results go to OUT (default $BIN/prof).
set -euo pipefail
BIN=${BIN:-/tmp/pm}
P=$1; RUN=$2; OUT=${OUT:-$BIN/prof}; mkdir -p $OUT
DATA=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-prof.XXXXXX")
KP=$((30000 + RANDOM % 20000)); HP=$((KP + 1))
$BIN/broker serve --data-dir $DATA --kafka-addr 127.0.0.1:$KP --http-addr 127.0.0.1:$HP --log-level warn >$OUT/broker-p$P-$RUN.log 2>&1 &
BPID=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$KP) 2>/dev/null && break; sleep 0.1; done
$BIN/broker-load produce --brokers 127.0.0.1:$KP --broker-pid $BPID --json --topic bench-p$P --create-topic --partitions $P \
  --records 3000000 --duration 20s --producers 1 --record-size 1024 --acks all --idempotent=true --compression none --timeout 3m >$OUT/load-p$P-$RUN.json &
LPID=$!
sleep 3
curl -s -o $OUT/cpu-p$P-$RUN.pprof "http://127.0.0.1:$HP/debug/pprof/profile?seconds=12"
wait $LPID
curl -s -o $OUT/allocs-p$P-$RUN.pprof "http://127.0.0.1:$HP/debug/pprof/allocs"
kill -TERM $BPID; wait $BPID || true
rm -rf $DATA
cat $OUT/load-p$P-$RUN.json
