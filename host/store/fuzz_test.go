package store

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/flowhost/flowhost/ordering"
)

// FuzzDecodeMessage feeds arbitrary bytes to the queued-message decoder
// (what recovery reads back): it never panics, and whatever it accepts
// encodes and decodes again to the same message.
func FuzzDecodeMessage(f *testing.F) {
	m := &ordering.Message{ID: ordering.SourceID("s", 1, 2).Derive("out", 0), Stream: "out", Key: `["k"]`,
		Time: ordering.Timestamps{Event: -1, System: 2, Write: 3, Alignment: 4}, Payload: []byte(`{"a":1}`),
		Parents: []ordering.MessageID{ordering.SourceID("s", 1, 2)}}
	f.Add(appendMessage(nil, m))
	f.Add(appendMessage(nil, &ordering.Message{ID: ordering.SourceID("s", 0, 0)}))
	f.Add([]byte{codecMessageV1, 0xff})
	f.Add([]byte{codecMessageV2, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeMessage(b)
		if err != nil {
			return
		}
		back, err := decodeMessage(appendMessage(nil, got))
		if err != nil {
			t.Fatalf("decoding a re-encoded message: %v", err)
		}
		if back.ID.Compare(got.ID) != 0 || back.Stream != got.Stream || back.Key != got.Key || back.Time != got.Time ||
			!bytes.Equal(back.Payload, got.Payload) || len(back.Parents) != len(got.Parents) {
			t.Fatalf("round trip changed the message: %+v -> %+v", got, back)
		}
	})
}

// FuzzKeyReader takes arbitrary queue keys apart: it never panics and
// never reads past the key.
func FuzzKeyReader(f *testing.F) {
	f.Add([]byte(queueKey(Dest{Name: "c", Partition: 3}, ordering.Sender{Computation: "s", Partition: 1}, 9))[1:])
	f.Add([]byte{0, 0, 0, 9, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := keyReader{b: b}
		_ = r.str("kind")
		_ = r.str("dest")
		_ = r.u32("partition")
		_ = r.str("sender")
		_ = r.u32("sender partition")
		_ = r.u64("task")
		_ = r.done()
	})
}

// FuzzDecodeRecord feeds arbitrary bytes to the source-record decoder: it
// never panics, and whatever it accepts encodes and decodes again to the
// same record.
func FuzzDecodeRecord(f *testing.F) {
	for _, key := range []string{"", `["k"]`} {
		f.Add(appendRecord(nil, &ordering.Message{Key: key, Time: ordering.Timestamps{Event: -1, System: 2, Write: 3, Alignment: 4}, Payload: []byte(`{"a":1}`)}))
	}
	f.Add([]byte{codecRecordV1})
	f.Add([]byte{codecRecordV2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeRecord("s", 1, 2, b)
		if err != nil {
			return
		}
		back, err := decodeRecord("s", 1, 2, appendRecord(nil, got))
		if err != nil {
			t.Fatalf("decoding a re-encoded record: %v", err)
		}
		if back.ID.Compare(got.ID) != 0 || back.Key != got.Key || back.Time != got.Time || !bytes.Equal(back.Payload, got.Payload) {
			t.Fatalf("round trip changed the record: %+v -> %+v", got, back)
		}
	})
}

// TestSourceRecordKeys: a source record keeps its key, timestamps and
// payload through the codec.
func TestSourceRecordKeys(t *testing.T) {
	tm := ordering.Timestamps{Event: 1, System: 2, Write: 2, Alignment: 2}
	for _, key := range []string{"", `["o-17"]`, `[{"base64":"/w=="}]`} {
		m, err := decodeRecord("s", 0, 5, appendRecord(nil, &ordering.Message{Key: key, Time: tm, Payload: []byte(`1`)}))
		if err != nil {
			t.Fatal(err)
		}
		if m.Key != key || m.Time != tm || string(m.Payload) != "1" || m.ID.Compare(ordering.SourceID("s", 0, 5)) != 0 {
			t.Fatalf("key %q: decoded %+v", key, m)
		}
	}
}

