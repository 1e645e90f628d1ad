package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/spec"
)

// TestParseReplayUnknownSource checks that --from with a source the
// pipeline lacks names the sources, and the one probably meant.
func TestParseReplayUnknownSource(t *testing.T) {
	pipe := &spec.Pipeline{Sources: []spec.Source{{Name: "orders-in"}, {Name: "payments-in"}}}
	for _, tc := range []struct{ from, want string }{
		{"order-in=0", `--from "order-in=0": the pipeline has no source "order-in"; did you mean "orders-in"? (sources: orders-in, payments-in)`},
		{"clicks=0", `--from "clicks=0": the pipeline has no source "clicks" (sources: orders-in, payments-in)`},
	} {
		_, err := ParseReplay([]string{tc.from}, pipe)
		require.EqualError(t, err, tc.want)
	}
	got, err := ParseReplay([]string{"orders-in=3"}, pipe)
	require.NoError(t, err)
	require.Equal(t, uint64(3), got["orders-in"].Offset)
}

func TestParseReplayPosition(t *testing.T) {
	for _, tc := range []struct {
		in      string
		offset  uint64
		byOff   bool
		write   int64
		wantErr bool
	}{
		{in: "0", byOff: true},
		{in: "1234", offset: 1234, byOff: true},
		{in: "2024-05-01T10:00:00Z", write: time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixNano()},
		{in: "2024-05-01T10:00:00.5+02:00", write: time.Date(2024, 5, 1, 8, 0, 0, 5e8, time.UTC).UnixNano()},
		{in: "-1", wantErr: true},
		{in: "yesterday", wantErr: true},
		{in: "", wantErr: true},
	} {
		rp, err := parseReplayPosition(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("%q: accepted as %+v", tc.in, rp)
			}
			continue
		}
		if err != nil || rp.ByOffset != tc.byOff || rp.Offset != tc.offset || rp.WriteTime != tc.write {
			t.Errorf("%q: got %+v, %v", tc.in, rp, err)
		}
	}
}

// FuzzParseReplayPosition reads arbitrary --from positions: never a panic,
// and an offset is accepted exactly when the text is a decimal number.
func FuzzParseReplayPosition(f *testing.F) {
	f.Add("42")
	f.Add("2024-05-01T10:00:00Z")
	f.Add("x=1")
	f.Fuzz(func(t *testing.T, s string) {
		rp, err := parseReplayPosition(s)
		if err == nil && rp.ByOffset && rp.WriteTime != 0 {
			t.Fatalf("%q: both an offset and a time: %+v", s, rp)
		}
	})
}
