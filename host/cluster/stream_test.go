package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/host/cluster"
	"github.com/flowhost/flowhost/ordering"
)

func drawMessage(t *rapid.T) *ordering.Message {
	m := &ordering.Message{
		ID:      ordering.TransformID("enrich", rapid.Int32Range(0, 5).Draw(t, "p"), rapid.Uint64().Draw(t, "seq")),
		Stream:  "enriched",
		Key:     rapid.SampledFrom([]string{"", `["a"]`, "ü"}).Draw(t, "key"),
		Payload: rapid.SliceOfN(rapid.Byte(), 1, 50).Draw(t, "payload"),
		Time: ordering.Timestamps{Event: rapid.Int64().Draw(t, "event"), System: rapid.Int64().Draw(t, "system"),
			Write: rapid.Int64().Draw(t, "write"), Alignment: rapid.Int64().Draw(t, "alignment")},
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "parents") {
		m.Parents = append(m.Parents, ordering.SourceID("orders", int32(i), rapid.Uint64().Draw(t, "parent")))
	}
	return m
}

// TestStreamRecordRoundTrip: a message and a watermark read back as
// written, with the sender, the TaskId and the reader's partition.
func TestStreamRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := ordering.Sender{Computation: rapid.SampledFrom([]string{"enrich", "source:orders", ""}).Draw(t, "from"),
			Partition: rapid.IntRange(0, 1<<31-1).Draw(t, "from partition")}
		if rapid.Bool().Draw(t, "watermark") {
			event, system := rapid.Int64().Draw(t, "event"), rapid.Int64().Draw(t, "system")
			r := cluster.WatermarkRecord("tp", 3, from, event, system)
			require.Equal(t, int32(3), r.Partition)
			got, err := cluster.DecodeStreamRecord(r.Value)
			require.NoError(t, err)
			require.Equal(t, cluster.StreamRecord{From: from, Event: event, System: system}, got)
			return
		}
		m := drawMessage(t)
		task := ordering.TaskID(rapid.Uint64().Draw(t, "task"))
		r := cluster.MessageRecord("tp", 2, from, task, m)
		require.Equal(t, "tp", r.Topic)
		require.Equal(t, int32(2), r.Partition)
		require.Equal(t, m.Key, string(r.Key))
		got, err := cluster.DecodeStreamRecord(r.Value)
		require.NoError(t, err)
		require.Equal(t, from, got.From)
		require.Equal(t, task, got.Task)
		want := *m
		want.Task, want.From = task, from
		require.Equal(t, &want, got.Message)
	})
}

// TestDecodeStreamRecordRefuses: what the two writers never write is
// refused, naming the field.
func TestDecodeStreamRecordRefuses(t *testing.T) {
	from := ordering.Sender{Computation: "enrich", Partition: 1}
	msg := cluster.MessageRecord("tp", 0, from, 7, &ordering.Message{ID: ordering.TransformID("enrich", 1, 7), Stream: "s", Payload: []byte("p")}).Value
	wm := cluster.WatermarkRecord("tp", 0, from, 5, 6).Value
	for _, tc := range []struct {
		name  string
		value []byte
		want  string
	}{
		{"empty", nil, "stream record of 0 bytes: it has a format byte and a kind"},
		{"other format", []byte{2, 'm'}, "stream record: format 2, and this flowhost reads format 1"},
		{"no sender", []byte{1, 'm'}, "stream record: sender: bad computation name length"},
		{"sender longer than the record", []byte{1, 'm', 9, 'a'}, "stream record: sender: bad computation name length"},
		{"sender not UTF-8", []byte{1, 'm', 1, 0xff, 0}, `stream record: sender "\xff" is not UTF-8`},
		{"no partition", []byte{1, 'm', 1, 'a'}, `stream record: sender "a": bad partition`},
		{"unknown kind", append([]byte{1, 'x'}, msg[2:]...), `stream record: unknown kind 'x'`},
		{"truncated message", msg[:len(msg)-1], "stream record: message of enrich/1, task 7: malformed value: field payload"},
		{"message with a byte after it", append(append([]byte{}, msg...), 0), "stream record: message of enrich/1, task 7: malformed value"},
		{"truncated watermark", wm[:len(wm)-1], "stream record: watermark of enrich/1: bad system watermark"},
		{"watermark with a byte after it", append(append([]byte{}, wm...), 0), "stream record: watermark of enrich/1: 1 bytes after it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.DecodeStreamRecord(tc.value)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzDecodeStreamRecord: what DecodeStreamRecord accepts is written back
// by the writers as a record that reads back the same.
func FuzzDecodeStreamRecord(f *testing.F) {
	from := ordering.Sender{Computation: "enrich", Partition: 1}
	f.Add(cluster.MessageRecord("tp", 0, from, 7, &ordering.Message{ID: ordering.TransformID("enrich", 1, 7), Stream: "s", Key: "k",
		Payload: []byte("p"), Parents: []ordering.MessageID{ordering.SourceID("orders", 0, 3)}}).Value)
	f.Add(cluster.WatermarkRecord("tp", 0, from, -5, 6).Value)
	f.Fuzz(func(t *testing.T, value []byte) {
		r, err := cluster.DecodeStreamRecord(value)
		if err != nil {
			return
		}
		var again []byte
		if r.Message == nil {
			again = cluster.WatermarkRecord("tp", 0, r.From, r.Event, r.System).Value
		} else {
			again = cluster.MessageRecord("tp", 0, r.From, r.Task, r.Message).Value
		}
		back, err := cluster.DecodeStreamRecord(again)
		require.NoError(t, err)
		require.Equal(t, r, back)
	})
}

// TestInputWatermarkIsTheMinimumOverSenders: over random interleavings of
// the senders' records (each sender's watermarks in the order it wrote
// them, some repeated lower, as after a sender's restart), the partition's
// watermark is the minimum over the senders' highest so far, none before
// every sender has sent one, and it never goes back.
func TestInputWatermarkIsTheMinimumOverSenders(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		senders := []ordering.Sender{{Computation: "a", Partition: 0}, {Computation: "a", Partition: 1}, {Computation: "source:s", Partition: 0}}
		w := cluster.NewInputWatermark(senders)
		high := map[ordering.Sender]int64{}
		last := ordering.NoWatermark
		for i := range rapid.IntRange(0, 40).Draw(t, "records") {
			s := rapid.SampledFrom(senders).Draw(t, fmt.Sprintf("sender %d", i))
			var r cluster.StreamRecord
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("kind %d", i)) == 0 {
				r = cluster.StreamRecord{From: s, Message: &ordering.Message{}}
			} else {
				r = cluster.StreamRecord{From: s, Event: rapid.Int64Range(-100, 100).Draw(t, fmt.Sprintf("wm %d", i))}
				r.System = r.Event + 1
				if h, ok := high[s]; !ok || r.Event > h {
					high[s] = r.Event
				}
			}
			event, system, err := w.Observe(r)
			require.NoError(t, err)
			want := ordering.NoWatermark
			if len(high) == len(senders) {
				want = high[senders[0]]
				for _, h := range high {
					want = min(want, h)
				}
			}
			require.Equal(t, want, event, "after record %d", i)
			if want != ordering.NoWatermark {
				require.Equal(t, want+1, system)
			}
			require.GreaterOrEqual(t, event, last, "the watermark went back")
			last = event
		}
		_, _, err := w.Observe(cluster.StreamRecord{From: ordering.Sender{Computation: "b"}})
		require.ErrorContains(t, err, "a watermark from b/0, which does not write this topic partition")
	})
}

