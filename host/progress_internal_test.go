package host

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/progress"
	"github.com/flowhost/flowhost/host/runtime"
)

// A replay and a backlog show on the file sources' display, each from its
// first report with work to do until it finished; a backlog caught up when
// it is measured shows nothing.
func TestWorkProgressDisplay(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out bytes.Buffer
	ticks := make(chan time.Time)
	clock := start
	rep := progress.New(&out, false, progress.WithTicks(ticks), progress.WithClock(func() time.Time { return clock }))
	show := workProgress(rep)

	show(runtime.WorkProgress{Kind: runtime.WorkBacklog, Name: "quiet", Finished: true})
	show(runtime.WorkProgress{Kind: runtime.WorkReplay, Name: "orders", Total: 400})
	show(runtime.WorkProgress{Kind: runtime.WorkReplay, Name: "orders", Done: 100, Total: 400})
	clock = start.Add(10 * time.Second)
	show(runtime.WorkProgress{Kind: runtime.WorkReplay, Name: "orders", Done: 400, Total: 400, Finished: true})
	show(runtime.WorkProgress{Kind: runtime.WorkSavepoint, Name: "/sp", Total: 4096})
	rep.Close()

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, "the replay's end, and the savepoint at Close:\n%s", out.String())
	require.Contains(t, lines[0], `msg="progress done" name="replay orders (records)" count=400 total=400 percent=100`)
	require.Contains(t, lines[1], `msg="progress done" name="savepoint /sp (bytes)" count=0 total=4096 percent=0`)
	require.NotContains(t, out.String(), "quiet")
}
