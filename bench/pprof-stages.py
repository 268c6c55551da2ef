#!/usr/bin/env python3
"""bench/pprof-stages.py PROFILE...: CPU of a broker CPU profile by produce stage.

Each sample (from `go tool pprof -traces`) goes to the stage of the deepest frame
(closest to the leaf) that matches a stage pattern; samples with no match go to
"other". Prints each profile and, for several, the median share per stage
(BENCHMARKS.md, "Where the CPU per byte goes"). Run from the module root."""
import re, subprocess, sys, statistics

STAGES = [  # (stage, regex on the function name); later entries do not take precedence: depth does
    ("request read and decode", r"kafkaproto\.readBody|kafkaproto\.\(\*conn\)\.(readLoop|decode)|kafkaproto\.decodeBody|kmsg\.\(\*ProduceRequest\)\.ReadFrom|kafkaproto\.getBuffer|kafkaproto\.putBuffer"),
    ("produce handler and append bookkeeping", r"kafkaproto\.\(\*Server\)\.handleProduce|kafkaproto\.\(\*conn\)\.dispatch|topics\.\(\*Manager\)\.(Append|appendBatches)|topics\.\(\*Partition\)|topics\.\(\*producerState\)"),
    ("validation and CRC", r"topics\.ValidateBatch|topics\.validate|hash/crc32"),
    ("Pebble batch build", r"pebblestore\.\(\*Store\)\.NewBatchWithSize|pebblestore\.\(\*Batch\)\.Set|pebble/v2\.\(\*Batch\)\.(Set|prepareDeferredKeyValueRecord|grow)|pebble/v2\.\(\*DB\)\.NewBatchWithSize|pebble/v2\.newBatchWithSize"),
    ("WAL write", r"record\.\(\*LogWriter\)|pebble/v2/wal\.|pebble/v2\.\(\*DB\)\.commitWrite|commitPipeline\)\.prepare"),
    ("memtable insert", r"pebble/v2\.\(\*memTable\)\.(apply|prepare)|arenaskl\.|pebble/v2\.\(\*DB\)\.commitApply|commitPipeline\)\.publish"),
    ("Pebble commit pipeline, other", r"pebble/v2\.\(\*commitPipeline\)|pebble/v2\.\(\*DB\)\.(applyInternal|ApplyNoSyncWait|Apply|makeRoomForWrite)"),
    ("flush, compaction and blob/sstable write", r"pebble/v2\.\(\*DB\)\.(flush|compact|runCompaction|maybeScheduleFlush|runBlobFileRewrite)|pebble/v2/sstable|pebble/v2/internal/compact|pebble/v2/sstable/blob|pebble/v2\.\(\*compaction\)|pebble/v2\.\(\*flushableBatch|pebble/v2/objstorage"),
    ("fsync (CPU in the call)", r"syscall\.Fdatasync|syscall\.Fsync|\(\*File\)\.Sync|vfs\.\(\*syncingFile\)\.Sync|\.SyncData|\.SyncTo"),
    ("batch wait and commit release", r"pebble/v2\.\(\*Batch\)\.(SyncWait|Close|Reset)|pebblestore\.\(\*Batch\)\.(Wait|Close)|topics\.\(\*PendingAppend\)\.Wait"),
    ("response encode and write", r"kafkaproto\.\(\*conn\)\.(writeLoop|writeReply)|kmsg\.\(\*ProduceResponse\)\.AppendTo"),
    ("GC and runtime background", r"runtime\.gcBgMarkWorker|runtime\.bgsweep|runtime\.bgscavenge|runtime\.gcStart|runtime\.forEachP"),
    ("scheduler, netpoll, idle", r"runtime\.(schedule|findRunnable|netpoll|mcall|park_m|stopm|startm|sysmon)$"),
]
RX = [(name, re.compile(rx)) for name, rx in STAGES]

def classify(stack):
    # stack: leaf first
    for fn in stack:
        for name, rx in RX:
            if rx.search(fn):
                return name
    return "other"

def parse(path):
    out = subprocess.run(["go", "tool", "pprof", "-traces", path], capture_output=True, text=True, check=True).stdout
    totals, stack, val = {}, [], None
    for line in out.splitlines():
        if line.startswith("-----------"):
            if val is not None:
                st = classify(stack)
                totals[st] = totals.get(st, 0) + val
            stack, val = [], None
            continue
        m = re.match(r"^\s+([0-9.]+)(ms|s|us)\s+(\S.*)$", line)
        if m:
            v = float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)]
            val = v
            stack = [m.group(3).replace(" (inline)", "").strip()]
            continue
        if val is not None and line.strip() and not line.startswith("File:") :
            stack.append(line.replace(" (inline)", "").strip())
    if val is not None:
        st = classify(stack)
        totals[st] = totals.get(st, 0) + val
    return totals

if __name__ == "__main__":
    shares = {}
    for path in sys.argv[1:]:
        t = parse(path)
        tot = sum(t.values())
        print(f"{path}: {tot:.2f} s sampled")
        for k, v in sorted(t.items(), key=lambda kv: -kv[1]):
            print(f"  {k:45s} {v:7.2f} s {100*v/tot:5.1f} %")
            shares.setdefault(k, []).append(100 * v / tot)
    if len(sys.argv) > 2:
        print("median share:")
        for k, v in sorted(shares.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {k:45s} {statistics.median(v):5.1f} %  ({', '.join(f'{x:.1f}' for x in v)})")
