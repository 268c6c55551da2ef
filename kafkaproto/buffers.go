package kafkaproto

import (
	"io"
	"sync"
	"time"
)

// Request bodies and fetch read buffers are recycled: allocating (and
// zeroing) a fresh megabyte for every produce request and every partition of
// every fetch was a visible share of the broker's CPU.
//
// Buffers are pooled by power-of-two size class from 4 KiB to 8 MiB; larger
// ones are left to the garbage collector.
const (
	minPooledShift = 12
	maxPooledShift = 23
)

var bufferPools [maxPooledShift - minPooledShift + 1]sync.Pool

func sizeClass(n int) int {
	c := minPooledShift
	for c <= maxPooledShift && 1<<c < n {
		c++
	}
	return c
}

// getBuffer returns a slice of length n whose contents are undefined.
func getBuffer(n int) []byte {
	c := sizeClass(n)
	if c > maxPooledShift {
		return make([]byte, n)
	}
	if p, ok := bufferPools[c-minPooledShift].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuffer recycles b. The caller must not use b afterwards.
func putBuffer(b []byte) {
	c := cap(b)
	if c < 1<<minPooledShift || c > 1<<maxPooledShift || c&(c-1) != 0 {
		return
	}
	pool(b[:0])
}

// pool puts b into its size class's pool. Apart from putBuffer so that the
// calls that pool nothing (nil, odd sizes) do not allocate: &b moves b to
// the heap.
func pool(b []byte) {
	bufferPools[sizeClass(cap(b))-minPooledShift].Put(&b)
}

// initialBodyBytes is the most a connection allocates for a request body
// before the body's bytes arrive.
const initialBodyBytes = 64 << 10

// readBody reads a frame body of size bytes from r. A frame of at most
// initialBodyBytes is read into a buffer of its size. A larger one is read
// in two steps: its first initialBodyBytes into a buffer of that size; then
// beforeGrow runs (the connection reserves the claimed size from the
// request memory budget there; its error ends the read); then the buffer is
// replaced by one of the claimed size (one copy of initialBodyBytes) and
// the rest is read into it. So a peer that claims a large frame and sends
// little costs initialBodyBytes, and a frame that arrives costs one buffer
// of its size, with no growth copies.
//
// kept, if not nil, is a buffer the connection kept from an earlier frame
// (keptBody): when it holds size bytes the frame is read into it (nothing
// is allocated; it is memory the connection holds already, so it may
// exceed what has arrived), otherwise it goes back to the pool. Either way
// readBody owns it. The result has length size; it is kept or comes from
// the buffer pool.
func readBody(r io.Reader, size int, kept []byte, beforeGrow func() error) ([]byte, error) {
	var buf []byte
	if cap(kept) >= size {
		buf = kept[:size]
	} else {
		putBuffer(kept)
		buf = getBuffer(min(size, initialBodyBytes))
	}
	n, err := io.ReadFull(r, buf[:min(size, initialBodyBytes)])
	if err == nil && n < size {
		if beforeGrow != nil {
			err = beforeGrow()
		}
		if err == nil {
			if len(buf) < size {
				next := getBuffer(size)
				copy(next, buf[:n])
				putBuffer(buf)
				buf = next
			}
			var m int
			m, err = io.ReadFull(r, buf[n:size])
			n += m
		}
	}
	if err != nil {
		putBuffer(buf)
		if err == io.EOF && n > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// maxKeptBodyBytes is the largest request body buffer a connection keeps
// for its next frame (keptBody).
const maxKeptBodyBytes = 16 << 20

// keepBodyFor is how long a connection keeps a body buffer after the
// frame that used it was served.
const keepBodyFor = time.Second

// keptBody is the buffer of a connection's last large Produce body, kept
// for its next frame (BENCHMARKS.md, "The next cuts"). A producer sends
// frames of about the same size back to back; through the shared pool,
// the buffers of several MiB were mostly gone by the next request (sync.Pool
// drops its contents every other GC cycle, and the flush's allocations run
// the GC several times a second), so most produce requests allocated and
// zeroed a fresh buffer. The buffer is used only for frames above
// initialBodyBytes, and only after the frame's first initialBodyBytes
// arrived and its size was reserved, as for any frame. Between frames it is
// memory outside the request budget: at most maxKeptBodyBytes per
// connection, and released to the pool keepBodyFor after the last frame
// that used it, so a connection keeps it only while it keeps sending large
// frames (at most about twice the bytes a connection received in the last
// keepBodyFor, since buffers are rounded up to a power of two).
type keptBody struct {
	mu    sync.Mutex
	buf   []byte
	timer *time.Timer
}

// take returns the kept buffer, or nil, and forgets it.
func (k *keptBody) take() []byte {
	k.mu.Lock()
	b := k.buf
	k.buf = nil
	k.mu.Unlock()
	return b
}

// keep keeps b for the next frame, for keepBodyFor; a buffer above
// maxKeptBodyBytes goes back to the pool instead. The caller must not use b
// afterwards.
func (k *keptBody) keep(b []byte) {
	if cap(b) > maxKeptBodyBytes || cap(b) <= initialBodyBytes {
		putBuffer(b)
		return
	}
	k.mu.Lock()
	old := k.buf
	k.buf = b
	if k.timer == nil {
		k.timer = time.AfterFunc(keepBodyFor, k.release)
	} else {
		k.timer.Reset(keepBodyFor)
	}
	k.mu.Unlock()
	putBuffer(old)
}

// release gives the kept buffer back to the pool (idle, or the connection
// ended).
func (k *keptBody) release() {
	putBuffer(k.take())
}

// close releases the buffer and stops the timer.
func (k *keptBody) close() {
	k.mu.Lock()
	if k.timer != nil {
		k.timer.Stop()
	}
	k.mu.Unlock()
	k.release()
}
