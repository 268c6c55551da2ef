package kafkaproto

import "sync"

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
