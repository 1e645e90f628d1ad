package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/ordering"
)

// TestMessageCodecRoundTrip: every queued message decodes to what was
// encoded, whatever its strings, timestamps, parents and payload.
func TestMessageCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ts := func(name string) int64 { return rapid.Int64Range(math.MinInt64, math.MaxInt64).Draw(t, name) }
		src := ordering.SourceID(rapid.StringMatching(`[a-z][a-z0-9_.-]{0,7}`).Draw(t, "stream"), rapid.Int32Range(0, 1<<20).Draw(t, "p"), rapid.Uint64().Draw(t, "off"))
		m := &ordering.Message{
			ID: src.Derive("out", rapid.Uint64().Draw(t, "i")), Stream: rapid.String().Draw(t, "s"), Key: rapid.String().Draw(t, "k"),
			Time:    ordering.Timestamps{Event: ts("e"), System: ts("sy"), Write: ts("w"), Alignment: ts("a")},
			Payload: rapid.SliceOf(rapid.Byte()).Draw(t, "payload"),
		}
		for range rapid.IntRange(0, 3).Draw(t, "parents") {
			m.Parents = append(m.Parents, src)
		}
		got, err := decodeMessage(appendMessage(nil, m))
		require.NoError(t, err)
		require.Zero(t, got.ID.Compare(m.ID))
		require.Equal(t, m.Stream, got.Stream)
		require.Equal(t, m.Key, got.Key)
		require.Equal(t, m.Time, got.Time)
		require.Equal(t, append([]byte{}, m.Payload...), got.Payload)
		require.Len(t, got.Parents, len(m.Parents))
	})
}

// TestCodecCorrupt: damaged values are refused with an error naming the
// field and byte where decoding stopped, never decoded to something else.
func TestCodecCorrupt(t *testing.T) {
	rec := appendRecord(nil, &ordering.Message{Key: "k", Time: ordering.Timestamps{Event: 300}, Payload: []byte("hello")})
	msg := appendMessage(nil, &ordering.Message{ID: ordering.SourceID("s", 0, 1), Stream: "s", Payload: []byte("x")})
	for _, tc := range []struct {
		name, want string
		b          []byte
		record     bool
	}{
		{"empty record", "field version at byte 0: empty value", nil, true},
		{"old CBOR record", "layout 0x85 is not a source record", []byte{0x85, 1, 2, 3, 4, 0x40}, true},
		{"message read as record", "layout 0x05 is not a source record (0x01 or 0x04)", msg, true},
		{"truncated payload", "field payload at byte", rec[:len(rec)-1], true},
		{"trailing bytes", "1 trailing bytes", append(append([]byte{}, rec...), 0), true},
		{"overlong varint", "field event at byte 1", append([]byte{codecRecordV1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), true},
		{"truncated message", "field payload length at byte", msg[:len(msg)-2], false},
		{"bad message id", "message id", append(appendString([]byte{codecMessageV1}, "!!"), 0, 0, 0, 0, 0, 0, 0, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.record {
				_, err = decodeRecord("s", 0, 0, tc.b)
			} else {
				_, err = decodeMessage(tc.b)
			}
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), "error %q does not say %q", err, tc.want)
			if tc.name != "bad message id" {
				require.True(t, errors.Is(err, errCodec))
			}
		})
	}
}

// TestOldFormatRefused: a data directory written in format 1 (CBOR
// values) is refused at Open with an error naming it and both formats,
// not read as if it were the current layout.
func TestOldFormatRefused(t *testing.T) {
	setFormat := func(t *testing.T, dir string, v byte) {
		s, err := Open(dir, Options{})
		require.NoError(t, err)
		b := s.db.NewBatch()
		require.NoError(t, b.Set(newKey(tableMeta).rest(string(metaFormat)), []byte{v}, nil))
		require.NoError(t, s.commit(b))
		require.NoError(t, s.Close())
	}
	for _, v := range []byte{1, 4} {
		dir := t.TempDir()
		setFormat(t, dir, v)
		_, err := Open(dir, Options{})
		require.Error(t, err)
		require.Contains(t, err.Error(), fmt.Sprintf("%s was written in store format [%d]; this flowhost reads formats 2 and 3 only", dir, v))
	}

	// Format 2 is read as it is, and upgraded: what this version writes
	// into it a format 2 flowhost could not read.
	dir := t.TempDir()
	setFormat(t, dir, 2)
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	v, ok, err := s.get(newKey(tableMeta).rest(string(metaFormat)), "format")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []byte{FormatVersion}, v)
	require.NoError(t, s.Close())
}

