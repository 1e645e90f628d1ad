package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/runtime"
)

// TestExitCodeOrdersTheOutcomes checks the documented exit statuses of
// each way a run can end.
func TestExitCodeOrdersTheOutcomes(t *testing.T) {
	quarantined := fmt.Errorf("%w: computation %q partition 0: reason", ErrQuarantined, "c")
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"finished", nil, ExitOK},
		{"cancelled before it started", context.Canceled, ExitOK},
		{"a fatal error", errors.New(`sink "out": disk full`), ExitFailed},
		{"quarantined", quarantined, ExitQuarantined},
		{"quarantined, and the summary file failed", errors.Join(quarantined, errors.New("summary: permission denied")), ExitQuarantined},
		{"interrupted", runtime.ErrInterrupted, ExitInterrupted},
		{"interrupted, wrapped", fmt.Errorf("run: %w", runtime.ErrInterrupted), ExitInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ExitCode(tc.err))
		})
	}
}

// TestRunSummaryFinishReportsQuarantines checks that a run that otherwise
// ended well reports its quarantined partitions as an error wrapping
// ErrQuarantined that names each, and that a fatal error stays the
// run's error.
func TestRunSummaryFinishReportsQuarantines(t *testing.T) {
	withQuarantine := func() *RunSummary {
		return &RunSummary{Summary: runtime.Summary{Pipeline: "p", Computations: []runtime.ComputationSummary{
			{Name: "a"},
			{Name: "b", Quarantined: []runtime.QuarantinedPartition{{Partition: 1, Reason: "kept trapping"}}},
		}}}
	}
	s := withQuarantine()
	err := s.finish(nil)
	require.ErrorIs(t, err, ErrQuarantined)
	require.Contains(t, err.Error(), `computation "b" partition 1: kept trapping`)
	require.Equal(t, ExitQuarantined, s.ExitCode)
	require.Equal(t, err.Error(), s.Error)
	var out bytes.Buffer
	s.write(&out)
	require.Contains(t, out.String(), "partition 1 quarantined: kept trapping")
	require.Contains(t, out.String(), "exit status 3")

	s = withQuarantine()
	fatal := errors.New(`source "in": broken`)
	require.Equal(t, fatal, s.finish(fatal))
	require.Equal(t, ExitFailed, s.ExitCode)

	s = &RunSummary{Summary: runtime.Summary{Computations: []runtime.ComputationSummary{{Name: "a"}}}}
	require.NoError(t, s.finish(nil))
	require.Equal(t, ExitOK, s.ExitCode)
	require.Empty(t, s.Error)
}
