package conformance

import (
	"slices"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// GoJoinComputation is the join guest's computation (joinguest/, a
// package main and so not importable) for the SDKs' tests to compare
// their join guests with: the Go SDK's IntervalJoin (streams left and
// right, bounds lower and upper in ns, outputs joined and expired) or
// EnrichJoin (table and events, outputs enriched and unmatched), with
// payloads joined by one '|' byte, every key passed to the helper.
func GoJoinComputation(interval bool, lower, upper int64) flowhost.Computation {
	pipe := func(a, b []byte) []byte { return slices.Concat(a, []byte{'|'}, b) }
	var process func(*flowhost.Key) error
	if interval {
		j := flowhost.NewIntervalJoin("left", "right", time.Duration(lower), time.Duration(upper),
			func(p flowhost.JoinPair) []byte { return pipe(p.Left.Payload, p.Right.Payload) }, "joined", "expired")
		process = j.Process
	} else {
		e := flowhost.NewEnrichJoin("table", "events",
			func(ev flowhost.Message, v flowhost.JoinRecord) []byte { return pipe(ev.Payload, v.Payload) }, "enriched", "unmatched")
		process = e.Process
	}
	return flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = process(k) // the helper has failed the key itself
		}
		return nil
	}}
}
