package devbroker

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseTopic(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Topic
		err  string
	}{
		{in: "orders:4", want: Topic{"orders", 4}},
		{in: "orders", want: Topic{"orders", 1}},
		{in: "a.b-c_d:12", want: Topic{"a.b-c_d", 12}},
		{in: "", err: "want NAME:PARTITIONS"},
		{in: ":3", err: "want NAME:PARTITIONS"},
		{in: "orders:0", err: `partitions "0" is not a positive integer`},
		{in: "orders:-2", err: `partitions "-2" is not a positive integer`},
		{in: "orders:x", err: `partitions "x" is not a positive integer`},
		{in: "orders:", err: `partitions "" is not a positive integer`},
		{in: "orders:99999999999", err: "is not a positive integer"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTopic(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, "--topic")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseTopic(f *testing.F) {
	for _, s := range []string{"orders:4", "orders", ":", "a:b:c", "x:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTopic(s)
		if err != nil {
			require.Contains(t, err.Error(), "--topic")
			return
		}
		require.NotEmpty(t, got.Name)
		require.Positive(t, got.Partitions)
		require.True(t, strings.HasPrefix(s, got.Name))
	})
}

func TestStartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{"network host", Config{ListenHost: "0.0.0.0"}, "--insecure-listen"},
		{"public name", Config{ListenHost: "example.com"}, "not a loopback address"},
		{"ports and brokers disagree", Config{Brokers: 2, Ports: []int{0}}, "one port per broker"},
		{"negative brokers", Config{Brokers: -1}, "want at least 1"},
		{"bad port", Config{Ports: []int{70000}}, "70000 is not a port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(tc.cfg)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestStartPersistsAcrossClose: a broker on a data directory, closed and
// started again on it and its port, still has the seeded topic and the
// records produced before.
func TestStartPersistsAcrossClose(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{DataDir: dir, Topics: []Topic{{"t", 3}}, MetricsAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	require.Len(t, b.Addrs(), 1)
	require.True(t, strings.HasPrefix(b.Addrs()[0], "127.0.0.1:"))
	require.NotEmpty(t, b.MetricsAddr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr())
	cl.Close()
	addr := b.Addrs()[0]
	b.Close()

	p, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	require.NoError(t, err)
	b, err = Start(Config{DataDir: dir, Ports: []int{p}})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	require.Equal(t, []string{addr}, b.Addrs())
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	offsets, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	require.NoError(t, err)
	var total int64
	offsets.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.Equal(t, int64(2), total)
	parts := 0
	offsets.Each(func(kadm.ListedOffset) { parts++ })
	require.Equal(t, 3, parts)
}
