package ordering_test

import (
	"fmt"
	"slices"

	"github.com/flowhost/flowhost/ordering"
)

func ExampleMessageID() {
	ids := []ordering.MessageID{
		ordering.SourceID("orders", 3, 43),
		ordering.SourceID("orders", 3, 42).Derive("enriched", 0),
		ordering.SourceID("orders", 10, 0),
		ordering.SourceID("orders", 3, 42),
		ordering.SourceID("orders", 9, 0),
	}
	// By value, not by text: p9 before p10, and a derived id right after
	// its parent.
	slices.SortFunc(ids, ordering.MessageID.Compare)
	for _, id := range ids {
		fmt.Println(id)
	}

	parsed, err := ordering.ParseMessageID("orders/p3:42>enriched:0")
	fmt.Println(parsed.Equal(ids[1]), err)
	_, err = ordering.ParseMessageID("orders/p03:42")
	fmt.Println(err)
	// Output:
	// orders/p3:42
	// orders/p3:42>enriched:0
	// orders/p3:43
	// orders/p9:0
	// orders/p10:0
	// true <nil>
	// invalid message_id "orders/p03:42": segment 0, byte 8: partition "03": leading zero
}

func ExampleSourceClock() {
	var clock ordering.SourceClock
	// The queue's clock steps back at the third record: its alignment is
	// held at the last one, so the partition's order never goes back.
	for _, write := range []int64{100, 200, 150, 300} {
		ts := clock.SourceRecord(write-5, write)
		fmt.Printf("write %d -> alignment %d\n", ts.Write, ts.Alignment)
	}
	// Output:
	// write 100 -> alignment 100
	// write 200 -> alignment 200
	// write 150 -> alignment 200
	// write 300 -> alignment 300
}

func ExampleTransformOutput() {
	parents := []ordering.Timestamps{
		{Event: 70, System: 100, Alignment: 100},
		{Event: 40, System: 120, Alignment: 120},
	}
	// A transform's output is aligned at its creation time; its event
	// time is the earliest of its parents' unless the computation sets it.
	fmt.Printf("%+v\n", ordering.TransformOutput(500, parents, 0, false))
	fmt.Printf("%+v\n", ordering.TransformOutput(500, parents, 90, true))
	// Output:
	// {Event:40 System:500 Write:0 Alignment:500}
	// {Event:90 System:500 Write:0 Alignment:500}
}

func ExampleMultiParentOutput() {
	parents := []ordering.Timestamps{
		{Event: 70, System: 100, Write: 100, Alignment: 100},
		{Event: 40, System: 120, Alignment: 90},
	}
	// Deterministic, several parents: min alignment, min event, max system.
	fmt.Printf("%+v\n", ordering.MultiParentOutput(parents))
	// One parent: everything inherited but the WriteTimestamp.
	fmt.Printf("%+v\n", ordering.MapOutput(parents[0]))
	// Output:
	// {Event:40 System:120 Write:0 Alignment:90}
	// {Event:70 System:100 Write:0 Alignment:100}
}

func ExampleRouter() {
	r, err := ordering.NewRouter(ordering.RouterConfig{Partitions: map[string]int{"count": 1}})
	if err != nil {
		panic(err)
	}
	src := ordering.Sender{Computation: "clicks", Partition: 0}
	send := func(key string, offset uint64, alignment int64) {
		m := &ordering.Message{ID: ordering.SourceID("clicks", 0, offset), Key: key, Time: ordering.Timestamps{Alignment: alignment}}
		if err := r.Send(src, "count", m); err != nil {
			panic(err)
		}
	}
	send("alice", 0, 30)
	send("bob", 1, 10)
	send("alice", 2, 20)
	// Each key's lane is FIFO (alice's offset 0 before 2 although 2 is
	// aligned earlier); across lanes the earliest first message goes first.
	r.Drain("count", 0, func(m *ordering.Message) bool {
		fmt.Println(m.Key, m.ID, "task", m.Task)
		return true
	})
	// Output:
	// bob clicks/p0:1 task 2
	// alice clicks/p0:0 task 1
	// alice clicks/p0:2 task 3
}

func ExampleBatcher() {
	b, err := ordering.NewBatcher(ordering.BatchLimits{MaxRows: 4})
	if err != nil {
		panic(err)
	}
	for i, key := range []string{"b", "a", "b", "a", "c"} {
		full := b.Add(&ordering.Message{ID: ordering.SourceID("in", 0, uint64(i)), Key: key}, 0)
		fmt.Println("added", i, "full", full)
	}
	due := []ordering.Timer{
		{Key: "a", Trigger: 7, ID: ordering.TransformID("t", 0, 1)},
		{Key: "z", Trigger: 5, ID: ordering.TransformID("t", 0, 2)},
	}
	for _, kb := range b.Cut(due).Keys {
		line := kb.Key + ":"
		for _, t := range kb.Timers {
			line += fmt.Sprint(" timer@", t.Trigger)
		}
		for _, m := range kb.Messages {
			line += " " + m.ID.String()
		}
		fmt.Println(line)
	}
	fmt.Println("left for the next batch:", b.Len())
	// Output:
	// added 0 full false
	// added 1 full false
	// added 2 full false
	// added 3 full true
	// added 4 full true
	// b: in/p0:0 in/p0:2
	// a: timer@7 in/p0:1 in/p0:3
	// z: timer@5
	// left for the next batch: 1
}
