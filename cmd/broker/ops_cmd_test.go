package main

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(append([]string{"broker"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHealthcheck: exit 0 while /readyz answers 200, 1 when it answers 503
// or nothing listens, 2 for a bad address; an unspecified host is asked on
// the loopback address.
func TestHealthcheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	if code, out, errOut := runCLI(t, "healthcheck", "--http-addr", ln.Addr().String()); code != 0 || out != "ready\n" {
		t.Fatalf("ready broker: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "healthcheck", "--http-addr", "0.0.0.0:"+port); code != 0 {
		t.Fatalf("0.0.0.0:port: exit %d: %s", code, errOut)
	}
	t.Setenv("BROKER_HTTP_ADDR", ":"+port)
	if code, _, errOut := runCLI(t, "healthcheck"); code != 0 {
		t.Fatalf("BROKER_HTTP_ADDR=:port: exit %d: %s", code, errOut)
	}
	ready = false
	if code, _, errOut := runCLI(t, "healthcheck"); code != 1 || !strings.Contains(errOut, "503") {
		t.Fatalf("not ready: exit %d, %q; want 1 naming the 503", code, errOut)
	}
	srv.Close()
	if code, _, _ := runCLI(t, "healthcheck"); code != 1 {
		t.Fatalf("nothing listening: exit %d, want 1", code)
	}
	if code, _, _ := runCLI(t, "healthcheck", "--http-addr", "no-port"); code != 2 {
		t.Fatalf("bad address: exit %d, want 2", code)
	}
}

// TestCompletion: the scripts are printed per shell, and urfave/cli's
// --generate-bash-completion (which they call) lists commands, subcommands
// and flags. With bash installed, the bash script completes "broker gr" to
// "groups" and "broker groups l" to "list lag" through the real binary.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -o bashdefault", "zsh": "#compdef broker", "fish": "complete -c broker"} {
		code, out, errOut := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, output lacks %q: %.200s %s", shell, code, want, out, errOut)
		}
	}
	if code, _, _ := runCLI(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	// urfave/cli reads os.Args when it completes: run the real binary.
	dir := t.TempDir()
	bin := filepath.Join(dir, "broker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	complete := func(args ...string) string {
		out, err := exec.Command(bin, append(args, "--generate-bash-completion")...).Output()
		if err != nil {
			t.Fatalf("broker %v --generate-bash-completion: %v", args, err)
		}
		return string(out)
	}
	out := complete()
	for _, cmd := range []string{"serve", "groups", "queue", "completion", "healthcheck"} {
		if !strings.Contains("\n"+out, "\n"+cmd+"\n") {
			t.Errorf("commands completion lacks %s: %q", cmd, out)
		}
	}
	if out := complete("groups"); !strings.Contains(out, "lag\n") || strings.Contains(out, "serve") {
		t.Errorf("completion of broker groups: %q, want its subcommands", out)
	}
	if out := complete("groups", "lag", "-"); !strings.Contains(out, "--bootstrap-server") {
		t.Errorf("flag completion of groups lag lacks --bootstrap-server: %q", out)
	}

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed; the script itself is not run")
	}
	_, script, _ := runCLI(t, "completion", "bash")
	for line, want := range map[string]string{"broker gr": "groups", "broker groups l": "list lag"} {
		words := strings.Fields(line)
		prog := script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" + string(rune('0'+len(words)-1)) +
			"\n_broker_complete\necho \"${COMPREPLY[*]}\"\n"
		cmd := exec.Command(bash, "-c", prog)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("bash completion of %q: %q (%v), want %q", line, got, err, want)
		}
	}
}

// TestVersionCommitFromLdflags: -X main.commit wins over the build info
// (Docker builds without .git), as the release build in README does.
func TestVersionCommitFromLdflags(t *testing.T) {
	old := commit
	t.Cleanup(func() { commit = old })
	commit = "0123abc"
	if got := readBuildInfo().commit; got != "0123abc" {
		t.Fatalf("commit %q, want the -X main.commit value", got)
	}
	_, out, _ := runCLI(t, "version")
	if !strings.Contains(out, "commit:         0123abc\n") {
		t.Fatalf("broker version:\n%s", out)
	}
}
