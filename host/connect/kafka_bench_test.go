package connect

import "testing"

// BenchmarkKafkaResumeToken compares the resume tokens a kafka source
// builds per record read: one per record (as before record groups) and
// one per group of KafkaGroupRecords, for a topic of 32 partitions. The
// ratio of the two ns/op is the saving on the hot path.
func BenchmarkKafkaResumeToken(b *testing.B) {
	next := make([]int64, 32)
	for p := range next {
		next[p] = 1_000_000_000 + int64(p)
	}
	for _, bc := range []struct {
		name  string
		every int
	}{{"per-record", 1}, {"per-group", KafkaGroupRecords}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var tok []byte
			i := 0
			for b.Loop() {
				next[i%len(next)]++
				if i++; i%bc.every == 0 {
					tok = kafkaResume(next)
				}
			}
			_ = tok
		})
	}
}
