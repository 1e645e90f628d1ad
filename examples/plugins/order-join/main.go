// Command order-join is an example flowhost computation of kind transform
// that joins two streams: orders and payments, matched by order_id. The
// pipeline groups it by order_id, so each order id is a key with its own
// state and timers.
//
// Whichever side of an order arrives first waits in the key's state. When
// the other side arrives, order-join emits one joined record on the
// stream named by the parameter joined: every field of the order, every
// field of the payment the order does not have, and
//
//	"ordered_at", "paid_at"   the two EventTimestamps, RFC 3339 (UTC)
//	"order_message"           the message_id of the order
//	"payment_message"         the message_id of the payment
//
// and deletes the key's state. The joined record's EventTimestamp is the
// later of the two event times: the moment the pair became complete.
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
// With expire > 0 (a duration, default 30m), the first side of an order
// also sets a timer at its EventTimestamp + expire. If the timer fires
// (the host fires it once the watermark reaches it) before the other side
// came, the waiting side is emitted on the stream named by unmatched as
//
//	{"order_id":"o-7","reason":"expired","side":"order","message":"...","record":{...}}
//
// and the state is deleted. A match cancels the timer. A second order (or
// payment) for an order id that already has one waiting is emitted on
// unmatched with reason "duplicate" rather than joined twice. expire: 0
// turns expiry off; then unmatched need not be declared and duplicates are
// only logged.
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
	joined, unmatched string // unmatched is "" when not declared
	expire            time.Duration
}

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
	if config.joined, err = str("joined", "joined"); err != nil {
		return err
	}
	unmatched, err := str("unmatched", "unmatched")
	if err != nil {
		return err
	}
	config.expire = 0
	if p.Has("expire") {
		if config.expire, err = p.Duration("expire"); err != nil {
			return err
		}
		if config.expire < 0 {
			return fmt.Errorf("parameter \"expire\": must not be negative, got %s", config.expire)
		}
	}
	outs := p.OutputStreams()
	if !slices.Contains(outs, config.joined) {
		return fmt.Errorf("output stream %q (parameter \"joined\") is not declared; output_streams: [%s]", config.joined, strings.Join(outs, ", "))
	}
	config.unmatched = ""
	if slices.Contains(outs, unmatched) {
		config.unmatched = unmatched
	} else if config.expire > 0 {
		return fmt.Errorf("expire is %s but output stream %q (parameter \"unmatched\") is not declared: declare it in output_streams or set expire: 0", config.expire, unmatched)
	}
	return nil
}

// side is one waiting half of a pair, as kept in the key's state.
type side struct {
	Message string                     `json:"message"`
	Event   int64                      `json:"event_ts"`
	Record  map[string]json.RawMessage `json:"record"`
	input   int                        // index among the batch's inputs; -1 when it came from state
}

// joinState is a key's state: at most one waiting side, and the trigger of
// its expiry timer (0: none).
type joinState struct {
	Order   *side `json:"order,omitempty"`
	Payment *side `json:"payment,omitempty"`
	Expire  int64 `json:"expire,omitempty"`
}

func process(b *flowhost.Batch) error {
	for k := range b.Keys() {
		if err := joinKey(k); err != nil {
			k.Fail(err)
		}
	}
	return nil
}

func joinKey(k *flowhost.Key) error {
	var st joinState
	changed := false // whether st differs from the stored state
	raw, had := k.State()
	if had {
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("state of key %s: %w", k.Key(), err)
		}
		for _, s := range []*side{st.Order, st.Payment} {
			if s != nil {
				s.input = -1
			}
		}
	}
	for t := range k.Timers() {
		if st.Expire == 0 || t.TriggerTimestamp < st.Expire {
			continue // a timer of a pair that has since been joined
		}
		for _, s := range []struct {
			name string
			s    *side
		}{{"order", st.Order}, {"payment", st.Payment}} {
			if s.s != nil {
				if err := emitUnmatched(k, "expired", s.name, s.s); err != nil {
					return err
				}
			}
		}
		st, changed = joinState{}, true
	}
	for m := range k.Messages() {
		var record map[string]json.RawMessage
		if err := json.Unmarshal(m.Payload, &record); err != nil {
			return fmt.Errorf("message %s on %s: payload is not a JSON object: %w", m.ID, m.Stream, err)
		}
		arrived := &side{Message: m.ID, Event: m.EventTimestamp, Record: record, input: m.Input}
		var mine, other **side
		var name string
		switch m.Stream {
		case config.orders:
			mine, other, name = &st.Order, &st.Payment, "order"
		case config.payments:
			mine, other, name = &st.Payment, &st.Order, "payment"
		default:
			return fmt.Errorf("message %s: stream %q is neither the orders stream %q nor the payments stream %q (parameters orders, payments)",
				m.ID, m.Stream, config.orders, config.payments)
		}
		if *mine != nil {
			if err := emitUnmatched(k, "duplicate", name, arrived); err != nil {
				return err
			}
			continue
		}
		*mine, changed = arrived, true
		if *other == nil {
			if config.expire > 0 {
				st.Expire = m.EventTimestamp + int64(config.expire)
				// The timer carries the waiting side's event time: while it
				// is pending it holds the output watermark back to it, as
				// an unmatched record of that time may still come out.
				k.SetTimer(st.Expire, flowhost.WithTimerEventTimestamp(m.EventTimestamp))
			}
			continue
		}
		if err := emitJoined(k, st.Order, st.Payment); err != nil {
			return err
		}
		if st.Expire != 0 {
			k.CancelTimer(st.Expire)
		}
		st = joinState{}
	}
	switch {
	case !changed:
	case st.Order == nil && st.Payment == nil:
		if had {
			k.DeleteState()
		}
	default:
		raw, err := json.Marshal(&st)
		if err != nil {
			return err
		}
		k.SetState(raw)
	}
	return nil
}

// emitJoined emits the pair. Its parents are the sides that are inputs of
// this batch: the one waiting in state is not (see the package comment).
func emitJoined(k *flowhost.Key, order, payment *side) error {
	out := make(map[string]json.RawMessage, len(order.Record)+len(payment.Record)+4)
	for f, v := range payment.Record {
		out[f] = v
	}
	for f, v := range order.Record {
		out[f] = v // the order's fields win, order_id included
	}
	for f, v := range map[string]any{
		"ordered_at": formatTime(order.Event), "paid_at": formatTime(payment.Event),
		"order_message": order.Message, "payment_message": payment.Message,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out[f] = b
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return err
	}
	var parents []int
	for _, s := range []*side{order, payment} {
		if s.input >= 0 {
			parents = append(parents, s.input)
		}
	}
	k.Emit(config.joined, payload, flowhost.WithParents(parents...), flowhost.WithEventTimestamp(max(order.Event, payment.Event)))
	return nil
}

// emitUnmatched reports a side that will not be joined. Its parent is the
// input being iterated (the expiry timer, or the duplicate message).
func emitUnmatched(k *flowhost.Key, reason, name string, s *side) error {
	if config.unmatched == "" {
		flowhost.Logf(flowhost.LevelWarn, "order-join: key %s: %s %s %s (no unmatched stream declared)", k.Key(), reason, name, s.Message)
		return nil
	}
	payload, err := json.Marshal(map[string]any{
		"order_id": s.Record["order_id"], "reason": reason, "side": name, "message": s.Message, "record": s.Record,
	})
	if err != nil {
		return err
	}
	k.Emit(config.unmatched, payload)
	return nil
}

func formatTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func main() {}
