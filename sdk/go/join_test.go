package flowhost_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// joinInputs draws records of keys a, b, c on the given streams, out of
// order by up to 15, with payloads that are their positions.
func joinInputs(rt *rapid.T, streams ...string) []windowInput {
	n := rapid.IntRange(0, 60).Draw(rt, "n")
	in := make([]windowInput, n)
	for i := range in {
		in[i] = windowInput{
			key:    rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "key"),
			ts:     int64(i) + rapid.Int64Range(-15, 3).Draw(rt, "jitter") + 100,
			value:  int64(i),
			stream: rapid.SampledFrom(streams).Draw(rt, "stream"),
		}
	}
	return in
}

func pairPayload(p flowhost.JoinPair) []byte {
	return fmt.Appendf(nil, "%s:%s@%d+%s@%d", p.Key, p.Left.Payload, p.Left.EventTimestamp, p.Right.Payload, p.Right.EventTimestamp)
}

// modelInterval computes the matches and expired records per key straight
// from the input, with no batches or ABI: before each record every held
// record whose expiry the watermark has reached leaves, in (expiry,
// arrival) order, and comes out if it never matched; the record then
// matches every held record of the other side in range, in arrival order.
func modelInterval(in []windowInput, bound, lower, upper int64) (matches, expired map[string][]string) {
	type held struct {
		r       windowInput
		matched bool
	}
	expiry := func(r windowInput) int64 {
		if r.stream == "R" {
			return r.ts - lower + 1
		}
		return r.ts + upper + 1
	}
	state := map[string][]held{}
	matches, expired = map[string][]string{}, map[string][]string{}
	expire := func(wm int64) {
		for key, hs := range state {
			var gone, kept []held
			for _, h := range hs {
				if expiry(h.r) <= wm {
					gone = append(gone, h)
				} else {
					kept = append(kept, h)
				}
			}
			slices.SortStableFunc(gone, func(a, b held) int { return int(expiry(a.r) - expiry(b.r)) })
			for _, h := range gone {
				if !h.matched {
					expired[key] = append(expired[key], strconv.FormatInt(h.r.value, 10))
				}
			}
			state[key] = kept
		}
	}
	for l, r := range in {
		expire(watermarkAt(in, l, bound))
		n := held{r: r}
		for i := range state[r.key] {
			h := &state[r.key][i]
			if h.r.stream == r.stream {
				continue
			}
			left, right := h.r, r
			if r.stream == "L" {
				left, right = right, left
			}
			if d := right.ts - left.ts; d < lower || d > upper {
				continue
			}
			h.matched, n.matched = true, true
			matches[r.key] = append(matches[r.key], fmt.Sprintf("%s:%d@%d+%d@%d", r.key, left.value, left.ts, right.value, right.ts))
		}
		state[r.key] = append(state[r.key], n)
	}
	expire(watermarkAt(in, len(in), bound))
	return matches, expired
}

var intervalBounds = []struct {
	name         string
	lower, upper int64
}{
	{"symmetric", -3, 3},
	{"equal-times", 0, 0},
	{"right-after-left", 1, 6},
	{"right-before-left", -6, -2},
}

