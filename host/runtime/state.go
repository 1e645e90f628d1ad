package runtime

import (
	"runtime"

	"github.com/flowhost/flowhost/ordering"
)

// Commit is what one batch changed in a partition's state.
type Commit struct {
	// Epoch is the batch's epoch.
	Epoch uint64
	// State holds the keys whose state was replaced or deleted.
	State []StateChange
	// TimersSet are timers set (after deduplication).
	TimersSet []ordering.Timer
	// TimersDeleted are timers fired or cancelled, by key and trigger.
	TimersDeleted []TimerRef
}

// StateChange replaces (Delete false) or deletes a key's state.
type StateChange struct {
	Key    string
	Value  []byte
	Delete bool
}

// TimerRef names a pending timer: timers are unique per key and trigger.
type TimerRef struct {
	Key     string
	Trigger int64
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }
