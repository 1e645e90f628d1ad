package flowtest_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/host/compute"
	"github.com/flowhost/flowhost/host/flowtest"
	"github.com/flowhost/flowhost/host/spec"
)

// upper is a native map: it emits each payload in upper case.
func upper(_ context.Context, req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{}
	for _, k := range req.Keys {
		rk := abi.ResponseKey{Key: k.Key}
		for _, m := range k.Messages {
			rk.Emits = append(rk.Emits, abi.Emit{Stream: "loud", Payload: bytes.ToUpper(m.Payload)})
		}
		resp.Keys = append(resp.Keys, rk)
	}
	return resp, nil
}

const chain = `
name: chain
sources:
  - {name: in, type: http, stream: clicks, partitions: 2, partition_by: [user], http: {listen: "127.0.0.1:0", path: /in}, watermark: {out_of_orderness_bound: 0s}}
computations:
  - {name: shout, plugin: upper, kind: map, input_streams: [clicks], output_streams: [loud]}
  - {name: per-user, plugin: minute-count, kind: transform, group_by: [USER], input_streams: [loud], output_streams: [counts]}
`

// TestDriverChain runs two native computations in a chain, the second
// keyed by a field the first one derives, from a source of two partitions
// (an http source, which the driver replaces, so nothing listens).
func TestDriverChain(t *testing.T) {
	ctx := context.Background()
	d, err := flowtest.NewFromYAML(ctx, chain,
		flowtest.WithComputation("shout", compute.Native(upper)),
		flowtest.WithComputation("per-user", compute.Native(minuteCount)))
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()

	err = d.Push("in", flowtest.Record{Event: at(1), Payload: []byte(`{"name":"ann"}`)})
	require.ErrorContains(t, err, `source "in", record 1 of this push: `)
	require.ErrorContains(t, d.Push("nope"), `no source "nope" in pipeline "chain"; its sources are in`)

	for i, u := range []string{"ann", "bob", "ann", "cy"} {
		require.NoError(t, d.Push("in", flowtest.Record{Event: at(i), Payload: []byte(`{"user":"` + u + `"}`)}))
	}
	require.NoError(t, d.Settle(ctx))
	require.ElementsMatch(t, []string{`{"USER":"ANN"}`, `{"USER":"BOB"}`, `{"USER":"ANN"}`, `{"USER":"CY"}`}, d.Payloads("loud"))
	key, err := d.KeyOf("per-user", []byte(`{"USER":"ANN"}`))
	require.NoError(t, err)
	state, found, err := d.State("per-user", key)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "2", string(state))
	timers, err := d.Timers("per-user")
	require.NoError(t, err)
	require.Len(t, timers, 3, "one window per user")
	require.Empty(t, d.Outputs("counts"))

	require.NoError(t, d.Finish(ctx))
	require.ElementsMatch(t, []string{`{"window_end":"10:01:00","count":2}`, `{"window_end":"10:01:00","count":1}`, `{"window_end":"10:01:00","count":1}`},
		d.Payloads("counts"))
	timers, err = d.Timers("per-user")
	require.NoError(t, err)
	require.Empty(t, timers)
	require.ErrorIs(t, d.Push("in", flowtest.Record{Payload: []byte(`{"user":"x"}`)}), flowtest.ErrFinished)
}

// TestRunRefusesASourceThatDoesNotEnd: Run, unlike the Driver, reads
// files; a source that would never end needs one.
func TestRunRefusesASourceThatDoesNotEnd(t *testing.T) {
	p, err := spec.Parse("chain.yaml", []byte(chain))
	require.NoError(t, err)
	_, err = flowtest.Run(context.Background(), flowtest.Config{Pipeline: p})
	require.EqualError(t, err, `source "in" is of type http, which does not end by itself: give it a file with --input in=FILE`)

	p, err = spec.Parse("chain.yaml", []byte(chain))
	require.NoError(t, err)
	_, err = flowtest.Run(context.Background(), flowtest.Config{Pipeline: p, Inputs: map[string]string{"clicks": "x.jsonl", "other": "y"}})
	require.EqualError(t, err, `--input other: no source of pipeline "chain" has that name or stream; its sources are in (stream clicks)`)
}

// TestDriverStepsGoOn runs the same steps in memory and on a store: a
// record behind the watermark an earlier step reached, and the timers a
// raised watermark makes due, come out the same, and the message ids go
// on across steps instead of starting again.
func TestDriverStepsGoOn(t *testing.T) {
	for _, where := range []string{"memory", "store"} {
		t.Run(where, func(t *testing.T) {
			ctx := context.Background()
			opts := []flowtest.Option{flowtest.WithComputation("per-user", compute.Native(minuteCount))}
			if where == "store" {
				opts = append(opts, flowtest.WithDataDir(t.TempDir()))
			}
			d, err := flowtest.NewFromYAML(ctx, pipeline, opts...)
			require.NoError(t, err)
			defer func() { require.NoError(t, d.Close()) }()

			require.NoError(t, d.Push("clicks-in", flowtest.Record{Event: at(0), Payload: []byte(`{"user":"ann"}`)},
				flowtest.Record{Event: at(1), Payload: []byte(`{"user":"bob"}`)}))
			require.NoError(t, d.Settle(ctx))
			require.Empty(t, d.Outputs("counts"), "the watermark is at 10:00:01")

			// The raised watermark is kept for the next step, whose
			// settling fires the windows it passed.
			require.NoError(t, d.AdvanceWatermark(ctx, "clicks-in", at(60)))
			require.ElementsMatch(t, []string{`{"window_end":"10:01:00","count":1}`, `{"window_end":"10:01:00","count":1}`}, d.Payloads("counts"))

			// A record behind that watermark: its window's timer is due
			// at once.
			require.NoError(t, d.Push("clicks-in", flowtest.Record{Event: at(2), Payload: []byte(`{"user":"ann"}`)}))
			require.NoError(t, d.Settle(ctx))
			counts := d.Outputs("counts")
			require.Len(t, counts, 3)
			require.Equal(t, `{"window_end":"10:01:00","count":1}`, string(counts[2].Payload))
			require.Equal(t, at(60), counts[2].EventTS)

			ids := map[string]bool{}
			for _, r := range counts {
				require.False(t, ids[r.MessageID], "message id %s given twice", r.MessageID)
				ids[r.MessageID] = true
			}
		})
	}
}
