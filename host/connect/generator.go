package connect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// GeneratorConfig configures a [Generator].
type GeneratorConfig struct {
	// Stream and Partitions (at least 1) name the source stream;
	// PartitionBy chooses partitions as for [FileSourceConfig] (for example
	// ["key"]), none means round robin.
	Stream      string
	Partitions  int
	PartitionBy []string
	// Seed makes the records reproducible: the same seed and config give
	// the same keys, fillers, partitions and lags.
	Seed uint64
	// Count is the number of records; 0 means unlimited.
	Count int64
	// Keys is the number of distinct values of the "key" field (default 1).
	Keys int
	// PayloadBytes is the length of the "filler" field.
	PayloadBytes int
	// Rate is records per second; 0 means as fast as the host takes them.
	Rate float64
	// EventLag is the largest lag of an event time behind its write time;
	// each record's lag is drawn uniformly from [0, EventLag].
	EventLag time.Duration
	// Start, if not zero, makes write times virtual and reproducible: the
	// i-th record (from 0) is written at Start + i/Rate seconds, or
	// Start + i milliseconds when Rate is 0. Otherwise a record's write
	// time is the clock when it is emitted.
	Start time.Time
	// Resume is a token from a record's [Record.Resume]: Run continues
	// with the record after it, drawing the same records as an
	// uninterrupted run. Nil starts at the first record.
	Resume []byte
}

// Generator is a deterministic synthetic source for demos and load tests.
// The i-th record's payload is
//
//	{"key":"k7","seq":i,"filler":"..."}
//
// and it always carries a write time and an event time (write time minus
// its lag), so that demos can show the bias of a stream whose events lag.
type Generator struct {
	cfg         GeneratorConfig
	partitioner *Partitioner

	// Test hooks: the clock and the wait used for pacing.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// NewGenerator checks cfg.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	in, err := newIntake(cfg.Stream, cfg.Partitions, cfg.PartitionBy, SourceEnvelope, EventTimeSource{})
	if err != nil {
		return nil, fmt.Errorf("generator: %w", err)
	}
	switch {
	case cfg.Count < 0:
		return nil, fmt.Errorf("generator: count %d is negative", cfg.Count)
	case cfg.Keys < 0:
		return nil, fmt.Errorf("generator: keys %d is negative", cfg.Keys)
	case cfg.PayloadBytes < 0:
		return nil, fmt.Errorf("generator: payload_bytes %d is negative", cfg.PayloadBytes)
	case cfg.Rate < 0 || cfg.Rate != cfg.Rate:
		return nil, fmt.Errorf("generator: rate %v is not a non-negative number", cfg.Rate)
	case cfg.EventLag < 0:
		return nil, fmt.Errorf("generator: event_lag %v is negative", cfg.EventLag)
	}
	for _, f := range cfg.PartitionBy {
		if f != "key" && f != "seq" && f != "filler" {
			return nil, fmt.Errorf("generator: partition_by %q: payloads have only the fields key, seq and filler", f)
		}
	}
	if cfg.Keys == 0 {
		cfg.Keys = 1
	}
	cfg.PartitionBy = append([]string(nil), cfg.PartitionBy...)
	return &Generator{cfg: cfg, partitioner: in.partitioner, now: time.Now, after: time.After}, nil
}

// minPause keeps pacing from waking up more often than this: at high rates
// records go out in small bursts instead of one timer per record.
const minPause = time.Millisecond

const fillerAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Run emits the records; it returns nil after Count records.
func (g *Generator) Run(ctx context.Context, emit func(Record) error) error {
	rng := rand.New(rand.NewPCG(g.cfg.Seed, g.cfg.Seed^0x9e3779b97f4a7c15))
	virtualStep := time.Millisecond
	if g.cfg.Rate > 0 {
		virtualStep = time.Duration(float64(time.Second) / g.cfg.Rate)
	}
	start := g.now()
	payload := make([]byte, 0, 48+g.cfg.PayloadBytes)
	skip, err := parseGeneratorResume(g.cfg.Resume)
	if err != nil {
		return fmt.Errorf("generator: %w", err)
	}
	for i := int64(0); g.cfg.Count == 0 || i < g.cfg.Count; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if g.cfg.Rate > 0 && i >= skip {
			if err := g.pace(ctx, start, i); err != nil {
				return err
			}
		}
		// Draws happen in a fixed order per record, so that a seed gives the
		// same records whatever the clock does.
		key := rng.IntN(g.cfg.Keys)
		payload = payload[:0]
		payload = append(payload, `{"key":"k`...)
		payload = strconv.AppendInt(payload, int64(key), 10)
		payload = append(payload, `","seq":`...)
		payload = strconv.AppendInt(payload, i, 10)
		payload = append(payload, `,"filler":"`...)
		for range g.cfg.PayloadBytes {
			payload = append(payload, fillerAlphabet[rng.IntN(len(fillerAlphabet))])
		}
		payload = append(payload, `"}`...)
		var lag int64
		if g.cfg.EventLag > 0 {
			lag = rng.Int64N(int64(g.cfg.EventLag) + 1)
		}

		var write int64
		if !g.cfg.Start.IsZero() {
			write = g.cfg.Start.UnixNano() + i*int64(virtualStep)
		} else {
			write = g.now().UnixNano()
		}
		if i < skip {
			continue // emitted before the restart: only its draws are repeated
		}
		rec := Record{
			Stream: g.cfg.Stream, Write: write, HasWrite: true, Event: write - lag, HasEvent: true,
			Payload: append([]byte(nil), payload...),
			Origin:  "generator:" + strconv.FormatInt(i, 10),
			Resume:  strconv.AppendInt(nil, i+1, 10),
		}
		if rec.Partition, err = g.partitioner.Partition(rec.Payload); err != nil {
			return fmt.Errorf("generator: %w", err) // NewGenerator checked the fields
		}
		rec.RoundRobin = g.partitioner.RoundRobin()
		if err := emit(rec); err != nil {
			return err
		}
	}
	return nil
}

// parseGeneratorResume reads a generator's resume token: the number of
// records already emitted.
func parseGeneratorResume(tok []byte) (int64, error) {
	if tok == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("resume position %q is not a record count", tok)
	}
	return n, nil
}

// pace waits until record i is due: start + i*interval. It sleeps at least
// minPause at a time, so at high rates records go out in bursts.
func (g *Generator) pace(ctx context.Context, start time.Time, i int64) error {
	due := start.Add(time.Duration(float64(i) * float64(time.Second) / g.cfg.Rate))
	wait := due.Sub(g.now())
	if wait <= 0 {
		return nil
	}
	select {
	case <-g.after(max(wait, minPause)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