// TestQueuedSourceRecordsAreReferences: a source reader's queued record is
// stored as a reference to the source log, not a second copy of its
// payload; recovery reads it back whole (with its routing key and
// timestamps), QueuedSourceFloors reports the lowest offset referred to,
// and a reference whose record is gone is a precise corruption error.
func TestQueuedSourceRecordsAreReferences(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	defer s.Close()
	d := Dest{Name: "c", Partition: 1}
	reader := ordering.Sender{Computation: "source:in", Partition: 0}
	payload := []byte(`{"k":"a","fill":"0123456789012345678901234567890123456789"}`)
	b := s.NewBatch()
	for off := uint64(5); off < 8; off++ {
		rec := &ordering.Message{ID: ordering.SourceID("events", 0, off), Stream: "events", Time: ordering.Timestamps{Event: int64(off), System: 2, Write: 3, Alignment: 4}, Payload: payload}
		b.AppendSource("events", 0, off, rec)
		routed := *rec
		routed.Key = `["a"]`
		b.Enqueue(d, reader, ordering.TaskID(off-4), &routed)
	}
	// A derived message from a computation keeps its own copy.
	derived := &ordering.Message{ID: ordering.SourceID("events", 0, 5).Derive("out", 0), Stream: "out", Payload: []byte("x"), Parents: []ordering.MessageID{ordering.SourceID("events", 0, 5)}}
	b.Enqueue(d, ordering.Sender{Computation: "up", Partition: 0}, 1, derived)
	require.NoError(t, b.Commit())

	raw, ok, err := s.get(queueKey(d, reader, 1), "queue entry")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, codecSourceRefV2, raw[0])
	require.Less(t, len(raw), len(payload), "the queue entry holds no copy of the payload")

	var got []*ordering.Message
	require.NoError(t, s.Queue(d, func(_ ordering.Sender, m *ordering.Message) error { got = append(got, m); return nil }))
	require.Len(t, got, 4)
	var refs int
	for _, m := range got {
		if m.Stream != "events" {
			require.Equal(t, "x", string(m.Payload))
			continue
		}
		refs++
		require.Equal(t, payload, m.Payload)
		require.Equal(t, `["a"]`, m.Key)
		require.Equal(t, int64(m.ID.Root().Seq), m.Time.Event)
		require.Equal(t, ordering.TaskID(m.ID.Root().Seq-4), m.Task)
	}
	require.Equal(t, 3, refs)

	floors, err := s.QueuedSourceFloors()
	require.NoError(t, err)
	require.Equal(t, map[SourcePartition]uint64{{Stream: "events", Partition: 0}: 5}, floors)

	b = s.NewBatch()
	b.DeleteSourceBefore("events", 0, 6)
	require.NoError(t, b.Commit())
	err = s.Queue(d, func(ordering.Sender, *ordering.Message) error { return nil })
	require.ErrorIs(t, err, ErrCorrupted)
	require.ErrorContains(t, err, "queue of c/p1 message from source:in/p0 task 1")
	require.ErrorContains(t, err, "source record events/p0 offset 5, which the source log no longer holds")
}

