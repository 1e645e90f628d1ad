package spec

import (
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

// onFailureSpec is a pipeline with one computation whose on_failure
// block is the argument, written in flow style after "on_failure: ".
func onFailureSpec(block string) string {
	src := preamble + "computations:\n  - name: c\n    plugin: p\n    input_streams: [s]\n"
	if block != "" {
		src += "    on_failure: " + block + "\n"
	}
	return src
}

func TestOnFailureDefaultsAndValues(t *testing.T) {
	defaults := OnFailure{Retries: 2, Backoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, Then: FailDeadLetter, QuarantineAfter: 3}
	tests := []struct {
		name, block string
		want        OnFailure
	}{
		{"left out", "", defaults},
		{"null", "null", defaults},
		{"empty", "{}", defaults},
		{"everything", "{retries: 3, backoff: 100ms, max_backoff: 5s, then: stop, quarantine_after: 5}",
			OnFailure{Retries: 3, Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Then: FailStop, QuarantineAfter: 5}},
		{"no retries", "{retries: 0}",
			OnFailure{Retries: 0, Backoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, Then: FailDeadLetter, QuarantineAfter: 3}},
		{"milliseconds as integers", "{backoff: 10, max_backoff: 1500}",
			OnFailure{Retries: 2, Backoff: 10 * time.Millisecond, MaxBackoff: 1500 * time.Millisecond, Then: FailDeadLetter, QuarantineAfter: 3}},
		{"no wait, never quarantined", "{backoff: 0s, max_backoff: 0s, quarantine_after: 0}",
			OnFailure{Retries: 2, Then: FailDeadLetter}},
		{"backoff equal to max_backoff", "{backoff: 1s, max_backoff: 1s}",
			OnFailure{Retries: 2, Backoff: time.Second, MaxBackoff: time.Second, Then: FailDeadLetter, QuarantineAfter: 3}},
		{"then dead_letter", "{then: dead_letter}", defaults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("pipeline.yaml", []byte(onFailureSpec(tt.block)))
			require.NoError(t, err)
			require.Equal(t, tt.want, p.Computations[0].OnFailure)

			// The effective spec spells the policy out and parses back to it.
			out, err := yaml.Marshal(p)
			require.NoError(t, err)
			require.Contains(t, string(out), "on_failure:")
			again, err := Parse("pipeline.yaml", out)
			require.NoError(t, err, "marshaled spec:\n%s", out)
			require.Equal(t, tt.want, again.Computations[0].OnFailure)
		})
	}
}

func TestOnFailureErrors(t *testing.T) {
	tests := []struct {
		name string
		// block marks with » the place of each expected error.
		block string
		// want is "path: message" of each error, in file order.
		want []string
	}{
		{"negative retries", "{retries: »-1}",
			[]string{`computations[0].on_failure.retries: expected at least 0; got -1`}},
		{"negative quarantine_after", "{quarantine_after: »-2}",
			[]string{`computations[0].on_failure.quarantine_after: expected at least 0; got -2`}},
		{"backoff above max_backoff", "{backoff: »10s, max_backoff: 5s}",
			[]string{`computations[0].on_failure.backoff: expected at most max_backoff (5s); got 10s`}},
		{"backoff above the default max_backoff", "{backoff: »3s}",
			[]string{`computations[0].on_failure.backoff: expected at most max_backoff (2s); got 3s`}},
		{"max_backoff below the default backoff", "{max_backoff: »10ms}",
			[]string{`computations[0].on_failure.max_backoff: expected at least backoff (50ms, the default); got 10ms`}},
		{"unknown then", "{then: »retry}",
			[]string{`computations[0].on_failure.then: expected one of dead_letter, stop; got "retry"`}},
		{"then not a string", "{then: »1}",
			[]string{`computations[0].on_failure.then: expected one of dead_letter, stop; got integer 1 (quote it to make it a string)`}},
		{"negative backoff", "{backoff: »-1s}",
			[]string{`computations[0].on_failure.backoff: expected a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds; got "-1s"`}},
		{"fraction of retries", "{retries: »1.5}",
			[]string{`computations[0].on_failure.retries: expected an integer; got number 1.5`}},
		{"unknown field", "{»retires: 3}",
			[]string{`computations[0].on_failure.retires: unknown field; did you mean "retries"?`}},
		{"not a mapping", "»3",
			[]string{`computations[0].on_failure: expected a mapping; got integer 3`}},
		{"every problem of meaning at once", "{retries: »-1, backoff: »1s, max_backoff: 10ms, quarantine_after: »-1}",
			[]string{
				`computations[0].on_failure.retries: expected at least 0; got -1`,
				`computations[0].on_failure.backoff: expected at most max_backoff (10ms); got 1s`,
				`computations[0].on_failure.quarantine_after: expected at least 0; got -1`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, positions := unmark(t, onFailureSpec(tt.block))
			p, err := Parse("pipeline.yaml", []byte(src))
			require.Nil(t, p)
			list := errorList(t, err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Path + ": " + e.Message
			}
			require.Equal(t, tt.want, got)
			require.Len(t, positions, len(list), "one marker per expected error")
			for i, e := range list {
				require.Equal(t, positions[i], position{e.Line, e.Column}, "position of %q", got[i])
			}
		})
	}
}
