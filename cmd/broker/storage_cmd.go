package main

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/vibemq/broker/events"
	"github.com/vibemq/broker/httpapi"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/queues"
	"github.com/vibemq/broker/topics"
)

// storageCommand is `broker storage`: statistics, backup, restore,
// compaction and verification of a data directory, online through a
// running broker's HTTP API (--server) or offline on a stopped broker's
// data directory (--data-dir).
func storageCommand() *cli.Command {
	return &cli.Command{
		Name:  "storage",
		Usage: "storage management: stats, backup, restore, compact, verify",
		Description: "Online (default): through a running broker's HTTP API, --server. Offline: on the data\n" +
			"directory of a stopped broker, --data-dir (a running broker holds its lock and the\n" +
			"command refuses). Restore is offline only. Long operations draw a progress bar when\n" +
			"stderr is a terminal.\n" + clientExitCodes + " 7 verify found damage.",
		Subcommands: []*cli.Command{
			storageStatsCommand(), storageBackupCommand(), storageRestoreCommand(),
			storageCompactCommand(), storageVerifyCommand(),
		},
	}
}

const dataDirFlag = "data-dir"

func offlineFlag() cli.Flag {
	return &cli.StringFlag{Name: dataDirFlag, Usage: "work offline on this data directory of a stopped broker instead of --server"}
}

// openOffline opens a stopped broker's data directory. It refuses a
// directory that is not broker data (it never creates one) and one a
// running broker holds.
func openOffline(dir string) (*pebblestore.Store, error) {
	if err := pebblestore.CheckDataDir(dir); err != nil {
		return nil, &exitError{code: exitNotFound, err: err}
	}
	store, err := pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop(), CacheSize: 64 << 20})
	if err != nil {
		return nil, &exitError{code: exitUnavailable, err: fmt.Errorf("%v; to work on a running broker use --server instead of --data-dir", err)}
	}
	return store, nil
}

// storageOutput refuses positional arguments and returns the checked
// --output.
func storageOutput(cCtx *cli.Context) (string, error) {
	if cCtx.Args().Present() {
		return "", usageErrorf("storage %s takes no arguments, got %q; use flags", cCtx.Command.Name, cCtx.Args().First())
	}
	return outputFormat(cCtx)
}

// storageOnline runs a long operation on the broker at path with no
// timeout, drawing its progress on bar, and decodes the result into out.
func storageOnline(cCtx *cli.Context, path string, bar *progressBar, out any) error {
	c, err := newAPIClient(cCtx)
	if err != nil {
		return err
	}
	c.timeout = 0
	err = c.callProgress(cCtx.Context, apiCall{method: http.MethodPost, path: path, body: nil}, out, bar.update)
	bar.done()
	return err
}

func storageStatsCommand() *cli.Command {
	return &cli.Command{
		Name:   "stats",
		Usage:  "messages, topics, queues, dead letters, events and bytes of the store",
		Flags:  append([]cli.Flag{offlineFlag()}, clientFlags()...),
		Action: storageStats,
	}
}

func storageStats(cCtx *cli.Context) error {
	format, err := storageOutput(cCtx)
	if err != nil {
		return err
	}
	var stats httpapi.StorageStats
	if dir := cCtx.String(dataDirFlag); dir != "" {
		store, err := openOffline(dir)
		if err != nil {
			return err
		}
		defer store.Close()
		tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
		if err != nil {
			return fmt.Errorf("reading the topics of %s: %w", dir, err)
		}
		es, err := events.Open(store, tm, events.Config{Logger: zerolog.Nop()})
		if err != nil {
			return fmt.Errorf("reading the event stores of %s: %w", dir, err)
		}
		stats = httpapi.CollectStorageStats(httpapi.StorageConfig{Store: store, Topics: tm, Events: es})
	} else {
		c, err := newAPIClient(cCtx)
		if err != nil {
			return err
		}
		if _, err := c.call(cCtx.Context, apiCall{method: http.MethodGet, path: "/v1/admin/storage", query: nil, body: nil}, &stats); err != nil {
			return err
		}
	}
	out := cCtx.App.Writer
	if format == "json" {
		return printJSON(out, stats)
	}
	tw := newTable(out)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("data dir", stats.DataDir)
	row("messages", stats.Messages)
	row("topics", stats.Topics)
	row("partitions", stats.Partitions)
	if stats.Queues != nil {
		row("queues", *stats.Queues)
		row("dead letters", *stats.DeadLetters)
	}
	if stats.EventStores != nil {
		row("event stores", *stats.EventStores)
		row("events", *stats.Events)
		row("streams", *stats.Streams)
	}
	row("bytes", fmt.Sprintf("%d (%s)", stats.Bytes, humanBytes(int64(stats.Bytes))))
	row("sstables", fmt.Sprintf("%d (%s)", stats.Store.Tables, humanBytes(stats.Store.TablesBytes)))
	row("blob files", fmt.Sprintf("%d (%s)", stats.Store.BlobFiles, humanBytes(int64(stats.Store.BlobFilesBytes))))
	row("wal", humanBytes(int64(stats.Store.WALBytes)))
	row("memtables", humanBytes(int64(stats.Store.MemtableBytes)))
	row("compactions", stats.Store.Compactions)
	return tw.Flush()
}

func storageBackupCommand() *cli.Command {
	return &cli.Command{
		Name:  "backup",
		Usage: "copy the store, consistently, into a new directory that is itself a data directory",
		Description: "Online: the broker writes a Pebble checkpoint (the WAL flushed, sstables hard-linked)\n" +
			"and the FORMAT marker into --to, a path on the broker's machine, while it keeps serving.\n" +
			"Offline (--data-dir): the same on a stopped broker's directory. --to must not exist or be\n" +
			"empty. Restore with 'broker storage restore', or start a broker on the backup.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "backup directory (absolute, new or empty)", Required: true},
			offlineFlag(),
		}, clientFlags()...),
		Action: storageBackup,
	}
}

func storageBackup(cCtx *cli.Context) error {
	format, err := storageOutput(cCtx)
	if err != nil {
		return err
	}
	to, err := filepath.Abs(cCtx.String("to"))
	if err != nil {
		return usageErrorf("--to %q: %v", cCtx.String("to"), err)
	}
	var res httpapi.BackupResult
	if dir := cCtx.String(dataDirFlag); dir != "" {
		store, err := openOffline(dir)
		if err != nil {
			return err
		}
		defer store.Close()
		start := time.Now()
		info, err := store.Backup(to)
		if errors.Is(err, pebblestore.ErrTargetNotEmpty) {
			return &exitError{code: exitConflict, err: err}
		}
		if err != nil {
			return err
		}
		res = httpapi.BackupResult{BackupInfo: httpapi.BackupInfo(info), DurationMs: time.Since(start).Milliseconds()}
	} else {
		c, err := newAPIClient(cCtx)
		if err != nil {
			return err
		}
		c.timeout = 0 // a large store takes a while to checkpoint
		if _, err := c.call(cCtx.Context, apiCall{method: http.MethodPost, path: "/v1/admin/backup", query: nil, body: httpapi.BackupRequest{Dir: to}}, &res); err != nil {
			return err
		}
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, res)
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "backed up into %s: %d files, %s, in %v\n", res.Dir, res.Files, humanBytes(res.Bytes), time.Duration(res.DurationMs)*time.Millisecond)
	return err
}

func storageRestoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "restore a backup into a new data directory (offline: no broker may run on it)",
		Description: "Checks the backup's FORMAT marker (it must be this broker's format and complete),\n" +
			"refuses a --data-dir that holds anything or that a running broker holds, copies and\n" +
			"syncs every file, writes the marker last, then opens the result to prove it is usable.\n" +
			"Start the broker with --data-dir pointing at it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "backup directory", Required: true},
			&cli.StringFlag{Name: dataDirFlag, Usage: "new or empty data directory to restore into", Required: true},
			&cli.StringFlag{Name: outputFlag, Aliases: []string{"o"}, Usage: "output format: table or json", Value: "table"},
		},
		Action: storageRestore,
	}
}

func storageRestore(cCtx *cli.Context) error {
	format, err := storageOutput(cCtx)
	if err != nil {
		return err
	}
	from, dst := cCtx.String("from"), cCtx.String(dataDirFlag)
	if abs1, err1 := filepath.Abs(from); err1 == nil {
		if abs2, err2 := filepath.Abs(dst); err2 == nil && abs1 == abs2 {
			return usageErrorf("--from and --data-dir are the same directory")
		}
	}
	bar := newProgressBar(stderrOf(cCtx), "restore", "bytes")
	start := time.Now()
	info, err := pebblestore.Restore(from, dst, bar.update)
	bar.done()
	switch {
	case errors.Is(err, pebblestore.ErrNotBrokerData):
		return &exitError{code: exitFailure, err: fmt.Errorf("%v; nothing was changed", err)}
	case errors.Is(err, pebblestore.ErrTargetNotEmpty), errors.Is(err, pebblestore.ErrInUse):
		return &exitError{code: exitConflict, err: err}
	case err != nil:
		return err
	}
	// Prove the result opens and recovers.
	store, err := pebblestore.Open(dst, pebblestore.Options{Logger: zerolog.Nop(), CacheSize: 64 << 20})
	if err != nil {
		return fmt.Errorf("the restored directory %s does not open: %w", dst, err)
	}
	defer store.Close()
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), DefaultPartitions: 1})
	if err != nil {
		return fmt.Errorf("the restored directory %s does not recover: %w", dst, err)
	}
	stats := httpapi.CollectStorageStats(httpapi.StorageConfig{Store: store, Topics: tm})
	if format == "json" {
		return printJSON(cCtx.App.Writer, map[string]any{
			"data_dir": dst, "files": info.Files, "bytes": info.Bytes, "topics": stats.Topics,
			"messages": stats.Messages, "duration_ms": time.Since(start).Milliseconds(),
		})
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "restored %s into %s: %d files, %s; %d topics, %d messages\n",
		from, dst, info.Files, humanBytes(info.Bytes), stats.Topics, stats.Messages)
	return err
}

