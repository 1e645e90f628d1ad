package examples_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/examples/internal/orders"
	"github.com/flowhost/flowhost/host/connect"
)

// joinData is a generated data set in the files join.yaml reads, plus a
// payment for an order that does not exist.
func joinData(t *testing.T, cfg orders.Config) (orders.Dataset, map[string][]byte) {
	t.Helper()
	d := orders.Generate(cfg)
	last := d.Payments[len(d.Payments)-1]
	d.Payments = append(d.Payments, orders.Payment{
		OrderID: "o-99999", PaymentID: "p-orphan", Method: "card", Event: last.Event, Write: last.Write + 1,
	})
	dir := t.TempDir()
	ordersPath, paymentsPath := filepath.Join(dir, "orders.jsonl"), filepath.Join(dir, "payments.jsonl")
	require.NoError(t, d.WriteFiles(ordersPath, paymentsPath))
	files := map[string][]byte{}
	for rel, p := range map[string]string{"data/orders.jsonl": ordersPath, "data/payments.jsonl": paymentsPath} {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files[rel] = data
	}
	return d, files
}

// TestOrderJoin runs examples/pipelines/join.yaml unchanged and requires
// every paid order to be joined with its payment exactly once, with the
// fields of both, their event times, and as parents exactly the sides that
// were inputs of the batch that made the pair (read from the trace); the
// unpaid orders and the orphan payment must come out on unmatched when
// their expiry timers fire.
func TestOrderJoin(t *testing.T) {
	t.Parallel()
	d, files := joinData(t, orders.Config{Orders: 300, Span: 10 * time.Minute, UnpaidEvery: 25, Seed: 3})
	r := runPipeline(t, "join", files)
	require.Empty(t, r.dead)

	inputs := traceByID(t, r.trace, "join")
	// delivery finds the trace record of an order's order or payment.
	delivery := map[[2]string]string{} // (order id, stream) -> message id
	for id, tr := range inputs {
		var key []string
		require.NoError(t, json.Unmarshal([]byte(tr.Key), &key), "trace key %q", tr.Key)
		require.Len(t, key, 1)
		k := [2]string{key[0], tr.Stream}
		_, dup := delivery[k]
		require.False(t, dup, "%s of %s delivered twice", tr.Stream, key[0])
		delivery[k] = id
	}

	orderOf := map[string]orders.Order{}
	for _, o := range d.Orders {
		orderOf[o.ID] = o
	}
	paymentOf := map[string]orders.Payment{}
	for _, p := range d.Payments {
		paymentOf[p.OrderID] = p
	}

	joined := map[string]int{}
	for _, rec := range r.stream("joined") {
		p := payloadMap(t, rec)
		id := p["order_id"].(string)
		joined[id]++
		o, ok := orderOf[id]
		require.True(t, ok, "joined an order that does not exist: %s", id)
		pay, ok := paymentOf[id]
		require.True(t, ok, "joined unpaid order %s", id)
		require.Equal(t, o.Customer, p["customer"])
		require.Equal(t, o.Amount, p["amount"])
		require.Equal(t, o.Currency, p["currency"])
		require.Equal(t, pay.PaymentID, p["payment_id"])
		require.Equal(t, pay.Method, p["method"])
		require.Equal(t, time.Unix(0, o.Event).UTC().Format(time.RFC3339Nano), p["ordered_at"])
		require.Equal(t, time.Unix(0, pay.Event).UTC().Format(time.RFC3339Nano), p["paid_at"])
		require.Equal(t, max(o.Event, pay.Event), rec.EventTS, "joined %s: event time is when the pair became complete", id)

		orderMsg, payMsg := delivery[[2]string{id, "orders"}], delivery[[2]string{id, "payments"}]
		require.Equal(t, orderMsg, p["order_message"])
		require.Equal(t, payMsg, p["payment_message"])
		// Parents: the sides delivered in the batch that made the pair,
		// which is the later one's; the earlier side was only in state.
		oe, pe := inputs[orderMsg].Epoch, inputs[payMsg].Epoch
		require.Equal(t, inputs[orderMsg].Partition, inputs[payMsg].Partition)
		var want []string
		switch {
		case oe == pe:
			want = []string{orderMsg, payMsg}
		case oe > pe:
			want = []string{orderMsg}
		default:
			want = []string{payMsg}
		}
		require.ElementsMatch(t, want, rec.Parents, "parents of joined %s (order in epoch %d, payment in %d)", id, oe, pe)
	}
	for _, o := range d.Orders {
		_, paid := paymentOf[o.ID]
		if paid {
			require.Equal(t, 1, joined[o.ID], "order %s joined %d times", o.ID, joined[o.ID])
		} else {
			require.Zero(t, joined[o.ID], "unpaid order %s joined", o.ID)
		}
	}

	type miss struct{ id, side, reason string }
	var want, got []miss
	for _, o := range d.Orders {
		if _, paid := paymentOf[o.ID]; !paid {
			want = append(want, miss{o.ID, "order", "expired"})
		}
	}
	want = append(want, miss{"o-99999", "payment", "expired"})
	for _, rec := range r.stream("unmatched") {
		p := payloadMap(t, rec)
		got = append(got, miss{p["order_id"].(string), p["side"].(string), p["reason"].(string)})
		require.Len(t, rec.Parents, 1, "an expired side's parent is its timer")
	}
	require.ElementsMatch(t, want, got)
}

// TestJoinBadInput feeds join.yaml a line that is not JSON and a payload
// without the group_by field: both land in the dead-letter file, each
// named by file and line, and every other order is still joined.
func TestJoinBadInput(t *testing.T) {
	t.Parallel()
	d, files := joinData(t, orders.Config{Orders: 20, Span: time.Minute, Seed: 4})
	good := lines(string(files["data/orders.jsonl"]))
	bad := []string{
		good[0], good[1],
		`{"write_ts":1, "payload": {"order_id": "o-x"`, // line 3: cut short
		good[2],
		`{"payload":{"customer":"nobody","amount":"1.00"}}`, // line 5: no order_id
	}
	bad = append(bad, good[3:]...)
	files["data/orders.jsonl"] = []byte(strings.Join(bad, "\n") + "\n")

	r := runPipeline(t, "join", files)
	ordersPath := filepath.Join(r.dir, "data", "orders.jsonl")
	require.Len(t, r.dead, 2, "%+v", r.dead)
	byLine := map[string]deadLetter{}
	for _, dl := range r.dead {
		byLine[lineOf(t, ordersPath, dl.Origin)] = dl
	}
	require.Contains(t, byLine, "3")
	require.Equal(t, connect.StageIngest, byLine["3"].Stage)
	require.Contains(t, byLine, "5")
	require.Equal(t, connect.StageKey, byLine["5"].Stage)
	require.Contains(t, byLine["5"].Error, "order_id")
	require.Len(t, r.stream("joined"), len(d.Orders), "every good order is joined")
	require.Len(t, r.stream("unmatched"), 1, "the orphan payment")
}

// lineOf returns the line number in a dead letter's origin, which must
// name file: "FILE:LINE" or "FILE:LINE:COLUMN".
func lineOf(t *testing.T, file, origin string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(origin, file+":")
	require.True(t, ok, "origin %q does not name %s", origin, file)
	line, _, _ := strings.Cut(rest, ":")
	return line
}
