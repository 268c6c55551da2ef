package main

// The torture mode: starts the real broker binary itself on free loopback
// ports and a temporary data directory, and runs phases against it:
//
//	kill    kill -9 loop under idempotent Kafka produce and queue traffic;
//	        every acknowledged record and send is checked at the end
//	frames  hostile Kafka frames on many connections, broker RSS sampled
//	http    hostile HTTP requests against every native route
//	disk    fill a small tmpfs until writes are refused, delete the topic,
//	        wait until writes are accepted again (root only)
//
// It prints one report (markdown, or JSON with --json) and exits 1 when an
// invariant of any phase failed. Every loop is bounded in time and count,
// and all traffic goes to 127.0.0.1.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

var torturePhaseNames = []string{"kill", "frames", "http", "disk"}

// torturePhaseShare is each phase's share of --duration when it has no
// duration flag of its own.
var torturePhaseShare = map[string]float64{"kill": 0.4, "frames": 0.2, "http": 0.2, "disk": 0.2}

type tortureConfig struct {
	brokerBin  string
	duration   time.Duration
	phases     []string
	phaseDur   map[string]time.Duration
	rssLimit   int64 // bytes
	seed       uint64
	workDir    string
	keep       bool
	jsonOut    bool
	killMin    time.Duration
	killMax    time.Duration
	frameConns int
	httpConns  int
	reclaim    time.Duration
	diskSize   int64
}

// TortureReport is the whole run.
type TortureReport struct {
	Started     time.Time      `json:"started"`
	Host        string         `json:"host"`
	GoVersion   string         `json:"go_version"`
	CPUs        int            `json:"cpus"`
	Broker      string         `json:"broker"`           // `broker version` output
	Commit      string         `json:"commit,omitempty"` // git describe of the current directory
	Command     string         `json:"command"`
	Seed        uint64         `json:"seed"`
	DurationSec float64        `json:"duration_sec"`
	OK          bool           `json:"ok"`
	Phases      []*PhaseReport `json:"phases"`
}

