package topics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is the compression codec of a RecordBatch: bits 0-2 of its attributes.
// Kafka defines 0-4; 5-7 are unassigned and rejected with
// ErrUnsupportedCompression.
type Codec int8

// The Kafka compression codecs (CompressionType ids).
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns the Kafka name of the codec ("none", "gzip", ...).
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Known reports whether c is one of the five codecs Kafka defines.
func (c Codec) Known() bool { return c >= CodecNone && c <= CodecZstd }

// Limits on decompressed output. A compressed batch is at most
// max.message.bytes on the wire but may expand to anything; these bound the
// memory and CPU one batch can cost (a zstd block of a few bytes can expand to
// 128 KiB, a gzip stream about 1000-fold).
//
// The limit for n compressed bytes is min(codecDecompressedBytesMax,
// max(codecDecompressedBytesFloor, codecExpansionRatioMax*n)). The floor keeps
// small, very repetitive batches (load tests sending the same payload) from
// being refused; the ratio lets large batches of ordinary data through.
const (
	codecDecompressedBytesMax   = 128 << 20
	codecDecompressedBytesFloor = 16 << 20
	codecExpansionRatioMax      = 64
)

// codecDecompressedLimit returns the most bytes that n compressed bytes may
// decompress to.
func codecDecompressedLimit(n int) int {
	limit := codecDecompressedBytesFloor
	if n > limit/codecExpansionRatioMax {
		limit = min(n, codecDecompressedBytesMax/codecExpansionRatioMax) * codecExpansionRatioMax
	}
	return limit
}

// xerial/snappy-java framing, written by the Java client's SnappyOutputStream
// and by sarama and kafka-go: an 8-byte magic, a 4-byte version and a 4-byte
// compatible version, then chunks of a 4-byte big-endian length and a raw
// snappy block. A raw snappy block cannot start with the magic: its third byte
// would be a copy with nothing yet to copy from.
var codecXerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const codecXerialHeaderSize = 16

// codecGzipMinSize is the smallest gzip stream: a 10-byte header, an empty
// deflate block and the 8-byte trailer (CRC-32 and size).
const codecGzipMinSize = 20

// codecDeflateExpansionMax is deflate's largest expansion ratio (258-byte
// matches in about two bits each).
const codecDeflateExpansionMax = 1032

// Compress returns raw compressed with c. CodecNone returns raw itself.
// Snappy output is one raw snappy block (what franz-go writes; the Java
// client's xerial reader accepts unframed input); lz4 output is an LZ4 frame
// with 64 KiB blocks as the Java client writes it.
func Compress(c Codec, raw []byte) ([]byte, error) {
	if c == CodecNone {
		return raw, nil
	}
	return codecCompressAppend(nil, c, raw)
}

// Decompress returns data decompressed with c into a new slice. CodecNone
// returns data itself. Snappy accepts both a raw block and xerial framing.
// Corrupt input, and output beyond the decompression limit (see
// codecDecompressedLimit: 16 MiB, or 64 times the input up to 128 MiB), fail
// with ErrCorruptMessage; an unknown codec fails with
// ErrUnsupportedCompression.
func Decompress(c Codec, data []byte) ([]byte, error) {
	if c == CodecNone {
		return data, nil
	}
	return codecDecompressAppend(nil, c, data)
}

// codecCompressAppend appends raw compressed with c to dst.
// REQUIRES: c != CodecNone.
func codecCompressAppend(dst []byte, c Codec, raw []byte) ([]byte, error) {
	switch c {
	case CodecGzip:
		w := codecGzipWriterPool.Get().(*gzip.Writer)
		defer func() {
			w.Reset(nil) // drop the reference to the output
			codecGzipWriterPool.Put(w)
		}()
		out := codecSliceWriter(dst)
		w.Reset(&out)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("topics: gzip compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("topics: gzip compress: %w", err)
		}
		return out, nil
	case CodecSnappy:
		n := s2.MaxEncodedLen(len(raw))
		if n < 0 {
			return nil, fmt.Errorf("%w: %d bytes are too many for one snappy block", ErrMessageTooLarge, len(raw))
		}
		dst = slices.Grow(dst, n)
		encoded := s2.EncodeSnappy(dst[len(dst):], raw)
		return dst[:len(dst)+len(encoded)], nil
	case CodecLZ4:
		w := codecLZ4WriterPool.Get().(*lz4.Writer)
		defer func() {
			w.Reset(nil) // drop the reference to the output
			codecLZ4WriterPool.Put(w)
		}()
		out := codecSliceWriter(dst)
		w.Reset(&out)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("topics: lz4 compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("topics: lz4 compress: %w", err)
		}
		return out, nil
	case CodecZstd:
		encoder, err := codecZstdEncoder()
		if err != nil {
			return nil, err
		}
		return encoder.EncodeAll(raw, dst), nil
	}
	return nil, fmt.Errorf("%w: codec id %d", ErrUnsupportedCompression, int8(c))
}

