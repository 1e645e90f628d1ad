package orders_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flowhost/flowhost/examples/internal/orders"
)

// TestGenerateKeepsItsPromises checks, for any config, what the demo and
// the tests rely on: both lists sorted by write time, every paid order
// paid once with its payment made and written within the configured
// bounds, exactly the configured orders unpaid, and the same data for the
// same config.
func TestGenerateKeepsItsPromises(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := orders.Config{
			Orders:      rapid.IntRange(1, 300).Draw(t, "orders"),
			Span:        time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "span")),
			UnpaidEvery: rapid.IntRange(0, 10).Draw(t, "unpaid"),
			Seed:        rapid.Uint64().Draw(t, "seed"),
		}
		lo := time.Duration(rapid.Int64Range(0, int64(10*time.Minute)).Draw(t, "lagLo"))
		cfg.Lag = [2]time.Duration{lo, lo + time.Duration(rapid.Int64Range(1, int64(10*time.Minute)).Draw(t, "lagSpan"))}
		d := orders.Generate(cfg)
		require.Equal(t, d, orders.Generate(cfg), "deterministic")
		require.Len(t, d.Orders, cfg.Orders)

		byID := map[string]orders.Order{}
		for i, o := range d.Orders {
			if i > 0 {
				require.LessOrEqual(t, d.Orders[i-1].Write, o.Write)
			}
			require.GreaterOrEqual(t, o.Write, o.Event)
			require.Less(t, o.Write-o.Event, int64(500*time.Millisecond))
			byID[o.ID] = o
		}
		paid := map[string]bool{}
		for i, p := range d.Payments {
			if i > 0 {
				require.LessOrEqual(t, d.Payments[i-1].Write, p.Write)
			}
			o, ok := byID[p.OrderID]
			require.True(t, ok)
			require.False(t, paid[p.OrderID], "order %s paid twice", p.OrderID)
			paid[p.OrderID] = true
			require.GreaterOrEqual(t, p.Event-o.Event, int64(5*time.Second))
			require.Less(t, p.Event-o.Event, int64(90*time.Second))
			require.GreaterOrEqual(t, p.Write-p.Event, int64(cfg.Lag[0]))
			require.Less(t, p.Write-p.Event, int64(cfg.Lag[1]))
		}
		unpaid := 0
		if cfg.UnpaidEvery > 0 {
			unpaid = cfg.Orders / cfg.UnpaidEvery
		}
		require.Len(t, d.Payments, cfg.Orders-unpaid)
	})
}

func TestWriteFiles(t *testing.T) {
	d := orders.Generate(orders.Config{Orders: 3, Seed: 1})
	dir := t.TempDir()
	op, pp := filepath.Join(dir, "o.jsonl"), filepath.Join(dir, "p.jsonl")
	require.NoError(t, d.WriteFiles(op, pp))
	f, err := os.Open(op)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	i := 0
	for ; sc.Scan(); i++ {
		var line struct {
			Write   int64          `json:"write_ts"`
			Event   int64          `json:"event_ts"`
			Payload map[string]any `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		require.Equal(t, d.Orders[i].Write, line.Write)
		require.Equal(t, d.Orders[i].Event, line.Event)
		require.Equal(t, map[string]any{"order_id": d.Orders[i].ID, "customer": d.Orders[i].Customer,
			"amount": d.Orders[i].Amount, "currency": d.Orders[i].Currency}, line.Payload)
	}
	require.Equal(t, 3, i)
	require.Error(t, d.WriteFiles(filepath.Join(dir, "missing", "o.jsonl"), pp))
}

// A data set of three orders, every third unpaid: the payments are made
// seconds after their orders and written minutes later.
func ExampleGenerate() {
	d := orders.Generate(orders.Config{Orders: 3, UnpaidEvery: 3, Seed: 7})
	for _, o := range d.Orders {
		fmt.Printf("%s %-4s %7s %s written +%s\n", o.ID, o.Customer, o.Amount, o.Currency, time.Duration(o.Write-o.Event).Round(time.Millisecond))
	}
	for _, p := range d.Payments {
		fmt.Printf("%s for %s written +%s after it was made\n", p.PaymentID, p.OrderID, time.Duration(p.Write-p.Event).Round(time.Second))
	}
	// Output:
	// o-00001 cy    123.73 gbp written +93ms
	// o-00002 cy     40.99 eur written +483ms
	// o-00003 jo    138.50 usd written +433ms
	// p-00001 for o-00001 written +5m26s after it was made
	// p-00002 for o-00002 written +2m28s after it was made
}
