package kafkaproto

import (
	"io"
	"sync"
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
	b = b[:0]
	bufferPools[sizeClass(c)-minPooledShift].Put(&b)
}

// initialBodyBytes is the most a connection allocates for a request body
// before the body's bytes arrive.
const initialBodyBytes = 64 << 10

// bodyGrowth is the factor by which readBody's buffer grows when full: the
// buffer is at most bodyGrowth times the bytes received (or
// initialBodyBytes), and growing copies at most size/(bodyGrowth-1) bytes
// in all. 4 rather than 2 because the copies are the price every large
// produce pays (BENCHMARKS.md, "Request buffers").
const bodyGrowth = 4

// readBody reads a frame body of size bytes from r. The buffer starts at
// min(size, initialBodyBytes) and grows by bodyGrowth only when it is full,
// so a peer that claims a large frame and sends little costs a small
// multiple of what it sent, not the size it claimed. beforeGrow, if not
// nil, runs once, when the first buffer is full and must grow (that is,
// only for frames larger than it); its error ends the read. The result has
// length size and comes from the buffer pool.
func readBody(r io.Reader, size int, beforeGrow func() error) ([]byte, error) {
	buf := getBuffer(min(size, initialBodyBytes))
	buf = buf[:min(cap(buf), size)]
	n := 0
	for {
		m, err := io.ReadFull(r, buf[n:])
		n += m
		if err != nil {
			putBuffer(buf)
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if n == size {
			return buf, nil
		}
		if beforeGrow != nil {
			if err := beforeGrow(); err != nil {
				putBuffer(buf)
				return nil, err
			}
			beforeGrow = nil
		}
		next := getBuffer(min(size, bodyGrowth*cap(buf)))
		next = next[:min(cap(next), size)]
		copy(next, buf[:n])
		putBuffer(buf)
		buf = next
	}
}
