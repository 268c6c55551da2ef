package main

// The disk phase: the broker on a small tmpfs with disk-free-min; a topic
// is filled until the broker refuses writes (KAFKA_STORAGE_ERROR), the
// topic is deleted, and writes must be accepted again within
// --disk-reclaim-wait. It needs root (to mount the tmpfs) and is skipped
// with the reason otherwise.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	diskFillTopic   = "torture-fill"
	diskAfterTopic  = "torture-after"
	diskRecordBytes = 64 << 10
)

func runDiskPhase(ctx context.Context, env *tortureEnv, p *PhaseReport, d time.Duration) error {
	if os.Geteuid() != 0 {
		p.Reason = "needs root to mount a tmpfs"
		return errPhaseSkipped
	}
	mnt := filepath.Join(env.workDir, "disk-tmpfs")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", env.cfg.diskSize), "tmpfs", mnt).CombinedOutput()
	if err != nil {
		p.Reason = fmt.Sprintf("cannot mount a tmpfs: %v: %s", err, strings.TrimSpace(string(out)))
		return errPhaseSkipped
	}
	defer func() {
		if p.broker != nil && p.broker.alive() {
			// Stopped here, before the umount, not by runTorture.
			err := p.broker.stop()
			p.check("clean shutdown", err == nil, "SIGTERM at the end of the phase: %v", err)
		}
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			env.logf("disk: umount %s: %v: %s", mnt, err, out)
		}
	}()
	freeMin := env.cfg.diskSize / 4
	dataDir := filepath.Join(mnt, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	b, err := env.startPhaseBroker(ctx, "disk", dataDir,
		"--disk-free-min", fmt.Sprint(freeMin), "--memtable-size", fmt.Sprint(freeMin/8), "--cache-size", "16MiB")
	if err != nil {
		return err
	}
	p.broker = b
	k := &diskPhase{env: env, p: p, b: b, mnt: mnt, freeMin: freeMin}
	p.count("tmpfs MiB", mib(env.cfg.diskSize))
	p.count("disk-free-min MiB", mib(freeMin))
	p.count("free MiB at start", mib(k.free()))

	adm, admClient, err := newTortureAdmin(b.kafkaAddr)
	if err != nil {
		return err
	}
	defer admClient.Close()
	for _, t := range []string{diskFillTopic, diskAfterTopic} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafkaAddr), kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(15*time.Second),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()

	if refused := k.fillUntilRefused(ctx, cl, d); !refused {
		return nil
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	st, _, _ := httpJSON(ctx, hc, "PUT", "http://"+b.httpAddr+"/v1/queues/torture-disk", map[string]any{})
	st2, raw, err := httpJSON(ctx, hc, "POST", "http://"+b.httpAddr+"/v1/queues/torture-disk/messages", map[string]any{"messages": []any{map[string]any{"body": "x"}}})
	p.check("queue send refused with 507 while low", err == nil && st2 == http.StatusInsufficientStorage,
		"create %d, send %d %.200s %v", st, st2, raw, err)
	k.deleteAndResume(ctx, adm, cl)
	p.check("broker alive at the end", b.alive(), "exit: %v", b.exitErr())
	return nil
}

// mib is n bytes in MiB, rounded down.
func mib(n int64) int64 { return n >> 20 }

// diskPhase is one run of the disk phase: its broker on a tmpfs mounted at
// mnt, started with --disk-free-min freeMin.
type diskPhase struct {
	env     *tortureEnv
	p       *PhaseReport
	b       *brokerProcess
	mnt     string
	freeMin int64
}

// free is the free space of the tmpfs, -1 if unknown.
func (k *diskPhase) free() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(k.mnt, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // Bsize is uint32 on some platforms
}

// fillUntilRefused produces incompressible records for at most d until
// the broker refuses one, and checks that it stayed alive and refused
// with KAFKA_STORAGE_ERROR. It reports whether a write was refused with
// the broker alive (the rest of the phase needs it).
func (k *diskPhase) fillUntilRefused(ctx context.Context, cl *kgo.Client, d time.Duration) bool {
	env, p, b := k.env, k.p, k.b
	fillCtx, stopFill := context.WithTimeout(ctx, d)
	defer stopFill()
	// Random values: nothing on the way (client, Pebble) can compress them.
	value := make([]byte, diskRecordBytes)
	for i := range value {
		value[i] = byte(env.rng.Uint32())
	}
	var accepted int64
	var refusal error
	fillStart := time.Now()
	for accepted < 2*env.cfg.diskSize && fillCtx.Err() == nil {
		recs := make([]*kgo.Record, 16)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: diskFillTopic, Value: value}
		}
		results := cl.ProduceSync(fillCtx, recs...)
		for _, r := range results {
			if r.Err == nil {
				accepted += int64(len(r.Record.Value))
			} else if refusal == nil {
				refusal = r.Err
			}
		}
		if refusal != nil {
			break
		}
	}
	fillTime := time.Since(fillStart)
	p.count("MiB accepted before refusal", mib(accepted))
	p.count("fill ms", fillTime.Milliseconds())
	p.count("free MiB when refused", mib(k.free()))
	if !b.alive() {
		p.check("broker alive while the disk fills", false, "exit: %v; log tail: %.500s", b.exitErr(), b.logTail(500))
		return false
	}
	p.check("broker alive while the disk fills", true, "")
	if refusal == nil {
		p.check("writes refused with KAFKA_STORAGE_ERROR", false, "nothing refused after %d MiB in %v (the phase's time ran out first: give it more with --disk-duration)",
			mib(accepted), fillTime.Round(time.Millisecond))
		return false
	}
	p.check("writes refused with KAFKA_STORAGE_ERROR", errors.Is(refusal, kerr.KafkaStorageError),
		"after %d MiB in %v: %v", mib(accepted), fillTime.Round(time.Millisecond), refusal)
	return true
}

// deleteAndResume deletes the filled topic and checks that writes are
// accepted again within --disk-reclaim.
func (k *diskPhase) deleteAndResume(ctx context.Context, adm *kadm.Client, cl *kgo.Client) {
	env, p := k.env, k.p
	resp, err := adm.DeleteTopics(ctx, diskFillTopic)
	if err == nil {
		err = resp.Error()
	}
	p.check("DeleteTopics while low", err == nil, "%v", err)
	deleted := time.Now()
	var lastErr error
	accepting := false
	for time.Since(deleted) < env.cfg.reclaim && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lastErr = cl.ProduceSync(pctx, &kgo.Record{Topic: diskAfterTopic, Value: []byte("after")}).FirstErr()
		cancel()
		if lastErr == nil {
			accepting = true
			break
		}
		sleepCtx(ctx, time.Second)
	}
	p.count("free MiB after the delete", mib(k.free()))
	p.count("ms from the delete to the first accepted write (or giving up)", time.Since(deleted).Milliseconds())
	p.check("writes accepted again after the topic was deleted", accepting,
		"within %v: %v (free %d MiB, resume at disk-free-min + 25%% = %d MiB)", env.cfg.reclaim, lastErr, mib(k.free()), mib(k.freeMin+k.freeMin/4))
}