// TestWatermarksTravelInBand: two partitions of a computation commit
// epochs whose outputs end with their watermarks, into one partition of
// a stream topic; a read_committed reader meets each watermark after the
// messages it covers, so no message it reads after a watermark is below
// it, and the partition's watermark is the two senders' minimum.
func TestWatermarksTravelInBand(t *testing.T) {
	pipeline, input, output, opts := epochTopics(t)
	ctx := context.Background()
	senders := []ordering.Sender{{Computation: "count", Partition: 0}, {Computation: "count", Partition: 1}}
	var committers []*cluster.Committer
	for _, s := range senders {
		committers = append(committers, newCommitter(t, pipeline, input, int32(s.Partition), opts))
	}
	sent := 0
	for epoch := range 10 {
		for i, c := range committers {
			var out []*kgo.Record
			for j := range 5 {
				event := int64(epoch*100 + j*10 + i)
				m := &ordering.Message{ID: ordering.TransformID("count", int32(i), uint64(epoch*5+j)), Stream: "counts",
					Payload: []byte("x"), Time: ordering.Timestamps{Event: event, System: event, Alignment: event}}
				out = append(out, cluster.MessageRecord(output, 0, senders[i], ordering.TaskID(epoch*5+j+1), m))
				sent++
			}
			out = append(out, cluster.WatermarkRecord(output, 0, senders[i], int64(epoch*100+50), int64(epoch*100+50)))
			require.NoError(t, c.Commit(ctx, cluster.Epoch{Outputs: out}))
		}
	}

	r, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{output: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	require.NoError(t, err)
	defer r.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w := cluster.NewInputWatermark(senders)
	senderWM := map[ordering.Sender]int64{}
	var got, moves int
	last := ordering.NoWatermark
	for got < sent || moves < 20 {
		fs := r.PollFetches(pollCtx)
		require.NoError(t, pollCtx.Err(), "read %d of %d messages and %d watermarks", got, sent, moves)
		fs.EachRecord(func(rec *kgo.Record) {
			sr, err := cluster.DecodeStreamRecord(rec.Value)
			require.NoError(t, err)
			if sr.Message != nil {
				got++
				if wm, ok := senderWM[sr.From]; ok {
					require.GreaterOrEqual(t, sr.Message.Time.Event, wm, "a message of %v below its sender's watermark", sr.From)
				}
				return
			}
			moves++
			senderWM[sr.From] = sr.Event
			event, _, err := w.Observe(sr)
			require.NoError(t, err)
			require.GreaterOrEqual(t, event, last)
			last = event
		})
	}
	require.Equal(t, int64(950), last, "the minimum of both senders' last watermarks")
}