// FuzzDecodeSourceRef feeds arbitrary bytes to the decoder of queued
// source references: it never panics, and whatever it accepts encodes and
// decodes again to the same reference.
func FuzzDecodeSourceRef(f *testing.F) {
	m := &ordering.Message{ID: ordering.SourceID("in", 3, 77), Stream: "in", Key: `["k"]`, Time: ordering.Timestamps{Event: -1, System: 2, Write: 3, Alignment: 4}}
	ref, ok := asSourceRef(ordering.Sender{Computation: "source:in"}, m)
	if !ok {
		f.Fatal("a source record is not taken as a reference")
	}
	f.Add(appendSourceRef(nil, ref, m))
	f.Add(appendTimesV1(appendString(binary.AppendUvarint(binary.AppendUvarint(appendString([]byte{codecSourceRefV1}, "in"), 3), 77), `["k"]`), m.Time))
	f.Add([]byte{codecSourceRefV1, 0})
	f.Add([]byte{codecSourceRefV2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ref, got, timed, err := decodeSourceRef(b)
		if err != nil {
			return
		}
		if !timed && got.Time != (ordering.Timestamps{}) {
			t.Fatalf("a reference without timestamps gave %+v", got.Time)
		}
		// What is written now leaves the timestamps to the source record.
		back, again, timed, err := decodeSourceRef(appendSourceRef(nil, ref, got))
		if err != nil {
			t.Fatalf("decoding a re-encoded reference: %v", err)
		}
		if timed || back != ref || again.Key != got.Key || !again.ID.Equal(got.ID) {
			t.Fatalf("round trip changed the reference: %+v %+v -> %+v %+v", ref, got, back, again)
		}
	})
}

// FuzzDecodeRun feeds arbitrary bytes to the decoder of a run of queued
// messages (what a sink's queue holds after a restart): it never panics,
// and whatever it accepts encodes and decodes again to the same messages
// with the same TaskIds, ending at the run's.
func FuzzDecodeRun(f *testing.F) {
	var msgs []byte
	for i := range 3 {
		msgs = appendBytes(msgs, appendMessage(nil, &ordering.Message{ID: ordering.SourceID("s", 1, 2).Derive("out", uint64(i)), Stream: "out",
			Time: ordering.Timestamps{Event: -1, System: 2, Write: 3, Alignment: 4}, Payload: []byte(`{"a":1}`)}))
	}
	f.Add(appendRun(nil, 3, msgs), uint64(7))
	f.Add(appendRun(nil, 3, msgs), uint64(2))
	f.Add([]byte{codecRunV1, 0}, uint64(1))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, last uint64) {
		got, err := decodeRun(b, ordering.TaskID(last))
		if err != nil {
			return
		}
		var again []byte
		for i, m := range got {
			if want := ordering.TaskID(last) - ordering.TaskID(len(got)-1-i); m.Task != want {
				t.Fatalf("message %d has task %d, want %d", i, m.Task, want)
			}
			again = appendBytes(again, appendMessage(nil, m))
		}
		back, err := decodeRun(appendRun(nil, len(got), again), ordering.TaskID(last))
		if err != nil {
			t.Fatalf("decoding a re-encoded run: %v", err)
		}
		if len(back) != len(got) {
			t.Fatalf("%d messages, then %d", len(got), len(back))
		}
		for i := range got {
			g, k := got[i], back[i]
			if g.ID.Compare(k.ID) != 0 || g.Stream != k.Stream || g.Key != k.Key || g.Time != k.Time || g.Task != k.Task || string(g.Payload) != string(k.Payload) || len(g.Parents) != len(k.Parents) {
				t.Fatalf("message %d: %+v, then %+v", i, g, k)
			}
		}
	})
}
