package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// grantOrder drives a one-slot scheduler with every group always waiting
// (each holds its slot for its own batch time, charged exactly) and
// returns how many slots each group got out of n.
func grantOrder(t *testing.T, weights, batchMs []int, n int) []int {
	t.Helper()
	s := newScheduler(1)
	groups := make([]*group, len(weights))
	for i, w := range weights {
		groups[i] = s.group(string(rune('a'+i)), w, 0, 0, nil)
	}
	ctx := context.Background()
	// Group 0 takes the slot; then everyone queues one waiter, and each
	// time a slot is released the granted group queues again.
	require.NoError(t, s.acquire(ctx, groups[0]))
	holder := 0
	granted := make(chan int, len(groups)+1)
	wait := func(i int) {
		go func() {
			if s.acquire(ctx, groups[i]) == nil {
				granted <- i
			}
		}()
	}
	for i := range groups {
		wait(i)
	}
	// Let every waiter queue before the first release.
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		queued := 0
		for _, g := range groups {
			queued += len(g.queue)
		}
		return queued == len(groups)
	}, 10*time.Second, time.Millisecond)
	counts := make([]int, len(groups))
	for range n {
		s.release(groups[holder], time.Duration(batchMs[holder])*time.Millisecond)
		holder = <-granted
		counts[holder]++
		wait(holder)
		require.Eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(groups[holder].queue) == 1
		}, 10*time.Second, time.Millisecond)
	}
	return counts
}

func TestSchedulerSharesSlotTimeByWeight(t *testing.T) {
	cases := []struct {
		name    string
		weights []int
		batchMs []int
		// wantTime: each group's share of slot time.
		wantTime []float64
	}{
		{"equal", []int{1, 1}, []int{1, 1}, []float64{0.5, 0.5}},
		{"weighted", []int{1, 3}, []int{1, 1}, []float64{0.25, 0.75}},
		// A hog whose batches take 100x as long gets no more slot time
		// than its weight's share: it gets its slot 100x less often.
		{"hog", []int{1, 1}, []int{100, 1}, []float64{0.5, 0.5}},
		{"three", []int{2, 1, 1}, []int{5, 1, 3}, []float64{0.5, 0.25, 0.25}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			counts := grantOrder(t, c.weights, c.batchMs, 2000)
			var total float64
			for i, n := range counts {
				total += float64(n * c.batchMs[i])
			}
			for i, n := range counts {
				share := float64(n*c.batchMs[i]) / total
				require.InDelta(t, c.wantTime[i], share, 0.05, "group %d: %d grants, %v of slot time (counts %v)", i, n, share, counts)
			}
		})
	}
}

func TestSchedulerCapsConcurrentSlotsPerGroup(t *testing.T) {
	s := newScheduler(4)
	capped := s.group("capped", 1, 2, 0, nil)
	other := s.group("other", 1, 0, 0, nil)
	ctx := context.Background()
	require.NoError(t, s.acquire(ctx, capped))
	require.NoError(t, s.acquire(ctx, capped))
	third := make(chan error, 1)
	go func() { third <- s.acquire(ctx, capped) }()
	// Two slots stay free, yet the capped group waits; the other group
	// gets them at once.
	require.NoError(t, s.acquire(ctx, other))
	require.NoError(t, s.acquire(ctx, other))
	select {
	case err := <-third:
		t.Fatalf("a third slot for a group capped at 2: %v", err)
	default:
	}
	s.release(capped, time.Millisecond)
	require.NoError(t, <-third)
	s.mu.Lock()
	require.Equal(t, 2, capped.running)
	s.mu.Unlock()
}

func TestSchedulerCancelledWaiterGivesNothingAway(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		slots := rapid.IntRange(1, 3).Draw(rt, "slots")
		s := newScheduler(slots)
		g := s.group("g", 1, 0, 0, nil)
		for range slots {
			require.NoError(rt, s.acquire(context.Background(), g))
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.acquire(ctx, g) }()
		if rapid.Bool().Draw(rt, "release first") {
			s.release(g, 0) // the waiter may be granted before it sees the cancel
		}
		cancel()
		err := <-done
		s.mu.Lock()
		defer s.mu.Unlock()
		// Whatever won the race, the slots add up: held + free = slots.
		require.Equal(rt, slots, g.running+s.free, "err %v", err)
		require.Empty(rt, g.queue)
	})
}

func TestSchedulerIdleGroupBanksNoCredit(t *testing.T) {
	s := newScheduler(1)
	busy := s.group("busy", 1, 0, 0, nil)
	idle := s.group("idle", 1, 0, 0, nil)
	ctx := context.Background()
	// busy runs alone for a long time.
	for range 100 {
		require.NoError(t, s.acquire(ctx, busy))
		s.release(busy, 10*time.Millisecond)
	}
	require.NoError(t, s.acquire(ctx, busy))
	woke := make(chan struct{})
	go func() { _ = s.acquire(ctx, idle); close(woke) }()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(idle.queue) == 1 }, 10*time.Second, time.Millisecond)
	s.mu.Lock()
	require.GreaterOrEqual(t, idle.vtime, busy.vtime, "the idle group starts level with the busy one, not a second behind it")
	s.mu.Unlock()
	s.release(busy, 10*time.Millisecond)
	<-woke
}

func TestSchedulerCPULimitThrottlesAGroupEvenWithSlotsFree(t *testing.T) {
	s := newScheduler(2)
	clock := time.Unix(1000, 0)
	s.now = func() time.Time { return clock }
	hog := s.group("hog", 1, 0, 0.5, nil) // half a core
	other := s.group("other", 1, 0, 0, nil)
	ctx := context.Background()
	require.NoError(t, s.acquire(ctx, hog))
	s.release(hog, 2*time.Second) // a long batch: 1.95 s of credit owed
	got := make(chan error, 1)
	go func() { got <- s.acquire(ctx, hog) }()
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(hog.queue) == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, s.acquire(ctx, other), "the other group runs meanwhile")
	s.release(other, time.Second)
	// Credit starts at 0.05 s (one 100 ms period's worth), is -1.95 s
	// after the batch and earns 0.5 s a second: positive after more than
	// 3.9 s.
	for _, advance := range []time.Duration{time.Second, 2900 * time.Millisecond, 100 * time.Millisecond} {
		s.mu.Lock()
		clock = clock.Add(advance)
		s.dispatch() // what the wake timer does
		waiting := len(hog.queue) == 1
		s.mu.Unlock()
		if advance != 100*time.Millisecond {
			require.True(t, waiting, "still waiting after %v", clock.Sub(time.Unix(1000, 0)))
		}
	}
	select {
	case err := <-got:
		require.NoError(t, err, "granted after 4 s")
	case <-time.After(10 * time.Second):
		t.Fatal("not granted after 4 s")
	}
}

// TestSchedulerWakesAGroupWaitingForCreditAlone: with every slot free and
// nobody else to release one, a group out of CPU credit is still granted
// its slot once the wake timer fires.
func TestSchedulerWakesAGroupWaitingForCreditAlone(t *testing.T) {
	s := newScheduler(2)
	g := s.group("g", 1, 0, 100, nil) // 100 cores: credit comes back within ms
	require.NoError(t, s.acquire(context.Background(), g))
	s.release(g, 1200*time.Millisecond) // owes 0.2 s of credit: 2 ms at 100/s
	done := make(chan error, 1)
	go func() { done <- s.acquire(context.Background(), g) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a group waiting for credit alone was never woken")
	}
}
