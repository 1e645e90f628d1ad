package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestFifoIsAQueue: any sequence of pushes and pops gives the values back
// in the order pushed.
func TestFifoIsAQueue(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f fifo[int]
		var model []*int
		for i := range rapid.IntRange(0, 2000).Draw(t, "ops") {
			if len(model) > 0 && rapid.IntRange(0, 2).Draw(t, "pop") == 0 {
				require.Same(t, model[0], f.peek())
				require.Same(t, model[0], f.pop())
				model = model[1:]
			} else {
				v := i
				f.push(&v)
				model = append(model, &v)
			}
			require.Equal(t, len(model), f.len())
		}
	})
}

// TestFifoThatNeverEmptiesStaysSmall: a queue kept from emptying (a
// connector ahead of its reader) holds on to about what is in it, however
// many values passed through, not every value it ever held (found by
// BenchmarkNativeHostRSS: the source queue grew 8 bytes a record).
func TestFifoThatNeverEmptiesStaysSmall(t *testing.T) {
	var f fifo[int]
	for i := range 100 {
		f.push(&i)
	}
	for i := range 1_000_000 {
		f.push(&i)
		f.pop()
	}
	require.Equal(t, 100, f.len())
	require.LessOrEqual(t, cap(f.q), 1024, "a million values passed through a queue of 100")
}
