package runtime

import (
	"runtime"

	"github.com/flowhost/flowhost/ordering"
)

// stateCommit is what one batch changed in a partition's state.
type stateCommit struct {
	// Epoch is the batch's epoch.
	Epoch uint64
	// State holds the keys whose state was replaced or deleted.
	State []stateChange
	// TimersSet are timers set (after deduplication).
	TimersSet []ordering.Timer
	// TimersDeleted are timers fired or cancelled, by key and trigger.
	TimersDeleted []timerRef
}

// stateChange replaces (Delete false) or deletes a key's state.
type stateChange struct {
	Key    string
	Value  []byte
	Delete bool
}

// timerRef names a pending timer: timers are unique per key and trigger.
type timerRef struct {
	Key     string
	Trigger int64
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }
