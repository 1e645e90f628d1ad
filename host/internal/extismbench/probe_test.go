package extismbench_test

import (
	"testing"
	"time"
	goruntime "runtime"
)

func TestProbe(t *testing.T) {
	p := newExtism(t)
	pl := payload(1)
	for r := 0; r < 6; r++ {
		var a, b goruntime.MemStats
		goruntime.ReadMemStats(&a)
		start := time.Now()
		for i := 0; i < 1000; i++ {
			if _, _, err := p.Call("identity", pl); err != nil {
				t.Fatal(err)
			}
		}
		goruntime.ReadMemStats(&b)
		t.Logf("round %d: %v/call, kernel mem %d, mallocs %d, bytes %d", r, time.Since(start)/1000, p.Memory().Size(), b.Mallocs-a.Mallocs, b.TotalAlloc-a.TotalAlloc)
	}
}
