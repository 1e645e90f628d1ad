package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Tables. Every key starts with one table byte; the rest is the table's
// fields, strings length-prefixed and numbers big-endian so that one
// partition's records sort by offset, sequence or trigger.
const (
	tableMeta       byte = 'm' // name -> value
	tableSource     byte = 's' // stream, partition, offset -> record
	tableIngest     byte = 'i' // stream, partition -> IngestPosition
	tableRead       byte = 'r' // stream, partition -> ReadPosition
	tableSourceWM   byte = 'w' // stream -> Watermarks
	tableQueue      byte = 'q' // dest kind, dest, dest partition, sender, sender partition, task -> message, a reference to a source record, or a run of a sender's messages to a sink ending at task
	tableTaken      byte = 'p' // dest kind, dest, dest partition, sender, sender partition -> the last task of the sender a sink took (uvarint)
	tableState      byte = 'k' // computation, partition, key -> state
	tableTimer      byte = 't' // computation, partition, key, trigger -> timer
	tablePartition  byte = 'e' // computation, partition -> PartitionMeta
	tableSink       byte = 'o' // sink -> SinkPosition
	tableSinkLog    byte = 'l' // sink, seq -> record line
	tableIdempotent byte = 'd' // stream, record id -> Idempotency
	tableIngestTime byte = 'a' // stream, partition, first offset of an ingest group -> wall clock (ns)
)

type keyBuf []byte

func newKey(table byte) keyBuf { return keyBuf{table} }

func (k keyBuf) str(s string) keyBuf {
	k = binary.BigEndian.AppendUint32(k, uint32(len(s)))
	return append(k, s...)
}

func (k keyBuf) u32(v int) keyBuf { return binary.BigEndian.AppendUint32(k, uint32(v)) }

func (k keyBuf) u64(v uint64) keyBuf { return binary.BigEndian.AppendUint64(k, v) }

// i64 encodes v so that byte order is numeric order (sign bit flipped).
func (k keyBuf) i64(v int64) keyBuf { return k.u64(uint64(v) ^ (1 << 63)) }

// rest appends s unprefixed: only as a key's last field.
func (k keyBuf) rest(s string) keyBuf { return append(k, s...) }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// keyReader takes a key apart field by field; the first malformed field
// sets err and every later read returns zero values.
type keyReader struct {
	b   []byte
	err error
}

var errShortKey = errors.New("store: malformed key")

func (r *keyReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errShortKey, what)
	}
}

func (r *keyReader) str(what string) string {
	if r.err != nil || len(r.b) < 4 {
		r.fail(what)
		return ""
	}
	n := binary.BigEndian.Uint32(r.b)
	if uint64(len(r.b)-4) < uint64(n) {
		r.fail(what)
		return ""
	}
	s := string(r.b[4 : 4+n])
	r.b = r.b[4+n:]
	return s
}

func (r *keyReader) u32(what string) int {
	if r.err != nil || len(r.b) < 4 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return int(v)
}

func (r *keyReader) u64(what string) uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(what)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *keyReader) i64(what string) int64 { return int64(r.u64(what) ^ (1 << 63)) }

func (r *keyReader) rest() string {
	s := string(r.b)
	r.b = nil
	return s
}

// done reports the first error, or one for bytes left over.
func (r *keyReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errShortKey, len(r.b))
	}
	return r.err
}
