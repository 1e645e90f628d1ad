package ordering

import (
	"cmp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// mrgCheckHeap fails unless h satisfies the heap property and, for an
// indexed heap, pos names exactly the items' indexes.
func mrgCheckHeap[V any](t require.TestingT, h *binHeap[V]) {
	for i := 1; i < len(h.items); i++ {
		parent := (i - 1) / 2
		require.False(t, h.less(&h.items[i], &h.items[parent]), "item %d sorts before its parent %d", i, parent)
	}
	if h.pos == nil {
		return
	}
	present := 0
	for slot, i := range h.pos {
		if i < 0 {
			continue
		}
		present++
		require.Less(t, int(i), len(h.items))
		require.EqualValues(t, slot, h.items[i].key.slot, "pos[%d] = %d", slot, i)
	}
	require.Equal(t, len(h.items), present)
}

// mrgKeyLess is the order of heap keys, written out field by field.
func mrgKeyLess(a, b heapKey) bool {
	return cmp.Or(cmp.Compare(a.primary, b.primary), cmp.Compare(a.secondary, b.secondary), cmp.Compare(a.slot, b.slot)) < 0
}

func TestHeapIndexedMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slots := rapid.IntRange(1, 20).Draw(t, "slots")
		h := newIndexedHeap[int](slots)
		ref := map[int]heapKey{}
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			slot := rapid.IntRange(0, slots-1).Draw(t, "slot")
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				h.clear(slot)
				delete(ref, slot)
			case 4:
				if h.len() > 0 {
					k := h.items[0].key
					k.primary = rapid.Int64Range(-3, 3).Draw(t, "new primary")
					k.secondary = rapid.Uint64Range(0, 2).Draw(t, "new secondary")
					h.replaceTop(k)
					ref[int(k.slot)] = k
				}
			case 1:
				if h.len() > 0 {
					want := h.items[0].key
					for _, k := range ref {
						require.False(t, mrgKeyLess(k, want), "top %v is not the least", want)
					}
					got := h.pop()
					require.Equal(t, got.val, int(got.key.slot), "value travels with its key")
					delete(ref, int(got.key.slot))
				}
			default:
				k := heapKey{
					primary:   rapid.Int64Range(-3, 3).Draw(t, "primary"),
					secondary: rapid.Uint64Range(0, 2).Draw(t, "secondary"),
					slot:      int32(slot),
				}
				h.set(k, slot)
				ref[slot] = k
			}
			mrgCheckHeap(t, &h)
			require.Equal(t, len(ref), h.len())
			for slot, k := range ref {
				require.Equal(t, k, h.items[h.index(slot)].key)
			}
		}
	})
}

func TestHeapTieBreaksEqualKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vals := rapid.SliceOf(rapid.IntRange(0, 50)).Draw(t, "vals")
		h := binHeap[int]{tie: func(a, b int) bool { return a < b }}
		for _, v := range vals {
			// Keys collide on purpose: only the tie orders within a key.
			h.push(heapItem[int]{key: heapKey{primary: int64(v / 10)}, val: v})
			mrgCheckHeap(t, &h)
		}
		got := []int{}
		for h.len() > 0 {
			got = append(got, h.pop().val)
			mrgCheckHeap(t, &h)
		}
		want := slices.Clone(vals)
		slices.Sort(want)
		require.Equal(t, want, got)
	})
}

func TestHeapPopClearsVacatedCell(t *testing.T) {
	m := &Message{}
	var h binHeap[*Message]
	h.push(heapItem[*Message]{val: m})
	h.push(heapItem[*Message]{key: heapKey{primary: 1}, val: &Message{}})
	h.pop()
	h.pop()
	require.Nil(t, h.items[:2][0].val, "a popped message must not stay reachable from the heap")
	require.Nil(t, h.items[:2][1].val, "a popped message must not stay reachable from the heap")
}
