// Command order-join is an example flowhost computation of kind transform
// that joins two streams: orders and payments, matched by order_id. The
// pipeline groups it by order_id, so each order id is a key with its own
// state and timers. It is built on the Go SDK's interval join
// (flowhost.NewIntervalJoin, sdk/JOINS.md), which owns that state and
// those timers.
//
// An order and a payment of one order id are joined when their event
// times are at most expire apart (parameter, default 30m), whichever comes
// first. Each pair is emitted once on the stream named by the parameter
// joined: every field of the order, every field of the payment the order
// does not have, and
//
//	"ordered_at", "paid_at"   the two EventTimestamps, RFC 3339 (UTC)
//	"order_message"           the message_id of the order
//	"payment_message"         the message_id of the payment
//
// The joined record's EventTimestamp is the later of the two event times:
// the moment the pair became complete. The join is many-to-many: a second
// order (or payment) of one order id within expire joins as well.
//
// # Parents and lineage
//
// An emit's parents can only be inputs of the current batch: the messages
// and fired timers the host handed over with this key. The side that
// arrived earlier is no longer an input (it was delivered, committed and
// kept only as bytes in the key's state), so it cannot be named. The joined
// record therefore names as parents the side in this batch, or both when
// both arrived in the same batch, and carries the earlier side's
// message_id in its payload (order_message / payment_message) so that the
// whole lineage stays traceable.
//
// # Expiry
//
// Every order and payment waits in state with a timer at its
// EventTimestamp + expire + 1: the host fires it once the watermark has
// passed the last event time a matching side could have. A side that was
// never joined by then is emitted on the stream named by unmatched as
//
//	{"order_id":"o-7","reason":"expired","side":"order","message":"...","record":{...}}
//
// with the timer as its parent; one that was joined leaves silently.
// Nothing is dropped, so unmatched must be declared and expire must be
// positive.
//
// Parameters (defaults in plugin.template.yaml): orders and payments name
// the input streams; joined and unmatched the output streams; expire.
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	flowhost "github.com/flowhost/flowhost/sdk/go"
)

var config struct {
	orders, payments  string
	joined, unmatched string
	expire            time.Duration
}

// pairs is built by initialize from the parameters.
var pairs *flowhost.IntervalJoin

func init() {
	flowhost.Register(flowhost.Computation{Init: initialize, Process: process})
}

func initialize(p flowhost.Params) error {
	str := func(name, def string) (string, error) {
		if !p.Has(name) {
			return def, nil
		}
		return p.String(name)
	}
	var err error
	if config.orders, err = str("orders", "orders"); err != nil {
		return err
	}
	if config.payments, err = str("payments", "payments"); err != nil {
		return err
	}
	if config.orders == config.payments {
		return fmt.Errorf("parameters \"orders\" and \"payments\" name the same stream %q", config.orders)
	}
	if config.joined, err = str("joined", "joined"); err != nil {
		return err
	}
	if config.unmatched, err = str("unmatched", "unmatched"); err != nil {
		return err
	}
	config.expire = 30 * time.Minute
	if p.Has("expire") {
		if config.expire, err = p.Duration("expire"); err != nil {
			return err
		}
		if config.expire <= 0 {
			return fmt.Errorf("parameter \"expire\": must be positive (a join without a bound would hold every record forever), got %s", config.expire)
		}
	}
	outs := p.OutputStreams()
	for _, s := range []struct{ param, stream string }{{"joined", config.joined}, {"unmatched", config.unmatched}} {
		if !slices.Contains(outs, s.stream) {
			return fmt.Errorf("output stream %q (parameter %q) is not declared; output_streams: [%s]", s.stream, s.param, strings.Join(outs, ", "))
		}
	}
	pairs = flowhost.NewIntervalJoin(config.orders, config.payments, -config.expire, config.expire,
		joined, config.joined, config.unmatched, flowhost.WithExpired(expired))
	return nil
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		if err := check(k); err != nil {
			k.Fail(err)
			continue
		}
		_ = pairs.Process(k) // on error the key is failed: its inputs go to dead letters
	}
	return nil
}

// check refuses a key whose messages are not JSON objects of the two
// streams before the join holds any of them: the join functions below
// then only see valid records.
func check(k *flowhost.Key) error {
	for m := range k.Messages() {
		if m.Stream != config.orders && m.Stream != config.payments {
			return fmt.Errorf("message %s: stream %q is neither the orders stream %q nor the payments stream %q (parameters orders, payments)",
				m.ID, m.Stream, config.orders, config.payments)
		}
		var record map[string]json.RawMessage
		if err := json.Unmarshal(m.Payload, &record); err != nil {
			return fmt.Errorf("message %s on %s: payload is not a JSON object: %w", m.ID, m.Stream, err)
		}
	}
	return nil
}

func record(r flowhost.JoinRecord) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(r.Payload, &m) // checked when it arrived
	return m
}

// joined builds the joined record of an order (left) and a payment (right).
func joined(p flowhost.JoinPair) []byte {
	order, payment := record(p.Left), record(p.Right)
	out := make(map[string]any, len(order)+len(payment)+4)
	for f, v := range payment {
		out[f] = v
	}
	for f, v := range order {
		out[f] = v // the order's fields win, order_id included
	}
	out["ordered_at"], out["paid_at"] = formatTime(p.Left.EventTimestamp), formatTime(p.Right.EventTimestamp)
	out["order_message"], out["payment_message"] = p.Left.ID, p.Right.ID
	b, _ := json.Marshal(out) // strings and raw JSON already checked
	return b
}

// expired reports a side that was never joined.
func expired(r flowhost.JoinRecord) []byte {
	side := "order"
	if r.Stream == config.payments {
		side = "payment"
	}
	rec := record(r)
	b, _ := json.Marshal(map[string]any{
		"order_id": rec["order_id"], "reason": "expired", "side": side, "message": r.ID, "record": rec,
	})
	return b
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func main() {}
