package kafkaproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// acquireWithin runs acquire(n), giving up after d; the channel gets its result.
func acquireWithin(m *requestMemory, n int64, d time.Duration) (done chan bool) {
	done = make(chan bool, 1)
	cancel := make(chan struct{})
	go func() { done <- m.acquire(n, cancel) }()
	go func() { time.Sleep(d); close(cancel) }()
	return done
}

// TestRequestMemoryBlocksAndReleases pins the broker-wide budget of issue
// 17 (part 1): a reservation that does not fit waits, and is granted as
// soon as enough is released.
func TestRequestMemoryBlocksAndReleases(t *testing.T) {
	m := newRequestMemory(100)
	if !m.acquire(60, nil) {
		t.Fatal("first acquire failed")
	}
	got := make(chan bool, 1)
	go func() { got <- m.acquire(50, nil) }()
	waitFor(t, func() bool { return m.waiting() == 1 })
	select {
	case <-got:
		t.Fatal("acquire(50) granted while 60 of 100 are in use")
	case <-time.After(50 * time.Millisecond):
	}
	m.release(60)
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("acquire(50) failed after release")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acquire(50) still waiting after release")
	}
	if u := m.inUse.Load(); u != 50 {
		t.Fatalf("in use %d, want 50", u)
	}
	m.release(50)
	if u := m.inUse.Load(); u != 0 {
		t.Fatalf("in use %d, want 0", u)
	}
}

// TestRequestMemoryMaxFrameNotStarved pins the no-deadlock rule: a
// reservation of the whole budget (a frame of max-request-bytes when the
// budget equals it) waits only for the reservations granted before it;
// smaller ones arriving later queue behind it instead of overtaking it
// forever.
func TestRequestMemoryMaxFrameNotStarved(t *testing.T) {
	m := newRequestMemory(100)
	if !m.acquire(10, nil) {
		t.Fatal("acquire(10) failed")
	}
	big := make(chan bool, 1)
	go func() { big <- m.acquire(100, nil) }()
	waitFor(t, func() bool { return m.waiting() == 1 })
	small := acquireWithin(m, 10, 100*time.Millisecond)
	if <-small {
		t.Fatal("a small reservation overtook the waiting max-size one")
	}
	m.release(10)
	select {
	case <-big:
	case <-time.After(5 * time.Second):
		t.Fatal("max-size reservation not granted once everything was released")
	}
	small2 := make(chan bool, 1)
	go func() { small2 <- m.acquire(10, nil) }()
	waitFor(t, func() bool { return m.waiting() == 1 })
	m.release(100)
	if !<-small2 {
		t.Fatal("small reservation not granted after the max-size one was released")
	}
	m.release(10)
}

