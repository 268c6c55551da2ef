// Command broker is a Kafka-compatible message broker over one Pebble
// store. "broker serve" runs it; other subcommands administer it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/vibemq/broker/pebblestore"
)

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3". Otherwise the module version from the
// build info is used, if any.
var version = "dev"

// commit is the VCS revision, set at build time with
// -ldflags "-X main.commit=$(git rev-parse HEAD)" where the Go toolchain
// cannot stamp it (a Docker build without .git). Otherwise it comes from the
// build info: "go build" in a git checkout stamps vcs.revision itself.
var commit = ""

// Exit codes of the broker command.
const (
	exitOK      = 0
	exitFailure = 1 // the broker failed while running, or a command failed
	exitUsage   = 2 // bad configuration, flags or arguments: nothing was started
)

func main() {
	// The process owns zerolog's global settings; libraries never touch them.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	os.Exit(realMain(os.Args, os.Stdout, os.Stderr))
}

// realMain runs the app with args and returns the exit code. Errors are
// printed to stderr here, once; urfave/cli never calls os.Exit.
func realMain(args []string, stdout, stderr io.Writer) int {
	app := newApp()
	app.Writer = stdout
	app.ErrWriter = stderr
	for _, cmd := range app.Commands {
		setUsageErrorHandlers(cmd)
	}
	return exitCode(app.Run(args), stderr)
}

// newApp returns the broker command line. Add subcommands to Commands.
func newApp() *cli.App {
	return &cli.App{
		Name:        "broker",
		Usage:       "a Kafka-compatible message broker on one Pebble store",
		HideVersion: true,
		// --generate-bash-completion, used by "broker completion" scripts.
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // realMain prints and exits
		OnUsageError:         usageError,
		Action:               unknownCommand,
		Commands: []*cli.Command{
			serveCommand(),
			versionCommand(),
			topicsCommand(),
			eventsCommand(), storageCommand(),
			queueCommand(), dlqCommand(),
			groupsCommand(),
			transactionsCommand(),
			usersCommand(),
			aclsCommand(),
			quotasCommand(),
			clusterCommand(),
			healthcheckCommand(),
			completionCommand(),
		},
	}
}

// serveCommand runs the broker until SIGINT or SIGTERM.
func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the broker",
		Description: "Serves Kafka clients on kafka-addr and health, metrics and the native API on http-addr.\n" +
			"Every flag can also be set as a BROKER_* environment variable or a key of the --config file;\n" +
			"a flag wins over the environment, the environment over the file. See config.example.yaml.",
		Flags:  configFlags(),
		Action: serve,
	}
}

func serve(cCtx *cli.Context) error {
	if cCtx.Args().Present() {
		return usageErrorf("serve takes no arguments, got %q; give settings as flags, e.g. --data-dir ./data", cCtx.Args().First())
	}
	cfg, err := loadConfig(cCtx.String(configFlag), os.Environ(), cliFlagLookup(cCtx))
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat, cCtx.App.ErrWriter)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}

	info := readBuildInfo()
	start := log.Info().Str("version", info.version).Str("commit", info.commit).Uint64("storage_format", uint64(pebblestore.FormatVersion))
	for i := range configKeys {
		k := &configKeys[i]
		start = start.Str(k.name, k.get(cfg))
	}
	start.Msg("starting broker")
	if cfg.Fsync == "never" {
		log.Warn().Msg("fsync is never (relaxed mode): writes are acknowledged before they reach the disk and can be lost if the machine crashes; use fsync: always unless that is acceptable")
	}

	ctx, cancel := context.WithCancel(cCtx.Context)
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	stopWatching := watchSignals(signals, cancel, log, os.Exit)
	defer stopWatching()

	err = run(ctx, cfg, log)
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		return &exitError{code: exitFailure, err: err}
	}
	return nil
}

