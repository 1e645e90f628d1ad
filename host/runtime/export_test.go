package runtime

import (
	"context"
	"time"

	"github.com/flowhost/flowhost/host/spec"
)

// SetRetryWait replaces how rt waits before it retries a failed batch (a
// timer of on_failure's backoff, by default), so that tests neither sleep
// nor depend on timing. Call it before Run.
func SetRetryWait(rt *Runtime, wait func(ctx context.Context, d time.Duration) error) {
	rt.retryWait = wait
}

// WaitRetry is the default wait between the attempts of a batch.
var WaitRetry = waitRetry

// RetryDelay is the wait before the retry-th retry of a batch under f.
func RetryDelay(f spec.OnFailure, retry int) time.Duration { return policyOf(f).delay(retry) }

// CheckIdle makes every source of rt look at its idleness now, as its idle
// timer does when a partition may have turned idle, so that tests on a
// scripted clock need not wait for the timer.
func CheckIdle(rt *Runtime) {
	for _, src := range rt.sources {
		src.checkIdle()
	}
}

// SetKafkaSinkFault makes every exactly-once Kafka sink of rt call fault
// at each step of its commit; an error stops the sink there, as a crash
// would, and the run fails with it. Call it before Run.
func SetKafkaSinkFault(rt *Runtime, fault func(sink string, step KafkaSinkStep) error) {
	rt.kafkaFault = fault
}
