package assemblyscript_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	"github.com/flowhost/flowhost/sdk/conformance"
)

// TestJoinConformanceGuestLikeGo drives random input (three keys, out of
// order, late records, tombstones in the table) through the join
// conformance guest, built by BuildJoinGuest, in batches of 1, 7 and 1000,
// every response required to equal the Go join guest's byte for byte.
func TestJoinConformanceGuestLikeGo(t *testing.T) {
	m, _ := guestModule(t, joinConfGuest)
	for _, tc := range []struct {
		name     string
		params   map[string]any
		outputs  []string
		streams  []string
		interval bool
	}{
		{"interval", map[string]any{"join": "interval", "lower_ns": int64(-3), "upper_ns": int64(7)}, intervalOutputs, []string{"left", "right"}, true},
		{"enrich", map[string]any{"join": "enrich"}, enrichOutputs, []string{"table", "events"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := joinInstance(t, m, tc.params, tc.outputs)
			// The inputs' payloads are decimal numbers, so a '|' comes
			// only from the join's payload function.
			var sawPair, sawUnchanged bool
			rapid.Check(t, func(rt *rapid.T) {
				in := joinInput(rt, tc.streams, !tc.interval)
				d := &winDriver{t: t, rt: rt, inst: inst, goComp: conformance.GoJoinComputation(tc.interval, -3, 7), outputs: tc.outputs}
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				for _, size := range []int{1, 7, 1000} {
					res, _ := d.run(in, bound, size)
					for _, ps := range res {
						for _, p := range ps {
							if strings.Contains(p, "|") {
								sawPair = true
							} else {
								sawUnchanged = true
							}
						}
					}
				}
			})
			require.True(t, sawPair, "no input emitted on %s", tc.outputs[0])
			require.True(t, sawUnchanged, "no input emitted on %s", tc.outputs[1])
		})
	}
}

// TestJoinConformanceGuestRefusesBadParameters: a missing or bad
// parameter refuses Init with an error naming it, in the C join guest's
// words.
func TestJoinConformanceGuestRefusesBadParameters(t *testing.T) {
	m, _ := guestModule(t, joinConfGuest)
	for _, tt := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{}, `parameter "join" is missing`},
		{map[string]any{"join": "outer"}, `parameter "join": must be interval or enrich, got "outer"`},
		{map[string]any{"join": 1}, `parameter "join": expected string, got integer`},
		{map[string]any{"join": "interval", "upper_ns": 1}, `parameter "lower_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": 1}, `parameter "upper_ns" is missing`},
		{map[string]any{"join": "interval", "lower_ns": "1s", "upper_ns": 1}, `parameter "lower_ns": expected integer, got string`},
		{map[string]any{"join": "interval", "lower_ns": 0, "upper_ns": true}, `parameter "upper_ns": expected integer, got bool`},
		{map[string]any{"join": "interval", "lower_ns": 2, "upper_ns": 1}, `parameter "lower_ns": must not exceed upper_ns`},
		{map[string]any{"join": "interval", "lower_ns": int64(-1 << 63), "upper_ns": 1}, `parameter "lower_ns": must be above the smallest int64`},
	} {
		t.Run(tt.want, func(t *testing.T) {
			inst := instantiate(t, m)
			o := call(t, inst.Init, mustEncodeInit(t, &abi.Init{ABI: abi.Version, Computation: "join", Kind: abi.KindTransform,
				Parameters: tt.params, OutputStreams: intervalOutputs}))
			require.Zero(t, o.status)
			r, err := abi.DecodeInitResult(o.result)
			require.NoError(t, err)
			require.Equal(t, tt.want, r.Error)
		})
	}
}
