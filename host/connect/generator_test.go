package connect

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func generate(t *testing.T, cfg GeneratorConfig) []Record {
	t.Helper()
	g, err := NewGenerator(cfg)
	require.NoError(t, err)
	got, err := collect(t, context.Background(), g)
	require.NoError(t, err)
	return got
}

type generated struct {
	Key    string `json:"key"`
	Seq    int64  `json:"seq"`
	Filler string `json:"filler"`
}

func TestGeneratorDeterministic(t *testing.T) {
	start := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	cfg := GeneratorConfig{
		Stream: "clicks", Partitions: 4, PartitionBy: []string{"key"}, Seed: 42,
		Count: 200, Keys: 7, PayloadBytes: 16, EventLag: 3 * time.Second, Start: start,
	}
	a, b := generate(t, cfg), generate(t, cfg)
	require.Len(t, a, 200)
	require.Equal(t, a, b, "same seed, same records")

	cfg.Seed = 43
	c := generate(t, cfg)
	require.NotEqual(t, a[0].Payload, c[0].Payload)

	keys := map[string]int{}
	for i, r := range a {
		var p generated
		require.NoError(t, json.Unmarshal(r.Payload, &p), "%s", r.Payload)
		require.Equal(t, int64(i), p.Seq)
		require.Len(t, p.Filler, 16)
		require.Equal(t, "clicks", r.Stream)
		require.True(t, r.HasWrite && r.HasEvent)
		require.Equal(t, start.UnixNano()+int64(i)*int64(time.Millisecond), r.Write, "virtual write times step 1ms at rate 0")
		lag := r.Write - r.Event
		require.True(t, lag >= 0 && lag <= int64(3*time.Second), "lag %d", lag)
		if prev, ok := keys[p.Key]; ok {
			require.Equal(t, prev, r.Partition, "key %s moved partition", p.Key)
		}
		keys[p.Key] = r.Partition
	}
	require.Len(t, keys, 7, "200 draws over 7 keys hit them all")
}

func TestGeneratorPacesWithoutSpinning(t *testing.T) {
	g, err := NewGenerator(GeneratorConfig{Stream: "s", Partitions: 2, Count: 50, Rate: 100, Seed: 1})
	require.NoError(t, err)
	clock := time.Unix(1000, 0)
	var waits []time.Duration
	g.now = func() time.Time { return clock }
	g.after = func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		clock = clock.Add(d)
		ch := make(chan time.Time, 1)
		ch <- clock
		return ch
	}
	got, err := collect(t, context.Background(), g)
	require.NoError(t, err)
	require.Len(t, got, 50)
	// Record i is due at i*10ms: one wait per record after the first.
	require.Len(t, waits, 49)
	for _, w := range waits {
		require.Equal(t, 10*time.Millisecond, w)
	}
	for i, r := range got {
		require.Equal(t, time.Unix(1000, 0).Add(time.Duration(i)*10*time.Millisecond).UnixNano(), r.Write)
		require.Equal(t, i%2, r.Partition, "round robin")
	}
}

func TestGeneratorHighRateBursts(t *testing.T) {
	g, err := NewGenerator(GeneratorConfig{Stream: "s", Partitions: 1, Count: 10000, Rate: 1e6})
	require.NoError(t, err)
	clock := time.Unix(0, 0)
	waits := 0
	g.now = func() time.Time { return clock }
	g.after = func(d time.Duration) <-chan time.Time {
		require.GreaterOrEqual(t, d, minPause)
		waits++
		clock = clock.Add(d)
		ch := make(chan time.Time, 1)
		ch <- clock
		return ch
	}
	got, err := collect(t, context.Background(), g)
	require.NoError(t, err)
	require.Len(t, got, 10000)
	// 10000 records at 1e6/s take 10ms: about one wake-up per millisecond.
	require.LessOrEqual(t, waits, 10)
}

func TestGeneratorUnlimitedStops(t *testing.T) {
	g, err := NewGenerator(GeneratorConfig{Stream: "s", Partitions: 1})
	require.NoError(t, err)
	full := errors.New("full")
	n := 0
	err = g.Run(context.Background(), func(Record) error {
		n++
		if n == 1000 {
			return full
		}
		return nil
	})
	require.ErrorIs(t, err, full)

	ctx, cancel := context.WithCancel(context.Background())
	err = g.Run(ctx, func(Record) error { cancel(); return nil })
	require.ErrorIs(t, err, context.Canceled)

	// Cancelled while pacing.
	paced, err := NewGenerator(GeneratorConfig{Stream: "s", Partitions: 1, Rate: 1})
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	paced.after = func(time.Duration) <-chan time.Time { cancel(); return nil }
	n = 0
	err = paced.Run(ctx, func(Record) error { n++; return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, n)
}

func TestGeneratorConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  GeneratorConfig
		want string
	}{
		{GeneratorConfig{Stream: "s", Partitions: 1, Count: -1}, "generator: count -1 is negative"},
		{GeneratorConfig{Stream: "s", Partitions: 1, Rate: -2}, "generator: rate -2 is not a non-negative number"},
		{GeneratorConfig{Stream: "s", Partitions: 1, EventLag: -time.Second}, "generator: event_lag -1s is negative"},
		{GeneratorConfig{Stream: "s", Partitions: 1, PartitionBy: []string{"user"}}, `generator: partition_by "user": payloads have only the fields key, seq and filler`},
		{GeneratorConfig{Stream: "", Partitions: 1}, "generator: stream: empty name"},
	} {
		_, err := NewGenerator(tt.cfg)
		require.EqualError(t, err, tt.want)
	}
}

// TestGeneratorResumeRepeatsTheSameRecords resumes a seeded generator after
// record k: it emits exactly the records an uninterrupted run emits after k.
func TestGeneratorResumeRepeatsTheSameRecords(t *testing.T) {
	cfg := GeneratorConfig{Stream: "s", Partitions: 3, PartitionBy: []string{"key"}, Count: 40, Seed: 7, EventLag: time.Second, Start: time.Unix(1000, 0)}
	full := generate(t, cfg)
	require.Len(t, full, 40)
	for _, k := range []int{0, 1, 17, 39} {
		resumed := cfg
		resumed.Resume = full[k].Resume
		rest := generate(t, resumed)
		require.Equal(t, len(full)-k-1, len(rest), "after record %d", k)
		for j := range rest {
			require.Equal(t, full[k+1+j], rest[j], "after record %d", k)
		}
	}
	bad := cfg
	bad.Resume = []byte("x")
	g, err := NewGenerator(bad)
	require.NoError(t, err)
	require.ErrorContains(t, g.Run(context.Background(), func(Record) error { return nil }), "not a record count")
}
