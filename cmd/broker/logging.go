package main

import (
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"
)

// logLevels maps the log-level values to zerolog levels.
var logLevels = map[string]zerolog.Level{
	"debug": zerolog.DebugLevel,
	"info":  zerolog.InfoLevel,
	"warn":  zerolog.WarnLevel,
	"error": zerolog.ErrorLevel,
}

// newLogger returns the root logger writing to w at level ("debug", "info",
// "warn", "error") in format ("json", "console", or "auto": console when w
// is a terminal, else json). Every entry carries a timestamp. Components
// derive sub-loggers with log.With().Str("component", "...").Logger(); the
// zerolog global logger is never used.
func newLogger(level, format string, w io.Writer) (zerolog.Logger, error) {
	lvl, ok := logLevels[level]
	if !ok {
		return zerolog.Nop(), fmt.Errorf("log-level %q is not one of debug, info, warn or error", level)
	}
	terminal := isTerminal(w)
	switch format {
	case "auto":
		if terminal {
			w = consoleWriter(w, terminal)
		}
	case "console":
		w = consoleWriter(w, terminal)
	case "json":
	default:
		return zerolog.Nop(), fmt.Errorf("log-format %q is not one of auto, json or console", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// consoleWriter renders entries for people; colors only on a terminal.
func consoleWriter(w io.Writer, color bool) io.Writer {
	return zerolog.ConsoleWriter{
		Out:        w,
		NoColor:    !color,
		TimeFormat: "2006-01-02T15:04:05.000Z07:00",
	}
}

// isTerminal reports whether w is a character device (a terminal). It
// avoids a terminal library; /dev/null also counts, which only selects the
// console format for output nobody reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
