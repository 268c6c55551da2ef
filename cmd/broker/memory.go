package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
)

// requestMemoryBudgetMax caps the derived request memory budget.
const requestMemoryBudgetMax = 1 << 30

// requestMemoryBudget is the queued-max-request-bytes the Kafka listener
// uses: the configured value, or, for 0, min(memory/8, 1GiB) where memory
// is the machine's or the container's (whichever is smaller; 1GiB when
// neither can be read), and never less than max-request-bytes, so that a
// request of the largest size can always be read. source says how the
// value was chosen, for the start-up log.
func requestMemoryBudget(cfg *Config, memory int64) (budget int64, source string) {
	if cfg.QueuedMaxRequestBytes > 0 {
		return cfg.QueuedMaxRequestBytes, "configured"
	}
	budget, source = requestMemoryBudgetMax, "default (memory unknown)"
	if memory > 0 {
		budget, source = min(memory/8, requestMemoryBudgetMax), "1/8 of memory, at most 1GiB"
	}
	if budget < int64(cfg.MaxRequestBytes) {
		budget, source = int64(cfg.MaxRequestBytes), "max-request-bytes (1/8 of memory is less)"
	}
	return budget, source
}

// goMemoryLimit is Go's soft memory limit for the process: memory-limit
// when set; else none to set when the GOMEMLIMIT environment variable
// (env) is set, as Go's runtime read it already; else 90% of memory (the
// machine's or the container's, whichever is smaller), leaving a tenth for
// memory outside Go's accounting (cgo allocations, the binary, the page
// tables); none when memory is unknown. limit 0 means leave Go's setting
// as it is. source says how the value was chosen, for the start-up log.
func goMemoryLimit(cfg *Config, memory int64, env string) (limit int64, source string) {
	switch {
	case cfg.MemoryLimit > 0:
		return cfg.MemoryLimit, "configured"
	case env != "":
		return 0, "GOMEMLIMIT"
	case memory <= 0:
		return 0, "none (memory unknown)"
	}
	return memory / 10 * 9, "90% of memory"
}

// setMemoryLimit sets Go's soft memory limit (goMemoryLimit) and logs it.
// It works with the GC tuner (gcHeadroom): the tuner raises GOGC so that
// the heap grows by a headroom between collections, and the limit makes
// the collector work harder anyway once the process nears it.
func setMemoryLimit(cfg *Config, log zerolog.Logger) {
	limit, source := goMemoryLimit(cfg, systemMemory(), os.Getenv("GOMEMLIMIT"))
	if limit <= 0 {
		log.Info().Int64("memory_limit", debug.SetMemoryLimit(-1)).Str("source", source).Msg("Go soft memory limit left as it is")
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info().Int64("memory_limit", limit).Str("source", source).Msg("Go soft memory limit")
	if store := cfg.CacheSize + 4*cfg.MemtableSize; limit < store {
		log.Warn().Int64("memory_limit", limit).Int64("cache_and_memtables", store).
			Msg("memory-limit is below cache-size + 4 x memtable-size: the garbage collector may run almost continuously (BENCHMARKS.md: 5x the CPU per GB consumed); raise memory-limit or lower cache-size")
	}
}

// httpBodyBudget bounds and floors the derived HTTP request body budget.
const (
	httpBodyBudgetMax = 256 << 20
	httpBodyBudgetMin = 32 << 20
)

// httpBodyBudget is the http-max-inflight-body-bytes the HTTP listener
// uses: the configured value, or, for 0, min(memory/16, 256MiB) and at
// least 32MiB (twice the largest body); 256MiB when memory is unknown.
// 1/16 beside the Kafka budget's 1/8: native API bodies are at most 17MiB,
// so 256MiB is already 15 of the largest in flight at once.
func httpBodyBudget(cfg *Config, memory int64) (budget int64, source string) {
	if cfg.HTTPMaxInflightBodyBytes > 0 {
		return cfg.HTTPMaxInflightBodyBytes, "configured"
	}
	if memory <= 0 {
		return httpBodyBudgetMax, "default (memory unknown)"
	}
	return max(min(memory/16, httpBodyBudgetMax), httpBodyBudgetMin), "1/16 of memory, from 32MiB to 256MiB"
}

// systemMemory returns the memory the process may use: the smaller of the
// machine's (MemTotal of /proc/meminfo) and its cgroup's limit (v2
// memory.max or v1 memory.limit_in_bytes); 0 when none can be read.
func systemMemory() int64 {
	var limits []int64
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					limits = append(limits, kb<<10)
				}
			}
		}
	}
	for _, path := range cgroupMemoryLimitFiles() {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// "max" (v2) or a huge number (v1) means no limit.
		if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && n > 0 && n < 1<<60 {
			limits = append(limits, n)
		}
	}
	if len(limits) == 0 {
		return 0
	}
	return slices.Min(limits)
}

// cgroupMemoryLimitFiles lists the files that may hold this process's
// cgroup memory limit: the cgroup v2 file of its own cgroup and of the
// namespace root, and the cgroup v1 one.
func cgroupMemoryLimitFiles() []string {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return files
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok && rest != "/" && rest != "" {
			files = append(files, filepath.Join("/sys/fs/cgroup", rest, "memory.max"))
		}
	}
	return files
}

// gcHeadroomMax caps the derived garbage collector headroom.
const gcHeadroomMax = 128 << 20

// gcHeadroom is how far the Go heap may grow past its live size between
// collections (internal/gctuner): min(memory/16, 128MiB), 128MiB when
// memory is unknown. Produce allocates about two bytes per byte received
// (Pebble's flush buffers); with Go's default the collector ran 70-120
// times per gigabyte produced (5-9 % of the broker's CPU), with 128MiB 17-19
// times (1-2 %), for about 100MB more peak RSS under load (BENCHMARKS.md).
// GOGC in the environment turns the tuner off.
func gcHeadroom(memory int64) uint64 {
	if memory <= 0 {
		return gcHeadroomMax
	}
	return uint64(min(memory/16, gcHeadroomMax))
}