func storageCompactCommand() *cli.Command {
	return &cli.Command{
		Name:   "compact",
		Usage:  "compact the whole store to reclaim the space of deleted data",
		Flags:  append([]cli.Flag{offlineFlag()}, clientFlags()...),
		Action: storageCompact,
	}
}

func storageCompact(cCtx *cli.Context) error {
	format, err := storageOutput(cCtx)
	if err != nil {
		return err
	}
	bar := newProgressBar(stderrOf(cCtx), "compact", "ranges")
	var res httpapi.CompactResult
	if dir := cCtx.String(dataDirFlag); dir != "" {
		store, err := openOffline(dir)
		if err != nil {
			return err
		}
		defer store.Close()
		start := time.Now()
		res.BytesBefore = store.DiskUsage()
		err = store.CompactAll(func(done, total int) {
			res.Ranges = total
			bar.update(int64(done), int64(total))
		})
		bar.done()
		if err != nil {
			return err
		}
		res.DurationMs = time.Since(start).Milliseconds()
		res.BytesAfter = store.DiskUsage()
	} else {
		if err := storageOnline(cCtx, "/v1/admin/compact", bar, &res); err != nil {
			return err
		}
	}
	if format == "json" {
		return printJSON(cCtx.App.Writer, res)
	}
	_, err = fmt.Fprintf(cCtx.App.Writer, "compacted %d ranges in %v: %s before, %s after\n", res.Ranges,
		time.Duration(res.DurationMs)*time.Millisecond, humanBytes(int64(res.BytesBefore)), humanBytes(int64(res.BytesAfter)))
	return err
}

func storageVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "re-check the CRC of every stored record batch and report what is damaged",
		Description: "Checks each stored batch's CRC-32C, framing and base offset, and that batches and\n" +
			"their index rows match. Prints every damaged batch with its topic, partition, offset\n" +
			"and key, and exits 7 when there is any.",
		Flags:  append([]cli.Flag{offlineFlag()}, clientFlags()...),
		Action: storageVerify,
	}
}

func storageVerify(cCtx *cli.Context) error {
	format, err := storageOutput(cCtx)
	if err != nil {
		return err
	}
	bar := newProgressBar(stderrOf(cCtx), "verify", "batches")
	var res httpapi.VerifyResult
	if dir := cCtx.String(dataDirFlag); dir != "" {
		store, err := openOffline(dir)
		if err != nil {
			return err
		}
		defer store.Close()
		start := time.Now()
		r, err := topics.VerifyLog(store, topics.VerifyOptions{Progress: bar.update})
		bar.done()
		if err != nil {
			return &exitError{code: exitDamaged, err: fmt.Errorf("the store could not be read to the end: %w", err)}
		}
		res = httpapi.VerifyResult{OK: r.DamagedTotal == 0, VerifyReport: httpapi.NewVerifyReport(r), DurationMs: time.Since(start).Milliseconds()}
	} else {
		if err := storageOnline(cCtx, "/v1/admin/verify", bar, &res); err != nil {
			var ee *exitError
			var ae *apiError
			if errors.As(err, &ee) && errors.As(err, &ae) && ae.Code == "storage_corrupt" {
				ee.code = exitDamaged
			}
			return err
		}
	}
	out := cCtx.App.Writer
	if format == "json" {
		if err := printJSON(out, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "checked %d batches (%s) in %d partitions of %d topics in %v\n", res.Batches, humanBytes(res.Bytes),
			res.Partitions, res.Topics, time.Duration(res.DurationMs)*time.Millisecond)
		if len(res.Damaged) > 0 {
			tw := newTable(out)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET\tKEY\tPROBLEM")
			for _, d := range res.Damaged {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", d.Topic, d.Partition, d.Offset, d.Key, d.Reason)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	if !res.OK {
		more := ""
		if res.DamagedTotal > int64(len(res.Damaged)) {
			more = fmt.Sprintf(" (%d listed)", len(res.Damaged))
		}
		return &exitError{code: exitDamaged, err: fmt.Errorf("verify found %d damaged batch(es) or index rows%s", res.DamagedTotal, more)}
	}
	if format == "table" {
		_, err = fmt.Fprintln(out, "no damage found")
	}
	return err
}

// queueCounts counts queues and dead-lettered messages (the messages of
// dead-letter queues) for the storage statistics.
func queueCounts(qe *queues.Engine) func() (int64, int64) {
	return func() (qs, deadLetters int64) {
		after := ""
		for {
			page, next, err := qe.ListQueues("", after, 1000)
			if err != nil {
				return qs, deadLetters
			}
			for _, q := range page {
				if q.Kind == "dlq" {
					deadLetters += q.Available + q.Inflight
				} else {
					qs++
				}
			}
			if next == "" || len(page) == 0 {
				return qs, deadLetters
			}
			after = next
		}
	}
}