// codecDecompressAppend appends data decompressed with c to dst, refusing
// output beyond codecDecompressedLimit(len(data)).
// REQUIRES: c != CodecNone.
func codecDecompressAppend(dst []byte, c Codec, data []byte) ([]byte, error) {
	limit := codecDecompressedLimit(len(data))
	switch c {
	case CodecGzip:
		r := codecGzipReaderPool.Get().(*codecGzipReader)
		defer r.release()
		r.src.Reset(data)
		if err := r.gzip.Reset(&r.src); err != nil {
			return dst, fmt.Errorf("%w: gzip header: %w", ErrCorruptMessage, err)
		}
		// A gzip stream ends with its decompressed size mod 2^32 (exact
		// for one member); size dst once from it when deflate could
		// produce that much (at most 1032 bytes per input byte).
		if len(data) >= codecGzipMinSize {
			size := int64(binary.LittleEndian.Uint32(data[len(data)-4:]))
			if size <= int64(limit) && size <= codecDeflateExpansionMax*int64(len(data)) {
				dst = slices.Grow(dst, int(size)+1) // +1: the final Read that sees EOF
			}
		}
		out, err := codecReadAllBounded(dst, &r.gzip, limit, c)
		if err != nil {
			return dst, err
		}
		return out, nil
	case CodecSnappy:
		if len(data) >= codecXerialHeaderSize && bytes.HasPrefix(data, codecXerialMagic) {
			return codecXerialDecodeAppend(dst, data[codecXerialHeaderSize:], limit)
		}
		return codecSnappyBlockDecodeAppend(dst, data, len(dst)+limit)
	case CodecLZ4:
		r := codecLZ4ReaderPool.Get().(*codecLZ4Reader)
		defer r.release()
		r.src.Reset(data)
		r.lz4.Reset(&r.src)
		out, err := codecReadAllBounded(dst, r.lz4, limit, c)
		if err != nil {
			return dst, err
		}
		return out, nil
	case CodecZstd:
		decoder, err := codecZstdDecoder(limit)
		if err != nil {
			return dst, err
		}
		// The decoder stops at its tier (at most twice the limit) while
		// decoding; the exact limit is checked after.
		out, err := decoder.DecodeAll(data, dst)
		if err != nil {
			return dst, fmt.Errorf("%w: zstd: %w", ErrCorruptMessage, err)
		}
		if len(out)-len(dst) > limit {
			return dst, fmt.Errorf("%w: zstd input of %d bytes expands beyond the %d byte limit", ErrCorruptMessage, len(data), limit)
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w: codec id %d", ErrUnsupportedCompression, int8(c))
}

// codecReadAllBounded appends everything r yields to dst, failing with
// ErrCorruptMessage when r fails or yields more than limit bytes. dst never
// grows beyond len(dst)+limit+1.
func codecReadAllBounded(dst []byte, r io.Reader, limit int, c Codec) ([]byte, error) {
	start := len(dst)
	end := start + limit + 1 // one byte past the limit detects overflow
	for {
		if len(dst) == cap(dst) {
			if len(dst) >= end {
				return dst, fmt.Errorf("%w: %s input expands beyond the %d byte limit", ErrCorruptMessage, c, limit)
			}
			grown := make([]byte, len(dst), min(max(2*cap(dst), len(dst)+4096), end))
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst, fmt.Errorf("%w: %s input expands beyond the %d byte limit", ErrCorruptMessage, c, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, fmt.Errorf("%w: %s: %w", ErrCorruptMessage, c, err)
		}
	}
}

// codecSnappyBlockDecodeAppend appends the raw snappy block to dst unless the
// result would be longer than end. Decoding is strict (standard snappy, no s2
// extensions): the broker stores batches as received, so it must refuse what
// Java consumers cannot read.
func codecSnappyBlockDecodeAppend(dst, block []byte, end int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy block header: %w", ErrCorruptMessage, err)
	}
	if n > end-len(dst) {
		return dst, fmt.Errorf("%w: snappy block of %d bytes declares %d decompressed bytes, beyond the limit", ErrCorruptMessage, len(block), n)
	}
	dst = slices.Grow(dst, n)
	decoded, err := snappy.DecodeStrict(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %w", ErrCorruptMessage, err)
	}
	return dst[:len(dst)+len(decoded)], nil
}

// codecXerialDecodeAppend decodes the chunks that follow a xerial header.
func codecXerialDecodeAppend(dst, chunks []byte, limit int) ([]byte, error) {
	end := len(dst) + limit
	for len(chunks) > 0 {
		if len(chunks) < 4 {
			return dst, fmt.Errorf("%w: xerial snappy: %d bytes left, too few for a chunk length", ErrCorruptMessage, len(chunks))
		}
		size := binary.BigEndian.Uint32(chunks)
		chunks = chunks[4:]
		if uint64(size) > uint64(len(chunks)) {
			return dst, fmt.Errorf("%w: xerial snappy: chunk length %d exceeds the %d bytes left", ErrCorruptMessage, int32(size), len(chunks))
		}
		var err error
		if dst, err = codecSnappyBlockDecodeAppend(dst, chunks[:size], end); err != nil {
			return dst, err
		}
		chunks = chunks[size:]
	}
	return dst, nil
}

// codecSliceWriter is an io.Writer appending to a byte slice.
type codecSliceWriter []byte

func (w *codecSliceWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// codecGzipReader is a pooled gzip reader with its input reader; release drops
// the reference to the input so a pooled reader does not pin a batch.
type codecGzipReader struct {
	gzip gzip.Reader
	src  bytes.Reader
}

func (r *codecGzipReader) release() {
	r.src.Reset(nil)
	codecGzipReaderPool.Put(r)
}

// codecLZ4Reader is a pooled LZ4 frame reader with its input reader.
type codecLZ4Reader struct {
	lz4 *lz4.Reader
	src bytes.Reader
}

func (r *codecLZ4Reader) release() {
	r.lz4.Reset(nil) // returns the block buffer to lz4's pool
	r.src.Reset(nil)
	codecLZ4ReaderPool.Put(r)
}

var (
	codecGzipReaderPool = sync.Pool{New: func() any { return new(codecGzipReader) }}
	codecGzipWriterPool = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	codecLZ4ReaderPool  = sync.Pool{New: func() any { return &codecLZ4Reader{lz4: lz4.NewReader(nil)} }}
	codecLZ4WriterPool  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// Block64Kb is what the Java client writes; the option cannot fail.
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return w
	}}

	// The zstd encoder is shared: EncodeAll is safe for concurrent use and
	// keeps GOMAXPROCS internal states.
	codecZstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithWindowSize(1<<20),
			zstd.WithZeroFrames(true))
		if err != nil {
			return nil, fmt.Errorf("topics: zstd encoder: %w", err)
		}
		return e, nil
	})
)

