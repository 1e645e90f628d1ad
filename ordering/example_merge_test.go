package ordering_test

import (
	"fmt"
	"time"

	"github.com/flowhost/flowhost/ordering"
)

func ExampleStreamBuffer() {
	b := ordering.NewStreamBuffer("orders")
	push := func(id string, alignment int64) {
		mid, err := ordering.ParseMessageID(id)
		if err != nil {
			panic(err)
		}
		b.Push(&ordering.Message{ID: mid, Time: ordering.Timestamps{Alignment: alignment}})
	}
	// Arrival order does not matter: (AlignmentTimestamp, MessageID) does,
	// with ids compared as values (p9 before p10).
	push("orders/p10:0", 200)
	push("orders/p9:0", 200)
	push("orders/p3:7", 100)
	for m := b.Pop(); m != nil; m = b.Pop() {
		fmt.Println(m.Time.Alignment, m.ID)
	}
	// Output:
	// 100 orders/p3:7
	// 200 orders/p9:0
	// 200 orders/p10:0
}

func ExampleBias() {
	var b ordering.Bias
	// Two queued messages whose events happened 4s and 2s before they were
	// written to the source queue.
	sec := int64(time.Second)
	first := ordering.Timestamps{Event: 100 * sec, Alignment: 104 * sec}
	second := ordering.Timestamps{Event: 200 * sec, Alignment: 202 * sec}
	b.Add(first)
	b.Add(second)
	fmt.Println(time.Duration(b.Value()), time.Duration(b.Stabilized(300*sec)))
	b.Remove(first)
	fmt.Println(time.Duration(b.Value()))
	b.Remove(second)
	fmt.Println(time.Duration(b.Value()), b.Count(), "(emptied: keeps its last value)")
	// Output:
	// -3s 4m57s
	// -2s
	// -2s 0 (emptied: keeps its last value)
}

func ExampleMerge() {
	// "clicks" events reach the queue 60s late; "orders" events 1s late. By
	// alignment alone the late clicks would look newer than they are; the
	// bias puts both streams back on event time.
	mg, err := ordering.NewMerge([]string{"clicks", "orders"},
		ordering.WithStreamDelays(map[string]int64{"orders": int64(500 * time.Millisecond)}))
	if err != nil {
		panic(err)
	}
	sec := int64(time.Second)
	clicks, _ := mg.StreamIndex("clicks")
	orders, _ := mg.StreamIndex("orders")
	mg.Push(clicks, &ordering.Message{ID: ordering.SourceID("clicks", 0, 0), Task: 1,
		Time: ordering.Timestamps{Event: 100 * sec, Alignment: 160 * sec}})
	mg.Push(clicks, &ordering.Message{ID: ordering.SourceID("clicks", 0, 1), Task: 2,
		Time: ordering.Timestamps{Event: 102 * sec, Alignment: 162 * sec}})
	mg.Push(orders, &ordering.Message{ID: ordering.SourceID("orders", 0, 0), Task: 3,
		Time: ordering.Timestamps{Event: 101 * sec, Alignment: 102 * sec}})
	for mg.Len() > 0 {
		m, p := mg.Pop()
		fmt.Printf("%-12s alignment %v + bias %v + delay %v = %v\n", m.ID,
			time.Duration(m.Time.Alignment), time.Duration(p.Bias), time.Duration(p.Delay), time.Duration(p.Timestamp))
	}
	// Output:
	// clicks/p0:0  alignment 2m40s + bias -1m0s + delay 0s = 1m40s
	// orders/p0:0  alignment 1m42s + bias -1s + delay 500ms = 1m41.5s
	// clicks/p0:1  alignment 2m42s + bias -1m0s + delay 0s = 1m42s
}

func ExamplePartitionMerge() {
	// Three partitions of one source stream with their records' write
	// times; read earliest-written first, whichever partition holds it.
	queues := [][]int64{{10, 40}, {20, 30}, {15}}
	pm := ordering.NewPartitionMerge(len(queues))
	for p, q := range queues {
		pm.Set(p, q[0])
	}
	for p, ok := pm.Next(); ok; p, ok = pm.Next() {
		fmt.Printf("partition %d write %d\n", p, queues[p][0])
		queues[p] = queues[p][1:]
		if len(queues[p]) > 0 {
			pm.Set(p, queues[p][0])
		} else {
			pm.Clear(p)
		}
	}
	// Output:
	// partition 0 write 10
	// partition 2 write 15
	// partition 1 write 20
	// partition 1 write 30
	// partition 0 write 40
}
