#!/usr/bin/env bash
# bench/profile-queue.sh BATCH RUN: starts one broker on a fresh data dir, runs one
# broker-load queue of MESSAGES (default 200000) 1 KiB messages at BATCH per request
# (4 producers, then 4 consumers acking on their next receive), takes a CPU profile
# from 1 s in for PROFILE_SECONDS (default 20: both phases) and the allocation profile
# after it (BENCHMARKS.md, "Where the queue's time goes"). Binaries from BIN
# (go build -o $BIN/broker ./cmd/broker; likewise cmd/broker-load); FSYNC (always,
# the default, or never); profiles and results go to OUT (default $BIN/qprof).
# Split a profile by phase: go tool pprof -top -focus 'handleSend' ... / 'handleReceive'.
set -euo pipefail
BIN=${BIN:-/tmp/pm}
BATCH=$1; RUN=$2; OUT=${OUT:-$BIN/qprof}; mkdir -p "$OUT"
MESSAGES=${MESSAGES:-200000}; FSYNC=${FSYNC:-always}; SECS=${PROFILE_SECONDS:-20}
DATA=$(mktemp -d "${TMPDIR:-/tmp}/vibemq-qprof.XXXXXX")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
KP=$(free_port); HP=$(free_port)
"$BIN/broker" serve --data-dir "$DATA" --kafka-addr 127.0.0.1:$KP --http-addr 127.0.0.1:$HP --fsync "$FSYNC" \
	--log-level warn >"$OUT/broker-b$BATCH-$RUN.log" 2>&1 &
BPID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$HP) 2>/dev/null && break; sleep 0.1; done
"$BIN/broker-load" queue --target ours --addr 127.0.0.1:$HP --batch "$BATCH" --messages "$MESSAGES" --json \
	>"$OUT/load-b$BATCH-$RUN.json" &
LPID=$!
sleep 1
curl -s -o "$OUT/cpu-b$BATCH-$RUN.pprof" "http://127.0.0.1:$HP/debug/pprof/profile?seconds=$SECS"
wait $LPID
curl -s -o "$OUT/allocs-b$BATCH-$RUN.pprof" "http://127.0.0.1:$HP/debug/pprof/allocs"
kill -TERM $BPID; wait $BPID || true
rm -rf "$DATA"
cat "$OUT/load-b$BATCH-$RUN.json"
