package flowhost_test

import (
	"fmt"
	"time"

	"github.com/flowhost/flowhost/abi"
	flowhost "github.com/flowhost/flowhost/sdk/go"
)

func runKey(c flowhost.Computation, k abi.RequestKey) abi.ResponseKey {
	resp, err := flowhost.Run(c, nil, &abi.Request{ABI: abi.Version, Kind: abi.KindTransform, Keys: []abi.RequestKey{k}})
	if err != nil {
		panic(err)
	}
	return resp.Keys[0]
}

// Orders and payments of one order id match when the payment is at most
// a minute before or after the order; a side left alone comes out on
// "unmatched" when its expiry timer fires.
func ExampleIntervalJoin() {
	j := flowhost.NewIntervalJoin("orders", "payments", -time.Minute, time.Minute,
		func(p flowhost.JoinPair) []byte {
			return fmt.Appendf(nil, "%s paid by %s", p.Left.Payload, p.Right.Payload)
		}, "joined", "unmatched")
	c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = j.Process(k) // on error the key is failed: its inputs go to dead letters
		}
		return nil
	}}
	first := runKey(c, abi.RequestKey{Key: `["o-1"]`, Messages: []abi.Message{
		{ID: "orders/p0:1", Stream: "orders", EventTimestamp: 0, Payload: []byte("order o-1")},
		{ID: "payments/p0:1", Stream: "payments", EventTimestamp: 30e9, Payload: []byte("card")},
	}})
	for _, e := range first.Emits {
		fmt.Printf("%s: %s (event time %ds, parents %v)\n", e.Stream, e.Payload, *e.EventTimestamp/1e9, e.Parents)
	}
	for _, t := range first.TimersSet {
		fmt.Printf("expiry timer at %dns\n", t.TriggerTimestamp)
	}
	// Much later a second payment arrives; the order has expired (matched,
	// so it is not reported) and the payment's own timer is due at once.
	second := runKey(c, abi.RequestKey{Key: `["o-1"]`, State: first.State,
		Timers:   []abi.DueTimer{{ID: "t1", TriggerTimestamp: 60e9 + 1}},
		Messages: []abi.Message{{ID: "payments/p0:2", Stream: "payments", EventTimestamp: 100e9, Payload: []byte("cash")}},
	})
	third := runKey(c, abi.RequestKey{Key: `["o-1"]`, State: second.State,
		Timers: []abi.DueTimer{{ID: "t2", TriggerTimestamp: 90e9 + 1}, {ID: "t3", TriggerTimestamp: 160e9 + 1}},
	})
	for _, e := range third.Emits {
		fmt.Printf("%s: %s\n", e.Stream, e.Payload)
	}
	fmt.Println("state:", third.StateOp)
	// Output:
	// joined: order o-1 paid by card (event time 30s, parents [0 1])
	// expiry timer at 60000000001ns
	// expiry timer at 90000000001ns
	// unmatched: cash
	// state: delete
}

// Orders are enriched with the latest customer record of their key; an
// empty customer record deletes it, and an order with no customer goes to
// "no-customer" instead of waiting.
func ExampleEnrichJoin() {
	e := flowhost.NewEnrichJoin("customers", "orders",
		func(order flowhost.Message, customer flowhost.JoinRecord) []byte {
			return fmt.Appendf(nil, "%s for %s", order.Payload, customer.Payload)
		}, "enriched", "no-customer")
	c := flowhost.Computation{Process: func(b *flowhost.Batch) error {
		for k := range b.Keys() {
			_ = e.Process(k)
		}
		return nil
	}}
	k := runKey(c, abi.RequestKey{Key: `["c-1"]`, Messages: []abi.Message{
		{ID: "o1", Stream: "orders", Payload: []byte("order 1")},
		{ID: "c1", Stream: "customers", Payload: []byte("Ann")},
		{ID: "o2", Stream: "orders", Payload: []byte("order 2")},
		{ID: "c2", Stream: "customers", Payload: nil}, // tombstone
		{ID: "o3", Stream: "orders", Payload: []byte("order 3")},
	}})
	for _, e := range k.Emits {
		fmt.Printf("%s: %s\n", e.Stream, e.Payload)
	}
	fmt.Println("state:", k.StateOp)
	// Output:
	// no-customer: order 1
	// enriched: order 2 for Ann
	// no-customer: order 3
	// state: keep
}