// watchSignals cancels the broker's context on the first signal and calls
// exit(1) on the second, for when a graceful shutdown hangs. The returned
// function stops watching.
func watchSignals(signals <-chan os.Signal, cancel context.CancelFunc, log zerolog.Logger, exit func(int)) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case sig := <-signals:
			log.Info().Str("signal", sig.String()).Msg("shutting down; send the signal again to exit at once")
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-signals:
			log.Error().Str("signal", sig.String()).Msg("second signal: exiting without a clean shutdown")
			exit(exitFailure)
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// versionCommand prints what the binary is and which data it reads.
func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit, Go version and storage format",
		Action: func(cCtx *cli.Context) error {
			if cCtx.Args().Present() {
				return usageErrorf("version takes no arguments, got %q", cCtx.Args().First())
			}
			info := readBuildInfo()
			_, err := fmt.Fprintf(cCtx.App.Writer,
				"version:        %s\ncommit:         %s\ngo:             %s %s/%s\nstorage format: %d\n",
				info.version, info.commit, info.goVersion, runtime.GOOS, runtime.GOARCH, pebblestore.FormatVersion)
			return err
		},
	}
}

type buildInfo struct {
	version   string
	commit    string
	goVersion string
}

// readBuildInfo reads the version and VCS commit embedded by the Go
// toolchain. The commit is "unknown" in builds without VCS stamping
// (-buildvcs=false, go run outside a repository).
func readBuildInfo() buildInfo {
	info := buildInfo{version: version, commit: "unknown", goVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if commit != "" {
			info.commit = commit
		}
		return info
	}
	if info.version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.version = bi.Main.Version
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.commit != "unknown" {
		info.commit += " (modified)"
	}
	if commit != "" {
		info.commit = commit
	}
	return info
}

// exitError carries the exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// usageError turns a flag parsing error into exit code 2 with a hint.
func usageError(cCtx *cli.Context, err error, _ bool) error {
	command := "broker"
	if cCtx.Command != nil && cCtx.Command.Name != "" && cCtx.Command.Name != cCtx.App.Name {
		command += " " + cCtx.Command.Name
	}
	message := err.Error()
	const undefined = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(message, undefined); ok {
		var flags []cli.Flag
		if cCtx.Command != nil && cCtx.Command.Name != cCtx.App.Name {
			flags = cCtx.Command.Flags
		} else {
			flags = cCtx.App.Flags
		}
		var names []string
		for _, f := range flags {
			for _, n := range f.Names() {
				names = append(names, "--"+n)
			}
		}
		message = "unknown flag -" + name
		if hint := didYouMean(name, names); hint != "" {
			return usageErrorf("%s: %s%s", command, message, hint)
		}
	}
	return usageErrorf("%s: %s; run '%s --help' for the flags", command, message, command)
}

// setUsageErrorHandlers gives cmd and its subcommands the usage error
// handler, unless they have their own.
func setUsageErrorHandlers(cmd *cli.Command) {
	if cmd.OnUsageError == nil {
		cmd.OnUsageError = usageError
	}
	for _, sub := range cmd.Subcommands {
		setUsageErrorHandlers(sub)
	}
}

// unknownCommand is the root action: help without arguments, an error for
// a command that does not exist.
func unknownCommand(cCtx *cli.Context) error {
	if !cCtx.Args().Present() {
		return cli.ShowAppHelp(cCtx)
	}
	var names []string
	for _, cmd := range cCtx.App.Commands {
		names = append(names, cmd.Names()...)
	}
	name := cCtx.Args().First()
	if hint := didYouMean(name, names); hint != "" {
		return usageErrorf("unknown command %q%s", name, hint)
	}
	return usageErrorf("unknown command %q; run 'broker help' for the commands", name)
}

// exitCode prints err to stderr and returns the process exit code. Usage
// and configuration errors are printed one problem per line; a failure of
// the running broker as one line.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		code = coder.ExitCode()
	}
	message := err.Error()
	if code != exitUsage {
		message = strings.ReplaceAll(message, "\n", "; ")
	}
	for line := range strings.SplitSeq(message, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "broker") {
			line = "broker: " + line
		}
		fmt.Fprintln(stderr, line)
	}
	return code
}