// TestRequestMemoryCancel: a waiter that gives up (connection stopping)
// holds nothing, and one queued behind it is granted if it fits.
func TestRequestMemoryCancel(t *testing.T) {
	m := newRequestMemory(100)
	m.acquire(50, nil)
	cancel := make(chan struct{})
	big := make(chan bool, 1)
	go func() { big <- m.acquire(80, cancel) }()
	waitFor(t, func() bool { return m.waiting() == 1 })
	small := make(chan bool, 1)
	go func() { small <- m.acquire(40, nil) }()
	waitFor(t, func() bool { return m.waiting() == 2 })
	close(cancel)
	if <-big {
		t.Fatal("cancelled acquire reported success")
	}
	select {
	case ok := <-small:
		if !ok {
			t.Fatal("acquire(40) failed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acquire(40) not granted after the waiter ahead of it gave up")
	}
	if u := m.inUse.Load(); u != 90 {
		t.Fatalf("in use %d, want 90", u)
	}
}

// offerRecorder records the largest buffer a reader was offered: how much
// readBody had allocated when it read.
type offerRecorder struct {
	r        io.Reader
	maxOffer int
}

func (o *offerRecorder) Read(p []byte) (int, error) {
	o.maxOffer = max(o.maxOffer, len(p))
	return o.r.Read(p)
}

// TestReadBodyAllocatesOnceReserved pins issue 17 (part 1): a peer that
// claims a 100 MiB frame and sends 4 KiB made the broker allocate 100 MiB
// before reading. The buffer offered to the socket stays within
// initialBodyBytes until beforeGrow (the reservation) has run; a refused
// reservation ends the read there.
func TestReadBodyAllocatesOnceReserved(t *testing.T) {
	for _, sent := range []int{4 << 10, 100 << 10, 1<<20 + 1, 3 << 20} {
		rec := &offerRecorder{r: bytes.NewReader(make([]byte, sent))}
		offeredBefore := -1
		refused := errors.New("no memory")
		_, err := readBody(rec, 100<<20, nil, func() error {
			offeredBefore = rec.maxOffer
			return refused
		})
		if sent < initialBodyBytes {
			if !errors.Is(err, io.ErrUnexpectedEOF) || offeredBefore != -1 {
				t.Fatalf("sent %d of 100 MiB: err %v, reservation ran: %v; want unexpected EOF before any reservation", sent, err, offeredBefore != -1)
			}
		} else if !errors.Is(err, refused) {
			t.Fatalf("sent %d of 100 MiB: err %v, want the reservation's", sent, err)
		}
		if rec.maxOffer > initialBodyBytes {
			t.Errorf("sent %d bytes of a 100 MiB frame: a buffer of %d bytes was offered before the size was reserved, want at most %d", sent, rec.maxOffer, initialBodyBytes)
		}
	}
	// A kept buffer is used whole, but the reservation still comes first.
	rec := &offerRecorder{r: bytes.NewReader(make([]byte, 4<<10))}
	reserved := false
	if _, err := readBody(rec, 8<<20, make([]byte, 8<<20), func() error { reserved = true; return nil }); !errors.Is(err, io.ErrUnexpectedEOF) || reserved {
		t.Fatalf("4 KiB of a claimed 8 MiB into a kept buffer: err %v, reserved %v; want unexpected EOF, nothing reserved", err, reserved)
	}
}

// TestReadBodyContents: the body comes back whole and exact whatever the
// size and however the bytes trickle in, with or without a kept buffer.
func TestReadBodyContents(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{8, 4095, 4096, 64 << 10, 64<<10 + 1, 1 << 20, 3<<20 + 7, 9 << 20} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for _, keptCap := range []int{0, size / 2, size, 16 << 20} {
			for name, r := range map[string]io.Reader{
				"whole": bytes.NewReader(want),
				"half":  iotest.HalfReader(bytes.NewReader(want)),
			} {
				calls := 0
				var kept []byte
				if keptCap > 0 {
					kept = make([]byte, keptCap)
				}
				got, err := readBody(r, size, kept, func() error { calls++; return nil })
				if err != nil {
					t.Fatalf("size %d kept %d %s: %v", size, keptCap, name, err)
				}
				if want := btoi(size > initialBodyBytes); calls != want {
					t.Fatalf("size %d kept %d %s: beforeGrow ran %d times, want %d", size, keptCap, name, calls, want)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d kept %d %s: body differs", size, keptCap, name)
				}
				if keptCap >= size && &got[0] != &kept[0] {
					t.Fatalf("size %d kept %d %s: the kept buffer was not used", size, keptCap, name)
				}
				putBuffer(got)
			}
		}
	}
	if _, err := readBody(bytes.NewReader(nil), 100, nil, nil); err != io.EOF {
		t.Fatalf("empty input: err %v, want EOF", err)
	}
}

// TestReadBodyKeptAllocatesNothing: a large frame read into the buffer the
// connection kept allocates nothing (before, every produce request of
// several MiB allocated its buffer again, and grew it twice).
func TestReadBodyKeptAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	// In a bubble, so that the idle release cannot fire meanwhile.
	synctest.Test(t, func(t *testing.T) {
		const size = 3<<20 + 7
		src := make([]byte, size)
		r := bytes.NewReader(src)
		var k keptBody
		defer k.close()
		k.keep(make([]byte, 4<<20))
		allocs := testing.AllocsPerRun(20, func() {
			r.Reset(src)
			body, err := readBody(r, size, k.take(), func() error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			k.keep(body)
		})
		if allocs != 0 {
			t.Fatalf("%v allocations per frame read into the kept buffer, want 0", allocs)
		}
	})
}

// TestKeptBodyReleasedWhenIdle: the kept buffer goes back to the pool
// keepBodyFor after the last frame, and at once on close.
func TestKeptBodyReleasedWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var k keptBody
		k.keep(make([]byte, 1<<20))
		time.Sleep(keepBodyFor - time.Millisecond)
		if b := k.take(); cap(b) != 1<<20 {
			t.Fatalf("kept buffer gone before keepBodyFor: cap %d", cap(b))
		} else {
			k.keep(b)
		}
		time.Sleep(keepBodyFor + time.Millisecond)
		if b := k.take(); b != nil {
			t.Fatalf("kept buffer of %d bytes still held after keepBodyFor idle", cap(b))
		}
		k.keep(make([]byte, 1<<20))
		k.close()
		if b := k.take(); b != nil {
			t.Fatal("kept buffer still held after close")
		}
		k.keep(make([]byte, 64<<20))
		if b := k.take(); b != nil {
			t.Fatalf("a buffer of %d bytes was kept, above maxKeptBodyBytes", cap(b))
		}
		k.close()
	})
}

