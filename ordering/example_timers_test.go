package ordering_test

import (
	"fmt"

	"github.com/flowhost/flowhost/ordering"
)

func ExampleTimerStore() {
	var s ordering.TimerStore
	id := func(seq uint64) ordering.MessageID { return ordering.TransformID("sessions", 0, seq) }

	s.Set(ordering.Timer{Key: "alice", Trigger: 200, Event: 150, ID: id(1)})
	s.Set(ordering.Timer{Key: "bob", Trigger: 100, Event: 90, ID: id(2)})
	s.Set(ordering.Timer{Key: "alice", Trigger: 100, Event: 70, ID: id(3)})
	// Same key and trigger: deduplicated, the smaller Event stays.
	s.Set(ordering.Timer{Key: "alice", Trigger: 200, Event: 120, ID: id(4)})
	s.Set(ordering.Timer{Key: "carol", Trigger: 300, Event: 0, ID: id(5)})
	s.Cancel("carol", 300)

	minTrigger, _ := s.MinTrigger()
	fmt.Println("pending:", s.Len(), "earliest trigger:", minTrigger)

	for _, t := range s.PopDue(99) {
		fmt.Println("fired at 99:", t.Key, t.Trigger) // nothing: 100 > 99
	}
	for _, t := range s.PopDue(100) { // Trigger <= watermark, in (Trigger, id) order
		fmt.Println("fired at 100:", t.Key, t.Trigger, t.ID)
	}
	for _, t := range s.PopDueForKey("alice", 250) {
		fmt.Println("alice at 250:", t.Trigger, "event", t.Event, t.ID)
	}
	fmt.Println("pending:", s.Len())
	// Output:
	// pending: 3 earliest trigger: 100
	// fired at 100: bob 100 sessions/p0:2
	// fired at 100: alice 100 sessions/p0:3
	// alice at 250: 200 event 120 sessions/p0:4
	// pending: 0
}