// PhaseReport is one phase: counts, checks and, where sampled, RSS.
type PhaseReport struct {
	Name        string      `json:"name"`
	Status      string      `json:"status"` // pass, fail, skipped
	Reason      string      `json:"reason,omitempty"`
	DurationSec float64     `json:"duration_sec"`
	Counts      []Count     `json:"counts"`
	Checks      []Check     `json:"checks"`
	RSS         *RSSReport  `json:"rss,omitempty"`
	Statuses    map[int]int `json:"http_statuses,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
	start       time.Time   `json:"-"`
	broker      *brokerProcess
}

// Count is one named counter of a phase, in the order it was added.
type Count struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// Check is one invariant of a phase.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// RSSReport is the broker's resident set during a phase, in MiB.
type RSSReport struct {
	Samples  int     `json:"samples"`
	IdleMiB  float64 `json:"idle_mib"`
	PeakMiB  float64 `json:"peak_mib"` // the highest sample, or VmHWM if higher
	EndMiB   float64 `json:"end_mib"`
	HWMMiB   float64 `json:"vmhwm_mib"`
	LimitMiB float64 `json:"limit_mib"`
}

func (p *PhaseReport) count(name string, v int64) {
	p.Counts = append(p.Counts, Count{name, v})
}

func (p *PhaseReport) check(name string, ok bool, format string, args ...any) {
	p.Checks = append(p.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

func (p *PhaseReport) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

func (p *PhaseReport) failed() bool {
	for _, c := range p.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

func runTortureMode(args []string) int {
	cfg, err := parseTortureFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "broker-load torture: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A hard bound on the whole run: each phase gets its time plus about
	// two minutes of setup, verification and shutdown.
	ctx, cancel := context.WithTimeout(ctx, cfg.runBound())
	defer cancel()

	report, err := runTorture(ctx, cfg, os.Stderr)
	if report != nil {
		if cfg.jsonOut {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(report)
		} else {
			fmt.Print(formatTortureReport(report))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "broker-load torture: %v\n", err)
		return 1
	}
	if !report.OK {
		return 1
	}
	return 0
}

// runBound is the hard bound on a whole run: the phases' own durations
// (after --<phase>-duration overrides, which --duration does not include)
// plus three minutes each for setup, verification and shutdown.
func (cfg *tortureConfig) runBound() time.Duration {
	var total time.Duration
	for _, p := range cfg.phases {
		total += cfg.phaseDur[p] + 3*time.Minute
	}
	return total
}

func parseTortureFlags(args []string) (*tortureConfig, error) {
	cfg := &tortureConfig{phaseDur: map[string]time.Duration{}}
	fs := flag.NewFlagSet("broker-load torture", flag.ContinueOnError)
	fs.StringVar(&cfg.brokerBin, "broker-bin", "", "broker binary to test (default: go build ./cmd/broker of the module in the current directory)")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Minute, "total time of the phases, split kill 40%, frames 20%, http 20%, disk 20% among the selected ones")
	phases := fs.String("phases", strings.Join(torturePhaseNames, ","), "comma-separated phases to run: kill, frames, http, disk")
	skip := fs.String("skip", "", "comma-separated phases not to run (applied after --phases)")
	phaseDur := map[string]*time.Duration{}
	for _, name := range torturePhaseNames {
		phaseDur[name] = fs.Duration(name+"-duration", 0, "duration of the "+name+" phase (0: its share of --duration)")
	}
	rssLimit := fs.String("rss-limit", "512MiB", "frames phase fails if the broker's peak RSS exceeds this (e.g. 512MiB, 2GiB)")
	fs.Uint64Var(&cfg.seed, "seed", 0, "random seed (0: from the clock; printed in the report)")
	fs.StringVar(&cfg.workDir, "work-dir", "", "directory for data directories and logs (default: a new temp dir, deleted unless --keep or a phase failed)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the work directory")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the report as JSON instead of markdown")
	fs.DurationVar(&cfg.killMin, "kill-interval-min", 1500*time.Millisecond, "kill phase: least time between restart and the next kill -9")
	fs.DurationVar(&cfg.killMax, "kill-interval-max", 5*time.Second, "kill phase: most time between restart and the next kill -9")
	fs.IntVar(&cfg.frameConns, "frame-conns", 32, "frames phase: concurrent hostile connections")
	fs.IntVar(&cfg.httpConns, "http-conns", 8, "http phase: concurrent hostile clients")
	fs.DurationVar(&cfg.reclaim, "disk-reclaim-wait", 60*time.Second, "disk phase: how long writes may stay refused after the topic is deleted")
	diskSize := fs.String("disk-size", "256MiB", "disk phase: size of the tmpfs")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name, d := range phaseDur {
		if *d < 0 {
			return nil, fmt.Errorf("--%s-duration must not be negative", name)
		}
		cfg.phaseDur[name] = *d
	}
	var err error
	if cfg.rssLimit, err = parseByteSize(*rssLimit); err != nil {
		return nil, fmt.Errorf("--rss-limit: %w", err)
	}
	if cfg.diskSize, err = parseByteSize(*diskSize); err != nil {
		return nil, fmt.Errorf("--disk-size: %w", err)
	}
	skipped := map[string]bool{}
	for _, s := range splitList(*skip) {
		if !isTorturePhase(s) {
			return nil, fmt.Errorf("--skip: %q is not a phase (kill, frames, http, disk)", s)
		}
		skipped[s] = true
	}
	for _, s := range splitList(*phases) {
		if !isTorturePhase(s) {
			return nil, fmt.Errorf("--phases: %q is not a phase (kill, frames, http, disk)", s)
		}
		if !skipped[s] {
			cfg.phases = append(cfg.phases, s)
		}
	}
	switch {
	case len(cfg.phases) == 0:
		return nil, errors.New("no phase left to run; see --phases and --skip")
	case cfg.duration <= 0 || cfg.duration > 24*time.Hour:
		return nil, errors.New("--duration must be positive and at most 24h")
	case cfg.killMin <= 0 || cfg.killMax < cfg.killMin:
		return nil, errors.New("--kill-interval-min must be positive and at most --kill-interval-max")
	case cfg.frameConns < 1 || cfg.frameConns > 1000:
		return nil, errors.New("--frame-conns must be between 1 and 1000")
	case cfg.httpConns < 1 || cfg.httpConns > 1000:
		return nil, errors.New("--http-conns must be between 1 and 1000")
	case cfg.rssLimit <= 0:
		return nil, errors.New("--rss-limit must be positive")
	case cfg.diskSize < 64<<20:
		return nil, errors.New("--disk-size must be at least 64MiB")
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	// Split --duration among the selected phases without a duration flag.
	share := 0.0
	for _, p := range cfg.phases {
		if cfg.phaseDur[p] == 0 {
			share += torturePhaseShare[p]
		}
	}
	for _, p := range cfg.phases {
		if cfg.phaseDur[p] == 0 {
			cfg.phaseDur[p] = time.Duration(float64(cfg.duration) * torturePhaseShare[p] / share).Round(time.Second)
		}
		if cfg.phaseDur[p] < 5*time.Second {
			cfg.phaseDur[p] = 5 * time.Second
		}
	}
	return cfg, nil
}

func isTorturePhase(s string) bool {
	for _, p := range torturePhaseNames {
		if s == p {
			return true
		}
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseByteSize parses 123, 64KiB, 512MiB, 2GiB (and KB/MB/GB as the same
// powers of two, as the broker's flags do not).
func parseByteSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("%q is not a byte size like 512MiB", s)
	}
	return n * mult, nil
}

// tortureEnv is what every phase shares.
type tortureEnv struct {
	cfg     *tortureConfig
	bin     string
	workDir string
	rng     *rand.Rand
	log     io.Writer
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (env *tortureEnv) logf(format string, args ...any) {
	fmt.Fprintf(env.log, "%s torture: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startPhaseBroker starts a fresh broker for a phase, with its own data
// directory under the work directory unless dataDir is given.
func (env *tortureEnv) startPhaseBroker(ctx context.Context, phase, dataDir string, args ...string) (*brokerProcess, error) {
	if dataDir == "" {
		dataDir = filepath.Join(env.workDir, phase+"-data")
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, err
		}
	}
	b, err := newBrokerProcess(env.bin, dataDir, filepath.Join(env.workDir, phase+"-broker.log"), args...)
	if err != nil {
		return nil, err
	}
	if err := b.startFresh(ctx); err != nil {
		return nil, err
	}
	env.logf("%s: broker pid %d, kafka %s, http %s, data %s", phase, b.pid(), b.kafkaAddr, b.httpAddr, dataDir)
	return b, nil
}

func runTorture(ctx context.Context, cfg *tortureConfig, log io.Writer) (*TortureReport, error) {
	started := time.Now()
	workDir := cfg.workDir
	if workDir == "" {
		d, err := os.MkdirTemp("", "broker-torture-")
		if err != nil {
			return nil, err
		}
		workDir = d
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	env := &tortureEnv{cfg: cfg, workDir: workDir, rng: newRand(cfg.seed), log: log}
	bin := cfg.brokerBin
	if bin == "" {
		env.logf("building ./cmd/broker")
		var err error
		if bin, err = buildBroker(ctx, workDir); err != nil {
			return nil, err
		}
	} else if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	env.bin = bin
	host, _ := os.Hostname()
	version, _ := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	report := &TortureReport{
		Started: started.UTC(), Host: host, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Broker: strings.TrimSpace(string(version)), Command: "broker-load torture " + strings.Join(os.Args[2:], " "),
		Seed: cfg.seed, OK: true,
	}
	if out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output(); err == nil {
		report.Commit = strings.TrimSpace(string(out))
	}
	for _, name := range cfg.phases {
		if ctx.Err() != nil {
			break
		}
		d := cfg.phaseDur[name]
		env.logf("phase %s: %v", name, d)
		p := &PhaseReport{Name: name, start: time.Now()}
		var err error
		switch name {
		case "kill":
			err = runKillPhase(ctx, env, p, d)
		case "frames":
			err = runFramesPhase(ctx, env, p, d)
		case "http":
			err = runHTTPPhase(ctx, env, p, d)
		case "disk":
			err = runDiskPhase(ctx, env, p, d)
		}
		if p.broker != nil {
			if p.broker.alive() {
				if serr := p.broker.stop(); serr != nil {
					p.check("clean shutdown", false, "SIGTERM at the end of the phase: %v", serr)
				} else {
					p.check("clean shutdown", true, "exit code 0 after SIGTERM")
				}
			}
			if line := p.broker.panicInLog(); line != "" {
				p.check("no panic in the broker log", false, "%.300s", line)
			}
		}
		p.DurationSec = time.Since(p.start).Seconds()
		switch {
		case errors.Is(err, errPhaseSkipped):
			p.Status = "skipped"
		case err != nil:
			p.check("phase ran to the end", false, "%v", err)
			p.Status = "fail"
		case p.failed():
			p.Status = "fail"
		default:
			p.Status = "pass"
		}
		if p.Status == "fail" {
			report.OK = false
			if p.broker != nil {
				env.logf("phase %s failed; broker log: %s", name, p.broker.logPath)
			}
		}
		env.logf("phase %s: %s", name, p.Status)
		report.Phases = append(report.Phases, p)
	}
	if ctx.Err() != nil && len(report.Phases) < len(cfg.phases) {
		report.OK = false
		report.Phases = append(report.Phases, &PhaseReport{Name: "run", Status: "fail", Checks: []Check{{Name: "all phases ran", Detail: ctx.Err().Error()}}})
	}
	report.DurationSec = time.Since(started).Seconds()
	if report.OK && !cfg.keep && cfg.workDir == "" {
		_ = os.RemoveAll(workDir)
	} else {
		env.logf("work directory kept: %s", workDir)
	}
	return report, nil
}

// formatTortureReport renders the report as markdown, ready to paste into
// TESTING.md.
func formatTortureReport(r *TortureReport) string {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "### Torture run %s: %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"), verdict)
	fmt.Fprintf(&b, "- command: `%s` (seed %d)\n", r.Command, r.Seed)
	var version []string
	for _, line := range strings.Split(r.Broker, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			version = append(version, line)
		}
	}
	commit := r.Commit
	if commit == "" {
		commit = "unknown (not a git checkout)"
	}
	fmt.Fprintf(&b, "- broker: %s; tree %s\n", strings.Join(version, "; "), commit)
	fmt.Fprintf(&b, "- machine: %s, %d CPUs, %s; total %s\n\n", r.Host, r.CPUs, r.GoVersion, fmtSeconds(r.DurationSec))
	b.WriteString("| phase | result | time | checks passed |\n|---|---|---:|---:|\n")
	for _, p := range r.Phases {
		ok := 0
		for _, c := range p.Checks {
			if c.OK {
				ok++
			}
		}
		res := p.Status
		if p.Reason != "" {
			res += ": " + p.Reason
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d/%d |\n", p.Name, res, fmtSeconds(p.DurationSec), ok, len(p.Checks))
	}
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "\n#### %s: %s\n\n", p.Name, p.Status)
		if p.Reason != "" {
			fmt.Fprintf(&b, "%s\n\n", p.Reason)
		}
		if len(p.Counts) > 0 {
			var parts []string
			for _, c := range p.Counts {
				parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Value))
			}
			fmt.Fprintf(&b, "Counts: %s.\n\n", strings.Join(parts, ", "))
		}
		if len(p.Statuses) > 0 {
			fmt.Fprintf(&b, "HTTP statuses: %s.\n\n", formatStatuses(p.Statuses))
		}
		if p.RSS != nil {
			fmt.Fprintf(&b, "Broker RSS: idle %.0f MiB, peak %.0f MiB (VmHWM %.0f), end %.0f MiB, limit %.0f MiB (%d samples).\n\n",
				p.RSS.IdleMiB, p.RSS.PeakMiB, p.RSS.HWMMiB, p.RSS.EndMiB, p.RSS.LimitMiB, p.RSS.Samples)
		}
		if len(p.Checks) > 0 {
			b.WriteString("| check | ok | detail |\n|---|---|---|\n")
			for _, c := range p.Checks {
				mark := "yes"
				if !c.OK {
					mark = "**NO**"
				}
				fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Name, mark, strings.ReplaceAll(c.Detail, "|", "\\|"))
			}
		}
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "\n- %s", n)
		}
		if len(p.Notes) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func fmtSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func formatStatuses(m map[int]int) string {
	classes := map[string]int{}
	var parts []string
	for code, n := range m {
		switch {
		case code == 0:
			classes["no response"] += n
		default:
			classes[fmt.Sprintf("%dxx", code/100)] += n
		}
	}
	for _, k := range []string{"2xx", "3xx", "4xx", "5xx", "no response"} {
		if classes[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, classes[k]))
		}
	}
	var codes []int
	for code := range m {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	var detail []string
	for _, c := range codes {
		if c != 0 {
			detail = append(detail, fmt.Sprintf("%d: %d", c, m[c]))
		}
	}
	return strings.Join(parts, ", ") + " (" + strings.Join(detail, ", ") + ")"
}