// appendTimesV1 writes timestamps as the V1 layouts did: each in full.
func appendTimesV1(b []byte, t ordering.Timestamps) []byte {
	for _, v := range []int64{t.Event, t.System, t.Write, t.Alignment} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

// TestCodecReadsV1Values: values a data directory holds from before the V2
// layouts decode as they did, and the V2 layouts are the smaller.
func TestCodecReadsV1Values(t *testing.T) {
	tm := ordering.Timestamps{Event: 1_764_800_000_000_000_000, System: 1_764_800_000_000_250_000, Write: 1_764_800_000_000_000_000, Alignment: 1_764_800_000_000_250_000}

	rec := appendTimesV1([]byte{codecRecordV1}, tm)
	rec = appendBytes(appendString(rec, "k"), []byte("hello"))
	m, err := decodeRecord("s", 2, 7, rec)
	require.NoError(t, err)
	require.Equal(t, &ordering.Message{ID: ordering.SourceID("s", 2, 7), Stream: "s", Key: "k", Time: tm, Payload: []byte("hello")}, m)
	require.LessOrEqual(t, len(appendRecord(nil, m)), len(rec)-20)

	src := ordering.SourceID("s", 2, 7)
	msg := appendString(appendString(appendString([]byte{codecMessageV1}, src.Derive("out", 1).String()), "out"), "k")
	msg = appendBytes(appendString(binary.AppendUvarint(appendTimesV1(msg, tm), 1), src.String()), []byte("x"))
	got, err := decodeMessage(msg)
	require.NoError(t, err)
	require.Zero(t, got.ID.Compare(src.Derive("out", 1)))
	require.Equal(t, "out", got.Stream)
	require.Equal(t, "k", got.Key)
	require.Equal(t, tm, got.Time)
	require.Len(t, got.Parents, 1)
	require.Zero(t, got.Parents[0].Compare(src))
	require.Equal(t, []byte("x"), got.Payload)
	require.LessOrEqual(t, len(appendMessage(nil, got)), len(msg)-20)

	ref := appendString([]byte{codecSourceRefV1}, "s")
	ref = appendTimesV1(appendString(binary.AppendUvarint(binary.AppendUvarint(ref, 2), 7), "k"), tm)
	require.True(t, isSourceRef(ref))
	r, rm, timed, err := decodeSourceRef(ref)
	require.NoError(t, err)
	require.True(t, timed, "a V1 reference holds the timestamps")
	require.Equal(t, sourceRef{stream: "s", partition: 2, offset: 7}, r)
	require.Equal(t, tm, rm.Time)
	require.Equal(t, "k", rm.Key)
	v2 := appendSourceRef(nil, r, rm)
	require.Len(t, v2, len(ref)-36, "a V2 reference leaves the timestamps to the source record")
	_, _, timed, err = decodeSourceRef(v2)
	require.NoError(t, err)
	require.False(t, timed)
}

// TestRunCorrupt: a damaged run is refused naming what is wrong and where.
func TestRunCorrupt(t *testing.T) {
	one := appendBytes(nil, appendMessage(nil, &ordering.Message{ID: ordering.SourceID("s", 0, 1).Derive("o", 0), Stream: "o", Payload: []byte("x")}))
	run := appendRun(nil, 1, one)
	for _, tc := range []struct {
		name, want string
		b          []byte
		last       ordering.TaskID
	}{
		{"empty", "field version at byte 0: empty value", nil, 1},
		{"a message", "layout 0x05 is not a run of queued messages (0x07)", one[1:], 1},
		{"no messages", "field message count at byte 2: 0 messages in 0 bytes ending at task 1", []byte{codecRunV1, 0}, 1},
		{"more messages than tasks", "2 messages in", appendRun(nil, 2, append(append([]byte{}, one...), one...)), 1},
		{"truncated", "field message 0 at byte 3: length 22 is past the value's end (21 bytes left)", run[:len(run)-1], 1},
		{"truncated after", "field message 1 length", appendRun(nil, 2, one), 2},
		{"trailing bytes", "1 trailing bytes", append(append([]byte{}, run...), 0), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRun(tc.b, tc.last)
			require.ErrorIs(t, err, errCodec)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
