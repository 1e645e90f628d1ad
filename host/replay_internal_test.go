package host

import (
	"testing"
	"time"
)

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
