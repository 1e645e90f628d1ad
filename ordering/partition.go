package ordering

// PartitionMerge decides which partition of one source stream to read next:
// among the partitions that have a record ready, the one whose next record
// has the earliest WriteTimestamp, ties going to the lower partition. This
// is the seed's partition prioritization: earlier-written records go first,
// whichever partition holds them.
//
// The caller tells it what each partition has ready: Set when a partition's
// next record is known, Clear when the partition has nothing ready. Next
// names the partition to read without changing anything; after reading
// that partition's record, the caller calls Set with the partition's
// following record or Clear. Set, Clear and Next cost O(log P), O(log P)
// and O(1) for P partitions, and allocate nothing.
//
// A PartitionMerge is not safe for concurrent use.
type PartitionMerge struct {
	heap binHeap[struct{}]
}

// NewPartitionMerge returns a PartitionMerge over partitions 0..partitions-1,
// none of them ready. It panics if partitions is negative.
func NewPartitionMerge(partitions int) *PartitionMerge {
	return &PartitionMerge{heap: newIndexedHeap[struct{}](partitions)}
}

// Set records that partition has a record ready, written at nextWrite
// (its WriteTimestamp), replacing what was recorded for it before. It
// panics if partition is out of range.
func (pm *PartitionMerge) Set(partition int, nextWrite int64) {
	pm.heap.set(heapKey{primary: nextWrite, slot: int32(partition)}, struct{}{})
}

// Clear records that partition has nothing ready. It panics if partition
// is out of range.
func (pm *PartitionMerge) Clear(partition int) { pm.heap.clear(partition) }

// Next returns the partition to read next, or ok false when no partition
// has a record ready.
func (pm *PartitionMerge) Next() (partition int, ok bool) {
	if pm.heap.len() == 0 {
		return 0, false
	}
	return int(pm.heap.top().key.slot), true
}

// Ready returns the number of partitions with a record ready.
func (pm *PartitionMerge) Ready() int { return pm.heap.len() }
