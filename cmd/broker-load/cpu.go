package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
// /proc/PID/stat. The kernel exports them in USER_HZ whatever its internal
// HZ, and USER_HZ is 100 on every Linux architecture Go supports
// (`getconf CLK_TCK`).
const clockTicksPerSecond = 100

// processCPUSeconds returns utime+stime of process pid, in seconds, from
// /proc/PID/stat (fields 14 and 15, see proc_pid_stat(5)). Threads are
// included; children are not. Resolution is 1/clockTicksPerSecond.
func processCPUSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(stat)
}

// parseProcStatCPU parses a /proc/PID/stat line. Field 2, comm, is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseProcStatCPU(stat []byte) (float64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("proc stat: no ')' in %q", stat)
	}
	// After ")": field 3 (state) is the first; utime is field 14, stime 15.
	fields := bytes.Fields(stat[end+1:])
	const utimeIndex, stimeIndex = 14 - 3, 15 - 3
	if len(fields) <= stimeIndex {
		return 0, fmt.Errorf("proc stat: %d fields after comm, want more than %d", len(fields), stimeIndex)
	}
	utime, err := strconv.ParseUint(string(fields[utimeIndex]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(string(fields[stimeIndex]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat stime: %w", err)
	}
	return float64(utime+stime) / clockTicksPerSecond, nil
}

// cpuMeter measures the CPU a broker process uses over a phase, and its
// resident memory: at the end of the phase and at its peak. A zero pid
// measures nothing.
type cpuMeter struct {
	pid   int
	start float64
	err   error
	// peakReset is whether the kernel's peak RSS (VmHWM) was reset at the
	// start, so that the peak is the phase's own.
	peakReset bool
}

func startCPUMeter(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid}
	if pid != 0 {
		m.peakReset = resetPeakRSS(pid) == nil
		m.start, m.err = processCPUSeconds(pid)
	}
	return m
}

// resetPeakRSS resets VmHWM of process pid to its current RSS: writing 5
// to /proc/PID/clear_refs (proc(5); the broker must be ours or we root).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// processRSS returns VmRSS and VmHWM (peak) of process pid in bytes, from
// /proc/PID/status.
func processRSS(pid int) (rss, peak int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseProcStatusRSS(status)
}

// parseProcStatusRSS reads the VmRSS and VmHWM lines ("VmRSS:    1234 kB")
// of a /proc/PID/status file.
func parseProcStatusRSS(status []byte) (rss, peak int64, err error) {
	found := 0
	for line := range bytes.Lines(status) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "VmRSS" && string(name) != "VmHWM") {
			continue
		}
		fields := bytes.Fields(value)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return 0, 0, fmt.Errorf("proc status: unexpected %s line %q", name, line)
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("proc status %s: %w", name, err)
		}
		if string(name) == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("proc status: no VmRSS and VmHWM lines")
	}
	return rss, peak, nil
}

// stop fills r's broker CPU fields; movedBytes is what the phase moved.
func (m *cpuMeter) stop(r *Result, movedBytes int64) {
	if m.pid == 0 {
		return
	}
	end, err := processCPUSeconds(m.pid)
	if m.err != nil || err != nil {
		fmt.Fprintf(os.Stderr, "broker-load: broker CPU of pid %d: %v\n", m.pid, firstNonNil(m.err, err))
		return
	}
	if rss, peak, err := processRSS(m.pid); err == nil {
		r.BrokerRSSMB = round(float64(rss)/bytesPerMB, 1)
		if m.peakReset {
			r.BrokerPeakRSSMB = round(float64(peak)/bytesPerMB, 1)
		}
	} else {
		fmt.Fprintf(os.Stderr, "broker-load: broker RSS of pid %d: %v\n", m.pid, err)
	}
	seconds := round(end-m.start, 2)
	r.BrokerCPUSeconds = &seconds
	if movedBytes > 0 {
		perGB := round(seconds/(float64(movedBytes)/bytesPerGB), 3)
		r.BrokerCPUSecondsPerGB = &perGB
	}
}

// perMessageUs is the process's CPU time since start per message, in
// microseconds (0 without a pid or messages, or when /proc cannot tell).
func (m *cpuMeter) perMessageUs(messages int) float64 {
	if m.pid == 0 || messages == 0 {
		return 0
	}
	end, err := processCPUSeconds(m.pid)
	if m.err != nil || err != nil {
		fmt.Fprintf(os.Stderr, "broker-load: server CPU of pid %d: %v\n", m.pid, firstNonNil(m.err, err))
		return 0
	}
	return round((end-m.start)*1e6/float64(messages), 1)
}

func firstNonNil(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