// TestIntervalJoinMatchesModel checks the interval join against the model
// for batch sizes 1, 7 and 1000 on random out-of-order input, and that
// every record either matched or came out expired.
func TestIntervalJoinMatchesModel(t *testing.T) {
	for _, bd := range intervalBounds {
		t.Run(bd.name, func(t *testing.T) {
			var sawMatch, sawExpired bool
			rapid.Check(t, func(rt *rapid.T) {
				in := joinInputs(rt, "L", "R")
				bound := rapid.Int64Range(0, 8).Draw(rt, "bound")
				wantM, wantX := modelInterval(in, bound, bd.lower, bd.upper)
				sawMatch = sawMatch || len(wantM) > 0
				sawExpired = sawExpired || len(wantX) > 0
				c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
					j := flowhost.NewIntervalJoin("L", "R", time.Duration(bd.lower), time.Duration(bd.upper), pairPayload, "out", "expired")
					for k := range b.Keys() {
						if err := j.Process(k); err != nil {
							return err
						}
					}
					return nil
				}}
				var gotM, gotX map[string][]string
				for _, size := range []int{1, 7, 1000} {
					got := driveHost(t, c, in, bound, size)
					gotM, gotX = orEmpty(got["out"]), orEmpty(got["expired"])
					if !equalPerKey(gotM, wantM) || !equalPerKey(gotX, wantX) {
						rt.Fatalf("batch size %d:\n matches %v\n want    %v\n expired %v\n want    %v", size, gotM, wantM, gotX, wantX)
					}
				}
				// Nothing is dropped: each record matched or expired.
				seen := map[string]bool{}
				for _, ms := range gotM {
					for _, m := range ms {
						_, pair, _ := strings.Cut(m, ":")
						l, r, _ := strings.Cut(pair, "+")
						seen[strings.Split(l, "@")[0]], seen[strings.Split(r, "@")[0]] = true, true
					}
				}
				for _, xs := range gotX {
					for _, x := range xs {
						if seen[x] {
							rt.Fatalf("record %s matched and expired", x)
						}
						seen[x] = true
					}
				}
				if len(seen) != len(in) {
					rt.Fatalf("%d records, %d matched or expired", len(in), len(seen))
				}
			})
			if !sawMatch || !sawExpired {
				t.Fatalf("no input had matches (%v) or expired records (%v)", sawMatch, sawExpired)
			}
		})
	}
}

// modelEnrich enriches each event with the key's last table value before
// it in input order; an empty table payload deletes the value.
func modelEnrich(in []windowInput) (out, unmatched map[string][]string) {
	value := map[string]string{}
	out, unmatched = map[string][]string{}, map[string][]string{}
	for _, r := range in {
		p := strconv.FormatInt(r.value, 10)
		switch {
		case r.stream == "T" && r.empty:
			delete(value, r.key)
		case r.stream == "T":
			value[r.key] = p
		case value[r.key] == "":
			unmatched[r.key] = append(unmatched[r.key], p)
		default:
			out[r.key] = append(out[r.key], p+"<"+value[r.key])
		}
	}
	return out, unmatched
}

// TestEnrichJoinMatchesModel checks the enrichment join against the model
// for batch sizes 1, 7 and 1000, tombstones included.
func TestEnrichJoinMatchesModel(t *testing.T) {
	var sawOut, sawUnmatched bool
	rapid.Check(t, func(rt *rapid.T) {
		in := joinInputs(rt, "T", "E")
		for i := range in {
			in[i].empty = in[i].stream == "T" && rapid.IntRange(0, 3).Draw(rt, "tombstone") == 0
		}
		wantO, wantU := modelEnrich(in)
		sawOut = sawOut || len(wantO) > 0
		sawUnmatched = sawUnmatched || len(wantU) > 0
		c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
			e := flowhost.NewEnrichJoin("T", "E", func(ev flowhost.Message, v flowhost.JoinRecord) []byte {
				return fmt.Appendf(nil, "%s<%s", ev.Payload, v.Payload)
			}, "out", "unmatched")
			for k := range b.Keys() {
				if err := e.Process(k); err != nil {
					return err
				}
			}
			return nil
		}}
		for _, size := range []int{1, 7, 1000} {
			got := driveHost(t, c, in, 0, size)
			gotO, gotU := orEmpty(got["out"]), orEmpty(got["unmatched"])
			if !equalPerKey(gotO, wantO) || !equalPerKey(gotU, wantU) {
				rt.Fatalf("batch size %d:\n out %v\n want %v\n unmatched %v\n want %v", size, gotO, wantO, gotU, wantU)
			}
		}
	})
	if !sawOut || !sawUnmatched {
		t.Fatalf("no input had enriched (%v) or unmatched (%v) events", sawOut, sawUnmatched)
	}
}

