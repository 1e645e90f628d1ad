package runtime

import (
	"runtime"
	"sync"

	"github.com/flowhost/flowhost/ordering"
)

// StateStore holds the keyed state and the pending timers of every
// computation partition. The runtime reads state as it builds a batch and
// hands over each batch's changes in one [Commit]; a durable store commits
// them atomically.
type StateStore interface {
	// Partition returns the state of one computation partition. It is
	// called once per partition at start.
	Partition(computation string, partition int) (PartitionState, error)
}

// PartitionState is the state of one computation partition. The runtime
// uses it from one goroutine at a time.
type PartitionState interface {
	// Get returns key's state; ok is false when the key has none.
	Get(key string) (value []byte, ok bool, err error)
	// Timers returns the timers pending when the partition starts.
	Timers() ([]ordering.Timer, error)
	// Commit applies the effects of one batch. When it returns nil they
	// are visible to Get and Timers.
	Commit(c *Commit) error
}

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

// NewMemoryStore returns a StateStore that keeps everything in memory and
// loses it when the process ends.
func NewMemoryStore() StateStore { return &memoryStore{parts: map[memoryPartKey]*memoryPartition{}} }

type memoryStore struct {
	mu    sync.Mutex
	parts map[memoryPartKey]*memoryPartition
}

type memoryPartKey struct {
	computation string
	partition   int
}

func (s *memoryStore) Partition(computation string, partition int) (PartitionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memoryPartKey{computation, partition}
	p, ok := s.parts[k]
	if !ok {
		p = &memoryPartition{state: map[string][]byte{}, timers: map[TimerRef]ordering.Timer{}}
		s.parts[k] = p
	}
	return p, nil
}

// memoryPartition keeps timers too, so that a runtime restarted on the same
// store in one process (tests, embedding) resumes them.
type memoryPartition struct {
	state  map[string][]byte
	timers map[TimerRef]ordering.Timer
}

func (p *memoryPartition) Get(key string) ([]byte, bool, error) {
	v, ok := p.state[key]
	return v, ok, nil
}

func (p *memoryPartition) Timers() ([]ordering.Timer, error) {
	out := make([]ordering.Timer, 0, len(p.timers))
	for _, t := range p.timers {
		out = append(out, t)
	}
	return out, nil
}

func (p *memoryPartition) Commit(c *Commit) error {
	for _, ch := range c.State {
		if ch.Delete {
			delete(p.state, ch.Key)
		} else {
			p.state[ch.Key] = ch.Value
		}
	}
	for _, ref := range c.TimersDeleted {
		delete(p.timers, ref)
	}
	for _, t := range c.TimersSet {
		p.timers[TimerRef{t.Key, t.Trigger}] = t
	}
	return nil
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }
