//go:build unix

package ordering

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// mrgCPUMeter reports a benchmark loop's CPU time per operation as
// cpu-ns/op beside ns/op: on a shared machine the wall clock also counts
// the time other processes held the core, the process's CPU time does not.
// (It reads getrusage, hence this file's unix build constraint.)
type mrgCPUMeter struct {
	b     *testing.B
	start time.Duration
}

func mrgStartCPU(b *testing.B) mrgCPUMeter {
	return mrgCPUMeter{b: b, start: mrgCPUTime(b)}
}

// stop reports the CPU time since mrgStartCPU divided by ops.
func (m mrgCPUMeter) stop(ops int) {
	cpu := mrgCPUTime(m.b) - m.start
	m.b.ReportMetric(float64(cpu.Nanoseconds())/float64(ops), "cpu-ns/op")
}

func mrgCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mrgBenchDepth is how many messages each stream holds in steady state.
const mrgBenchDepth = 16

// mrgRand is a xorshift generator: cheap enough not to show in the figures.
type mrgRand uint64

func (r *mrgRand) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = mrgRand(x)
	return x
}

// mrgMergeRig is a Merge in steady state: each op pops the next message
// and pushes the same Message struct back (so nothing is allocated) onto a
// random stream. Time is simulated at 10M messages a second: a clock ticks
// 100ns per message, and a pushed message's AlignmentTimestamp is the
// clock plus up to 800ns of jitter, slightly later than what is queued.
// Event times trail alignment by up to 6.4µs, and stream s writes its
// alignments s*lag after its events: a systematic per-stream delay of the
// kind bias exists to cancel. With bias on, the streams' priorities
// therefore interleave (every stream keeps about mrgBenchDepth messages
// and every head competes), and each Push and Pop moves its stream's bias,
// as real traffic does. WithoutBias runs with lag 0, so that raw
// alignments interleave the same way.
type mrgMergeRig struct {
	mg      *Merge
	rng     mrgRand
	clock   int64
	lag     int64
	streams uint64
}

func newMrgMergeRig(streams int, lag int64, opts ...MergeOption) (*mrgMergeRig, error) {
	names := make([]string, streams)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	mg, err := NewMerge(names, opts...)
	if err != nil {
		return nil, err
	}
	r := &mrgMergeRig{mg: mg, rng: mrgRand(0x9e3779b97f4a7c15), lag: lag, streams: uint64(streams)}
	for j := range mrgBenchDepth {
		for s := range streams {
			m := &Message{ID: SourceID(names[s], 0, uint64(j))}
			r.stamp(m, s)
			mg.Push(s, m)
		}
	}
	return r, nil
}

func (r *mrgMergeRig) stamp(m *Message, stream int) {
	r.clock += 100
	m.Time.Alignment = r.clock + int64(stream)*r.lag + int64(r.rng.next()%800)
	m.Time.Event = m.Time.Alignment - int64(stream)*r.lag - int64(r.rng.next()%6400)
	m.Task++
}

func (r *mrgMergeRig) op() {
	m, _ := r.mg.Pop()
	s := int(r.rng.next() % r.streams)
	r.stamp(m, s)
	r.mg.Push(s, m)
}

func mrgBenchMerge(b *testing.B, streams int, lag int64, opts ...MergeOption) {
	r, err := newMrgMergeRig(streams, lag, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	ops := 0
	cpu := mrgStartCPU(b)
	for b.Loop() {
		r.op()
		ops++
	}
	cpu.stop(ops)
	b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkMerge(b *testing.B) {
	for _, s := range []int{1, 8, 64, 512} {
		b.Run(fmt.Sprintf("streams=%d", s), func(b *testing.B) { mrgBenchMerge(b, s, int64(time.Millisecond)) })
	}
}

func BenchmarkMergeWithoutBias(b *testing.B) {
	for _, s := range []int{8, 64} {
		b.Run(fmt.Sprintf("streams=%d", s), func(b *testing.B) { mrgBenchMerge(b, s, 0, WithoutBias()) })
	}
}

// BenchmarkBias adds one message and removes another per operation over
// ever more counted messages: flat figures show Add, Remove and Value cost
// O(1) whatever the count.
func BenchmarkBias(b *testing.B) {
	for _, counted := range []int{1, 1_000, 1_000_000} {
		b.Run(fmt.Sprintf("counted=%d", counted), func(b *testing.B) {
			var bias Bias
			ring := make([]Timestamps, counted)
			for i := range ring {
				ring[i] = Timestamps{Alignment: int64(i), Event: int64(i) - int64(i%97)}
				bias.Add(ring[i])
			}
			b.ReportAllocs()
			i, sink, ops := 0, int64(0), 0
			cpu := mrgStartCPU(b)
			for b.Loop() {
				old := ring[i]
				bias.Remove(old)
				old.Alignment += int64(counted)
				bias.Add(old)
				ring[i] = old
				sink += bias.Value()
				if i++; i == counted {
					i = 0
				}
				ops++
			}
			cpu.stop(ops)
			if sink == 42 {
				b.Log(sink)
			}
		})
	}
}

// BenchmarkBiasExtreme is BenchmarkBias with sums beyond int64, where Value
// takes the 128-bit division.
func BenchmarkBiasExtreme(b *testing.B) {
	var bias Bias
	for range 4 {
		bias.Add(Timestamps{Event: 1 << 62, Alignment: -(1 << 62)})
	}
	x := Timestamps{Event: 1<<62 - 1, Alignment: -(1 << 62)}
	b.ReportAllocs()
	sink, ops := int64(0), 0
	cpu := mrgStartCPU(b)
	for b.Loop() {
		bias.Add(x)
		bias.Remove(x)
		sink += bias.Value()
		ops++
	}
	cpu.stop(ops)
	if sink == 42 {
		b.Log(sink)
	}
}

// BenchmarkStreamBuffer pops one message and pushes it back later per
// operation, at two depths: "in-order" pushes after everything queued (the
// common case, served by the run), "jittered" lands anywhere among the
// queued messages (served by the heap).
func BenchmarkStreamBuffer(b *testing.B) {
	for _, order := range []string{"in-order", "jittered"} {
		for _, depth := range []int{16, 1024} {
			b.Run(fmt.Sprintf("%s/depth=%d", order, depth), func(b *testing.B) {
				buf := NewStreamBuffer("s")
				rng := mrgRand(0x2545f4914f6cdd1d)
				jitter := uint64(1)
				if order == "jittered" {
					jitter = uint64(depth)
				}
				clock := int64(0)
				for j := range depth {
					clock++
					buf.Push(&Message{ID: SourceID("s", 0, uint64(j)), Time: Timestamps{Alignment: clock}})
				}
				b.ReportAllocs()
				ops := 0
				cpu := mrgStartCPU(b)
				for b.Loop() {
					m := buf.Pop()
					clock++
					m.Time.Alignment = clock + int64(rng.next()%jitter)
					buf.Push(m)
					ops++
				}
				cpu.stop(ops)
			})
		}
	}
}

// BenchmarkPartitionMerge reads the next partition and sets its following
// record per operation.
func BenchmarkPartitionMerge(b *testing.B) {
	for _, partitions := range []int{16, 256} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			pm := NewPartitionMerge(partitions)
			rng := mrgRand(0x9e3779b97f4a7c15)
			clock := int64(0)
			for p := range partitions {
				pm.Set(p, int64(p))
			}
			b.ReportAllocs()
			ops := 0
			cpu := mrgStartCPU(b)
			for b.Loop() {
				p, _ := pm.Next()
				clock++
				pm.Set(p, clock+int64(partitions)+int64(rng.next()%32))
				ops++
			}
			cpu.stop(ops)
		})
	}
}
