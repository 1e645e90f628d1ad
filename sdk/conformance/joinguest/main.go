// Command joinguest is the Go SDK's join conformance guest
// (sdk/conformance/README.md, "The join guest"; the contract is
// sdk/JOINS.md): a transform that hands every key of each batch to the
// SDK's interval or enrichment join helper, configured by its Init
// parameters, so that the real-host join test of sdk/conformance can run
// it through the runtime and compare its outputs with a model computed
// from the input.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o joinguest.wasm ./sdk/conformance/joinguest
//
// Parameters: join (interval or enrich); for interval lower_ns and
// upper_ns (lower_ns <= upper_ns). Interval: streams left and right,
// matches on joined as `<left payload>|<right payload>`, never-matched
// records on expired unchanged. Enrich: streams table and events,
// enriched events on enriched as `<event payload>|<table payload>`, events
// without a value on unmatched unchanged.
package main

import (
	"fmt"
	"math"
	"slices"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

// The streams the join test declares.
const (
	left, right, joined, expired       = "left", "right", "joined", "expired"
	table, events, enriched, unmatched = "table", "events", "enriched", "unmatched"
)

// interval and enrich are the helper Init configured; exactly one is set
// once Init succeeded.
var (
	interval *flowhost.IntervalJoin
	enrich   *flowhost.EnrichJoin
)

func init() {
	flowhost.Register(computation)
}

// computation is a variable so that tests can run it natively.
var computation = flowhost.Computation{Init: start, Process: process}

func main() {}

// pipe joins two payloads with one '|' byte, exactly.
func pipe(a, b []byte) []byte {
	return slices.Concat(a, []byte{'|'}, b)
}

// start reads the parameters and refuses to start, naming the parameter,
// when one is missing or out of range. The bounds are checked here rather
// than left to NewIntervalJoin, which panics on them.
func start(p flowhost.Params) error {
	interval, enrich = nil, nil
	kind, err := p.String("join")
	if err != nil {
		return err
	}
	switch kind {
	case "interval":
		lower, err := p.Int("lower_ns")
		if err != nil {
			return err
		}
		upper, err := p.Int("upper_ns")
		if err != nil {
			return err
		}
		if lower == math.MinInt64 {
			return fmt.Errorf("parameter %q: expected an integer above %d; got %d", "lower_ns", int64(math.MinInt64), lower)
		}
		if lower > upper {
			return fmt.Errorf("parameter %q: expected at most upper_ns (%d); got %d", "lower_ns", upper, lower)
		}
		interval = flowhost.NewIntervalJoin(left, right, time.Duration(lower), time.Duration(upper),
			func(jp flowhost.JoinPair) []byte { return pipe(jp.Left.Payload, jp.Right.Payload) }, joined, expired)
	case "enrich":
		enrich = flowhost.NewEnrichJoin(table, events,
			func(ev flowhost.Message, v flowhost.JoinRecord) []byte { return pipe(ev.Payload, v.Payload) }, enriched, unmatched)
	default:
		return fmt.Errorf("parameter %q: expected interval or enrich; got %q", "join", kind)
	}
	return nil
}

// process hands every key of the batch to the helper, and does nothing
// else. A key the helper fails (a bad state, a message of another stream)
// has its inputs dead-lettered; the other keys of the batch go on.
func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		if interval != nil {
			_ = interval.Process(k)
		} else {
			_ = enrich.Process(k)
		}
	}
	return nil
}