// BenchmarkReadBody reads frame bodies from a bufio.Reader over an
// in-memory stream: "claimed" into a pooled buffer of the claimed size (the
// code before issue 17), "read" through readBody (the connection's path
// without a kept buffer), "kept" through readBody into the connection's
// kept buffer (its path from the second large frame on).
func BenchmarkReadBody(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20, 8 << 20} {
		src := make([]byte, size)
		for _, mode := range []string{"claimed", "read", "kept"} {
			b.Run(mode+"/"+byteSizeName(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				r := bytes.NewReader(src)
				var k keptBody
				defer k.close()
				for b.Loop() {
					r.Reset(src)
					var body []byte
					var err error
					switch mode {
					case "claimed":
						body = getBuffer(size)
						if _, err := io.ReadFull(r, body); err != nil {
							b.Fatal(err)
						}
						putBuffer(body)
					case "read":
						if body, err = readBody(r, size, nil, nil); err != nil {
							b.Fatal(err)
						}
						putBuffer(body)
					case "kept":
						if body, err = readBody(r, size, k.take(), nil); err != nil {
							b.Fatal(err)
						}
						k.keep(body)
					}
				}
			})
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func byteSizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// apiVersionsFrame is an ApiVersions v0 request frame.
func apiVersionsFrame(corr int32) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)
}

// TestServerStopsReadingWhenMemoryExhausted: over a real server, a
// connection holding the whole budget (a claimed max-size frame) makes
// another connection's request wait unread; when the holder goes away the
// waiting request is served. Shutdown stops a reader waiting for memory.
func TestServerStopsReadingWhenMemoryExhausted(t *testing.T) {
	s, addr := startTestServerConfig(t, Config{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 1 << 20})
	// A liar claiming the largest frame and sending 4 KiB reserves nothing.
	liar, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer liar.Close()
	if _, err := liar.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 4096)...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if u := s.memory.inUse.Load(); u != 0 {
		t.Fatalf("a claimed frame with 4 KiB sent reserved %d bytes", u)
	}
	holder, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// The claimed size is reserved once the first initialBodyBytes arrive.
	hdr := binary.BigEndian.AppendUint32(nil, 1<<20)
	if _, err := holder.Write(append(hdr, make([]byte, initialBodyBytes+4096)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.memory.inUse.Load() == 1<<20 })

	waiter, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if _, err := waiter.Write(apiVersionsFrame(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.memory.waiting() == 1 })
	_ = waiter.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [4]byte
	if _, err := waiter.Read(b[:]); err == nil {
		t.Fatal("a request was served while the request memory was exhausted")
	}
	holder.Close()
	_ = waiter.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(waiter, b[:]); err != nil {
		t.Fatalf("request not served after the memory was released: %v", err)
	}

	// Exhaust the budget again, queue a waiter, and shut down: Shutdown
	// must not hang on the reader waiting for memory.
	holder2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder2.Close()
	if _, err := holder2.Write(append(hdr, make([]byte, initialBodyBytes+1)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.memory.inUse.Load() == 1<<20 })
	if _, err := waiter.Write(apiVersionsFrame(2)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.memory.waiting() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown took %v with a reader waiting for memory", d)
	}
	if u := s.memory.inUse.Load(); u != 0 {
		t.Fatalf("after Shutdown %d bytes of request memory are still reserved", u)
	}
}

// TestServerIdleAndRequestReadTimeouts pins issue 17 (part 2): a
// connection that stops halfway through a frame, or sends nothing, stayed
// open forever. A connection that keeps sending requests is not closed.
func TestServerIdleAndRequestReadTimeouts(t *testing.T) {
	_, addr := startTestServerConfig(t, Config{ConnectionsMaxIdle: 600 * time.Millisecond, RequestReadTimeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedWithin := func(c net.Conn, d time.Duration) time.Duration {
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(d))
		var b [64]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("connection still open after %v", d)
				}
				return time.Since(start)
			}
		}
	}
	partial := dial()
	if _, err := partial.Write(apiVersionsFrame(1)[:7]); err != nil {
		t.Fatal(err)
	}
	if d := closedWithin(partial, 5*time.Second); d > 2*time.Second {
		t.Errorf("partial frame: closed after %v, want about 300ms", d)
	}
	idle := dial()
	if d := closedWithin(idle, 5*time.Second); d > 3*time.Second {
		t.Errorf("idle connection: closed after %v, want about 600ms", d)
	}
	busy := dial()
	for i := range int32(10) {
		if _, err := busy.Write(apiVersionsFrame(i)); err != nil {
			t.Fatalf("busy connection closed after %d requests: %v", i, err)
		}
		_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(busy, size[:]); err != nil {
			t.Fatalf("busy connection: request %d: %v", i, err)
		}
		if _, err := io.ReadFull(busy, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // 1.5s in all, well past the idle timeout
	}
}
