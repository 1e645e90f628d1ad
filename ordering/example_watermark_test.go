package ordering_test

import (
	"fmt"
	"time"

	"github.com/flowhost/flowhost/ordering"
)

func ExampleSourceWatermark() {
	sec := int64(time.Second)
	cfg := ordering.DefaultWatermarkConfig() // bound 1 min, idle after 1 min, at most 40% left out
	w, err := ordering.NewSourceWatermark(3, cfg, 0)
	if err != nil {
		panic(err)
	}
	show := func(now int64) {
		if wm := w.Watermark(now); wm == ordering.NoWatermark {
			fmt.Println("no watermark yet")
		} else {
			fmt.Printf("watermark at %ds\n", wm/sec)
		}
	}

	// Partitions 0 and 1 read records with event times 600 s and 500 s.
	w.Read(0, 600*sec, 10*sec)
	w.Read(1, 500*sec, 10*sec)
	show(10 * sec) // partition 2 has nothing and is not idle yet

	show(60 * sec) // partition 2 idle for a minute: left out; 500 s - 1 min

	// Partition 1 has records waiting: the oldest unread one caps it.
	w.Appended(1, 700*sec, 70*sec)
	w.Appended(1, 900*sec, 70*sec)
	// Partition 1 rises to min(700, 900-60) = 700 s; partition 0 now holds
	// the source at 600 s - 1 min.
	show(70 * sec)

	// Partition 2 wakes up far behind: the watermark holds, it never goes back.
	w.Read(2, 100*sec, 80*sec)
	show(80 * sec)
	// Output:
	// no watermark yet
	// watermark at 440s
	// watermark at 540s
	// watermark at 540s
}

func ExampleStreamWatermark() {
	// A stream fed by two parents, with messages still buffered.
	w := ordering.NewStreamWatermark(2)
	var inFlight ordering.InFlight

	w.SetInput(0, 100)
	w.SetInput(1, 80)
	fmt.Println(w.Advance(inFlight.Min())) // min over parents

	inFlight.Add(90)
	w.SetInput(1, 120)
	fmt.Println(w.Advance(inFlight.Min())) // lowered to the buffered 90

	inFlight.Add(50) // a late message: the watermark holds rather than going back
	fmt.Println(w.Advance(inFlight.Min()))

	inFlight.Remove(50)
	inFlight.Remove(90)
	fmt.Println(w.Advance(inFlight.Min())) // nothing in flight: min over parents
	// Output:
	// 80
	// 90
	// 90
	// 100
}

func ExampleInFlight() {
	var f ordering.InFlight
	f.Add(30)
	f.Add(10)
	f.Add(10)
	f.Remove(10)
	m, ok := f.Min()
	fmt.Println(m, ok, f.Len())
	f.Remove(10)
	m, ok = f.Min()
	fmt.Println(m, ok, f.Len())
	fmt.Println(f.Remove(10)) // no copy left
	// Output:
	// 10 true 2
	// 30 true 1
	// false
}

func ExampleSourceSystemWatermark() {
	w := ordering.NewSourceSystemWatermark(2)
	w.Appended(0, 100) // write times of queued records
	w.Appended(0, 130)
	w.Appended(1, 120)
	fmt.Println(w.Watermark()) // the oldest unread record

	w.Read(0, 100)
	w.Read(0, 130)
	fmt.Println(w.Watermark()) // partition 1's record still waits

	w.Read(1, 120)
	w.Heartbeat(1, 200) // the queue promises nothing older than 200 on partition 1
	fmt.Println(w.Watermark())
	// Output:
	// 100
	// 120
	// 130
}