// codecZstdDecoderTiers are the decoded-size caps of the shared zstd
// decoders. DecodeAll only takes a cap per decoder, so each call uses the
// smallest tier that covers its limit: a hostile frame is cut off at no more
// than twice the limit instead of at codecDecompressedBytesMax.
var codecZstdDecoderTiers = [...]int{
	codecDecompressedBytesFloor,
	2 * codecDecompressedBytesFloor,
	4 * codecDecompressedBytesFloor,
	codecDecompressedBytesMax,
}

// codecZstdDecoders are created on first use, one per tier. DecodeAll is safe
// for concurrent use; each decoder keeps GOMAXPROCS block decoders.
var codecZstdDecoders [len(codecZstdDecoderTiers)]func() (*zstd.Decoder, error)

func init() {
	for i, tier := range codecZstdDecoderTiers {
		codecZstdDecoders[i] = sync.OnceValues(func() (*zstd.Decoder, error) {
			d, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(0),
				zstd.WithDecoderMaxMemory(uint64(tier)))
			if err != nil {
				return nil, fmt.Errorf("topics: zstd decoder: %w", err)
			}
			return d, nil
		})
	}
}

// codecZstdDecoder returns the shared decoder of the smallest tier that is at
// least limit.
func codecZstdDecoder(limit int) (*zstd.Decoder, error) {
	for i, tier := range codecZstdDecoderTiers {
		if limit <= tier {
			return codecZstdDecoders[i]()
		}
	}
	return codecZstdDecoders[len(codecZstdDecoders)-1]()
}

// codecBufferPool holds scratch buffers for decompressed records and for
// records being encoded. Buffers above codecPooledBufferBytesMax are dropped
// rather than pooled so one huge batch does not pin memory.
var codecBufferPool = sync.Pool{New: func() any { return new([]byte) }}

const codecPooledBufferBytesMax = 4 << 20

func codecGetBuffer() *[]byte { return codecBufferPool.Get().(*[]byte) }

func codecPutBuffer(b *[]byte, used []byte) {
	if cap(used) > codecPooledBufferBytesMax {
		return
	}
	*b = used[:0]
	codecBufferPool.Put(b)
}
