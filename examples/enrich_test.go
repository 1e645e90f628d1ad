package examples_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEnrich runs examples/pipelines/enrich.yaml on orders whose amounts
// are written in every form the plugin accepts and checks each output
// against the amount in cents the test generated, the currency rule, the
// untouched fields and the timestamps a map inherits. Records it cannot
// normalise go to the dead-letter file with the plugin's reason.
func TestEnrich(t *testing.T) {
	t.Parallel()
	type want struct {
		cents    int64
		currency string
		customer string
		event    int64
		write    int64
	}
	rng := rand.New(rand.NewPCG(11, 12))
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	wants := map[string]want{}
	var recs []recordLine
	for i := range 120 {
		id := fmt.Sprintf("o-%04d", i)
		cents := rng.Int64N(100_000)
		whole, frac := cents/100, cents%100
		var amount any
		switch i % 5 {
		case 0:
			amount = fmt.Sprintf("%d.%02d", whole, frac) // "12.05"
		case 1:
			amount = json.Number(fmt.Sprintf("%d.%02d", whole, frac)) // 12.05
		case 2:
			amount = json.Number(fmt.Sprintf("%de-2", cents)) // 1205e-2
		case 3:
			amount = fmt.Sprintf(" %d.%02d0 ", whole, frac) // " 12.050 ": padded, a zero digit more
		case 4:
			amount = json.Number(fmt.Sprint(whole)) // an integer amount
			cents = whole * 100
		}
		currencies := []any{"eur", "Usd", "GBP", nil, "missing"}
		cur := currencies[rng.IntN(len(currencies))]
		payload := map[string]any{"order_id": id, "customer": fmt.Sprint("c", i%7), "amount": amount}
		wantCur := "EUR" // the pipeline's default_currency
		switch c := cur.(type) {
		case string:
			if c != "missing" {
				payload["currency"] = c
				wantCur = strings.ToUpper(c)
			}
		case nil:
			payload["currency"] = nil
		}
		event := start + int64(i)*int64(time.Second)
		write := event + int64(rng.IntN(1000))*int64(time.Millisecond)
		recs = append(recs, recordLine{Write: write, Event: event, Payload: payload})
		wants[id] = want{cents: cents, currency: wantCur, customer: payload["customer"].(string), event: event, write: write}
	}
	// Three records the plugin must refuse, each with its reason.
	bad := map[string]string{
		"o-bad-1": "has a fraction of a cent",
		"o-bad-2": `payload has no "amount" field`,
		"o-bad-3": "not a decimal number",
	}
	last := recs[len(recs)-1]
	for i, p := range []map[string]any{
		{"order_id": "o-bad-1", "amount": "12.345"},
		{"order_id": "o-bad-2", "customer": "x"},
		{"order_id": "o-bad-3", "amount": "1/3"},
	} {
		recs = append(recs, recordLine{Write: last.Write + int64(i+1), Event: last.Event + int64(i+1), Payload: p})
	}

	r := runPipeline(t, "enrich", map[string][]byte{"data/orders.jsonl": jsonLines(t, recs)})

	inputs := traceByID(t, r.trace, "enrich")
	out := r.stream("orders-enriched")
	require.Len(t, out, len(wants), "one output per good record")
	seen := map[string]bool{}
	for _, rec := range out {
		p := payloadMap(t, rec)
		id := p["order_id"].(string)
		w, ok := wants[id]
		require.True(t, ok, "output for unknown order %s", id)
		require.False(t, seen[id], "order %s enriched twice", id)
		seen[id] = true
		require.Equal(t, json.Number(fmt.Sprint(w.cents)), p["amount_cents"], "order %s", id)
		require.Equal(t, w.currency, p["currency"], "order %s", id)
		require.Equal(t, w.customer, p["customer"], "order %s", id)
		require.Contains(t, p, "amount", "order %s keeps its amount", id)
		// A map's output inherits its one parent's timestamps.
		require.Len(t, rec.Parents, 1)
		parent, ok := inputs[rec.Parents[0]]
		require.True(t, ok, "parent %s of %s was not delivered to enrich", rec.Parents[0], rec.MessageID)
		require.Equal(t, keyOf(id), parent.Key)
		require.Equal(t, w.event, rec.EventTS, "order %s event_ts", id)
		require.Equal(t, w.write, rec.AlignmentTS, "order %s alignment_ts is its source write_ts", id)
	}

	require.Len(t, r.dead, len(bad))
	for _, d := range r.dead {
		var p map[string]any
		require.NoError(t, json.Unmarshal(d.Record, &p))
		id := p["order_id"].(string)
		require.Equal(t, "guest", d.Stage, "%s", id)
		require.Contains(t, d.Error, bad[id], "%s", id)
		require.Contains(t, d.Origin, "enrich <- orders", "%s", id)
	}
}