func TestJoinRefusesOtherStreams(t *testing.T) {
	msg := abi.Message{ID: "refunds/p0:1", Stream: "refunds", Payload: []byte("x")}
	for name, c := range map[string]func(*flowhost.Key) error{
		"interval": flowhost.NewIntervalJoin("L", "R", -1, 1, pairPayload, "out", "expired").Process,
		"enrich":   flowhost.NewEnrichJoin("T", "E", func(flowhost.Message, flowhost.JoinRecord) []byte { return nil }, "out", "unmatched").Process,
	} {
		t.Run(name, func(t *testing.T) {
			comp := flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					_ = c(k)
				}
				return nil
			}}
			resp, err := flowhost.Run(comp, nil, &abi.Request{ABI: 1, Kind: abi.KindTransform, Keys: []abi.RequestKey{{Key: "k", Messages: []abi.Message{msg}}}})
			if err != nil || len(resp.Keys) != 1 {
				t.Fatalf("run: %v %+v", err, resp)
			}
			for _, want := range []string{"refunds/p0:1", `"refunds"`} {
				if !strings.Contains(resp.Keys[0].Error, want) {
					t.Fatalf("error %q does not name %s", resp.Keys[0].Error, want)
				}
			}
		})
	}
}

// TestJoinBadStateFailsTheKey requires a state the helper did not write to
// fail the key, with an error that says which byte, and no output.
func TestJoinBadStateFailsTheKey(t *testing.T) {
	for name, c := range map[string]func(*flowhost.Key) error{
		"interval": flowhost.NewIntervalJoin("L", "R", -1, 1, pairPayload, "out", "expired").Process,
		"enrich":   flowhost.NewEnrichJoin("T", "E", func(flowhost.Message, flowhost.JoinRecord) []byte { return nil }, "out", "unmatched").Process,
	} {
		t.Run(name, func(t *testing.T) {
			var got error
			comp := flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					got = c(k)
				}
				return nil
			}}
			key := abi.RequestKey{Key: "k", State: []byte{1, 'W'}, Messages: []abi.Message{{ID: "m", Stream: "L", Payload: []byte("x")}}}
			resp, err := flowhost.Run(comp, nil, &abi.Request{ABI: 1, Kind: abi.KindTransform, Keys: []abi.RequestKey{key}})
			if err != nil || len(resp.Keys) != 1 {
				t.Fatalf("run: %v %+v", err, resp)
			}
			k := resp.Keys[0]
			if !errors.Is(got, flowhost.ErrJoinState) || !strings.Contains(k.Error, "at byte 1") || len(k.Emits) != 0 {
				t.Fatalf("key error %q (returned %v), emits %v", k.Error, got, k.Emits)
			}
		})
	}
}

// TestIntervalJoinTimerHoldsOldest requires the expiry timer to carry the
// smallest event time of the records it expires, whichever came first:
// while it is pending it holds the output watermark back to the oldest
// record that may still come out on the expired stream.
func TestIntervalJoinTimerHoldsOldest(t *testing.T) {
	// With lower 1, upper 6, a left record at 10 and a right one at 17
	// both expire at 17 and do not match (17 - 10 > 6).
	left := abi.Message{ID: "l", Stream: "L", EventTimestamp: 10, Payload: []byte("l")}
	right := abi.Message{ID: "r", Stream: "R", EventTimestamp: 17, Payload: []byte("r")}
	for name, ms := range map[string][]abi.Message{"left first": {left, right}, "right first": {right, left}} {
		t.Run(name, func(t *testing.T) {
			j := flowhost.NewIntervalJoin("L", "R", 1, 6, pairPayload, "out", "expired")
			comp := flowhost.Computation{Process: func(b *flowhost.Batch) error {
				for k := range b.Keys() {
					_ = j.Process(k)
				}
				return nil
			}}
			resp, err := flowhost.Run(comp, nil, &abi.Request{ABI: 1, Kind: abi.KindTransform, Keys: []abi.RequestKey{{Key: "k", Messages: ms}}})
			if err != nil || len(resp.Keys) != 1 {
				t.Fatalf("run: %v %+v", err, resp)
			}
			k := resp.Keys[0]
			last := k.TimersSet[len(k.TimersSet)-1]
			if len(k.Emits) != 0 || last.TriggerTimestamp != 17 || *last.EventTimestamp != 10 {
				t.Fatalf("emits %v, timers %+v", k.Emits, k.TimersSet)
			}
		})
	}
}
