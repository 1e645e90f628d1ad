package ordering

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestPartitionMergeTable(t *testing.T) {
	// The seed: "partitions are prioritized by the WriteTimestamp of their
	// messages: partitions with earlier messages are processed first".
	type set struct {
		partition int
		write     int64 // clear the partition when < 0
	}
	tests := []struct {
		name   string
		ops    []set
		want   int
		wantOK bool
	}{
		{name: "nothing ready", wantOK: false},
		{name: "earliest write first", ops: []set{{0, 30}, {1, 10}, {2, 20}}, want: 1, wantOK: true},
		{name: "equal writes: lower partition", ops: []set{{2, 10}, {1, 10}, {3, 10}}, want: 1, wantOK: true},
		{name: "a cleared partition is skipped", ops: []set{{0, 10}, {1, 20}, {0, -1}}, want: 1, wantOK: true},
		{name: "all cleared", ops: []set{{0, 10}, {1, 20}, {0, -1}, {1, -1}}, wantOK: false},
		{name: "clearing an idle partition is harmless", ops: []set{{1, 20}, {0, -1}}, want: 1, wantOK: true},
		{name: "set replaces: the first moves later", ops: []set{{0, 10}, {1, 20}, {0, 30}}, want: 1, wantOK: true},
		{name: "set replaces: the last moves earlier", ops: []set{{0, 10}, {1, 20}, {1, 5}}, want: 1, wantOK: true},
		{name: "extreme writes", ops: []set{{0, math.MaxInt64}, {1, 0}, {2, 1}}, want: 1, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pm := NewPartitionMerge(4)
			for _, op := range tt.ops {
				if op.write < 0 {
					pm.Clear(op.partition)
				} else {
					pm.Set(op.partition, op.write)
				}
			}
			got, ok := pm.Next()
			require.Equal(t, tt.wantOK, ok)
			if ok {
				require.Equal(t, tt.want, got)
			}
		})
	}
}

func TestPartitionMergeReadsInWriteOrder(t *testing.T) {
	// The intended loop: read Next, then Set its following record or Clear.
	// Records of three partitions come out sorted by write time.
	queues := [][]int64{{1, 5, 9}, {2, 3, 10}, {4, 4, 8}}
	pm := NewPartitionMerge(len(queues))
	for p, q := range queues {
		pm.Set(p, q[0])
	}
	type rec struct {
		partition int
		write     int64
	}
	var got []rec
	for p, ok := pm.Next(); ok; p, ok = pm.Next() {
		got = append(got, rec{p, queues[p][0]})
		queues[p] = queues[p][1:]
		if len(queues[p]) > 0 {
			pm.Set(p, queues[p][0])
		} else {
			pm.Clear(p)
		}
	}
	require.Equal(t, []rec{{0, 1}, {1, 2}, {1, 3}, {2, 4}, {2, 4}, {0, 5}, {2, 8}, {0, 9}, {1, 10}}, got)
}

func TestPartitionMergeOutOfRangePanics(t *testing.T) {
	pm := NewPartitionMerge(2)
	require.Panics(t, func() { pm.Set(2, 0) })
	require.Panics(t, func() { pm.Set(-1, 0) })
	require.Panics(t, func() { pm.Clear(2) })
	require.Panics(t, func() { NewPartitionMerge(-1) })
}

func TestPartitionMergeMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "partitions")
		pm := NewPartitionMerge(n)
		// The reference: which partitions are ready at which write time,
		// scanned linearly.
		ready := make([]bool, n)
		write := make([]int64, n)
		for range rapid.IntRange(0, 100).Draw(t, "ops") {
			if n > 0 {
				p := rapid.IntRange(0, n-1).Draw(t, "partition")
				if rapid.IntRange(0, 3).Draw(t, "op") == 0 {
					pm.Clear(p)
					ready[p] = false
				} else {
					w := rapid.OneOf(rapid.Int64Range(0, 5), rapid.Int64()).Draw(t, "write")
					pm.Set(p, w)
					ready[p], write[p] = true, w
				}
			}
			want, wantOK, count := 0, false, 0
			for p := range n {
				if !ready[p] {
					continue
				}
				count++
				if !wantOK || write[p] < write[want] {
					want, wantOK = p, true
				}
			}
			got, ok := pm.Next()
			require.Equal(t, wantOK, ok)
			require.Equal(t, want, got)
			require.Equal(t, count, pm.Ready())
		}
	})
}
