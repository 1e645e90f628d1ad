// Package orders makes the deterministic orders-and-payments data set of
// the demo and the end-to-end tests: orders written to their queue as they
// happen, and payments made shortly after their order but written to their
// queue minutes later, as a payment provider's batch export would be.
//
// Files are in flowhost's record line format (host/connect), one record per
// line, sorted by write_ts as a queue replays them:
//
//	{"write_ts":1714557605000000000,"event_ts":1714557605000000000,"payload":{"order_id":"o-00001",...}}
package orders

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// Config describes a data set. The zero value of a field takes the
// default named in its comment.
type Config struct {
	// Orders is the number of orders (default 2000).
	Orders int
	// Start is the first order's earliest event time (default
	// 2024-05-01T10:00:00Z); Span the event-time range the orders are
	// spread over (default 30m).
	Start time.Time
	Span  time.Duration
	// PayAfter bounds how long after its order a payment is made, in event
	// time: uniform in [PayAfter[0], PayAfter[1]) (default 5s to 90s).
	PayAfter [2]time.Duration
	// Lag bounds how long after it was made a payment is written to its
	// queue: uniform in [Lag[0], Lag[1]) for each payment (default 2m to
	// 6m). Orders are written within OrderLag of their event (default
	// 500ms).
	Lag      [2]time.Duration
	OrderLag time.Duration

	// UnpaidEvery makes every n-th order (1-based) go unpaid; 0 pays all.
	UnpaidEvery int
	// Seed seeds the random numbers: equal configs give equal data sets.
	Seed uint64
}

func (c Config) withDefaults() Config {
	if c.Orders == 0 {
		c.Orders = 2000
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	}
	if c.Span == 0 {
		c.Span = 30 * time.Minute
	}
	if c.PayAfter == [2]time.Duration{} {
		c.PayAfter = [2]time.Duration{5 * time.Second, 90 * time.Second}
	}
	if c.Lag == [2]time.Duration{} {
		c.Lag = [2]time.Duration{2 * time.Minute, 6 * time.Minute}
	}
	if c.OrderLag == 0 {
		c.OrderLag = 500 * time.Millisecond
	}
	return c
}

// Order is one order record and its timestamps (ns since the Unix epoch).
type Order struct {
	ID       string `json:"order_id"`
	Customer string `json:"customer"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Event    int64  `json:"-"`
	Write    int64  `json:"-"`
}

// Payment is one payment record and its timestamps.
type Payment struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
	Method    string `json:"method"`
	Event     int64  `json:"-"`
	Write     int64  `json:"-"`
}

// Dataset is a generated data set; both lists are sorted by write time,
// ties by id.
type Dataset struct {
	Orders   []Order
	Payments []Payment
}

var (
	customers  = []string{"ann", "bob", "cy", "dee", "ed", "fay", "gus", "hal", "ivy", "jo", "kim", "lu"}
	currencies = []string{"eur", "usd", "gbp"}
	methods    = []string{"card", "paypal", "transfer"}
)

// Generate makes the data set cfg describes.
func Generate(cfg Config) Dataset {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x0f10_0f10))
	between := func(lo, hi time.Duration) int64 {
		if hi <= lo {
			return int64(lo)
		}
		return int64(lo) + rng.Int64N(int64(hi-lo))
	}
	events := make([]int64, cfg.Orders)
	for i := range events {
		events[i] = cfg.Start.UnixNano() + rng.Int64N(int64(cfg.Span))
	}
	slices.Sort(events)
	var d Dataset
	for i, ev := range events {
		o := Order{
			ID:       fmt.Sprintf("o-%05d", i+1),
			Customer: customers[rng.IntN(len(customers))],
			Amount:   fmt.Sprintf("%d.%02d", 5+rng.IntN(245), rng.IntN(100)),
			Currency: currencies[rng.IntN(len(currencies))],
			Event:    ev,
			Write:    ev + between(0, cfg.OrderLag),
		}
		d.Orders = append(d.Orders, o)
		if cfg.UnpaidEvery > 0 && (i+1)%cfg.UnpaidEvery == 0 {
			continue
		}
		paid := ev + between(cfg.PayAfter[0], cfg.PayAfter[1])
		d.Payments = append(d.Payments, Payment{
			OrderID:   o.ID,
			PaymentID: fmt.Sprintf("p-%05d", len(d.Payments)+1),
			Method:    methods[rng.IntN(len(methods))],
			Event:     paid,
			Write:     paid + between(cfg.Lag[0], cfg.Lag[1]),
		})
	}
	slices.SortFunc(d.Orders, func(a, b Order) int { return cmp.Or(cmp.Compare(a.Write, b.Write), strings.Compare(a.ID, b.ID)) })
	slices.SortFunc(d.Payments, func(a, b Payment) int {
		return cmp.Or(cmp.Compare(a.Write, b.Write), strings.Compare(a.PaymentID, b.PaymentID))
	})
	return d
}

// line is one record line of the connect format.
type line struct {
	Write   int64 `json:"write_ts"`
	Event   int64 `json:"event_ts"`
	Payload any   `json:"payload"`
}

// WriteFiles writes the orders and the payments as record-line files,
// replacing existing files.
func (d Dataset) WriteFiles(ordersPath, paymentsPath string) error {
	if err := writeLines(ordersPath, len(d.Orders), func(i int) line {
		return line{d.Orders[i].Write, d.Orders[i].Event, d.Orders[i]}
	}); err != nil {
		return err
	}
	return writeLines(paymentsPath, len(d.Payments), func(i int) line {
		return line{d.Payments[i].Write, d.Payments[i].Event, d.Payments[i]}
	})
}

func writeLines(path string, n int, at func(int) line) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range n {
		if err := enc.Encode(at(i)); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
