package flowhost

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// FuzzDecodeWindowState checks that any state either decodes to windows
// that re-encode to the same bytes or is refused with ErrWindowState.
func FuzzDecodeWindowState(f *testing.F) {
	s := windowState{firedThrough: 42, open: []openWindow{{start: -10, end: 0, acc: []byte("1,2")}, {start: 0, end: 10}}}
	f.Add(s.encode())
	f.Add((&windowState{firedThrough: math.MinInt64}).encode())
	f.Add([]byte{})
	f.Add([]byte{2})
	f.Add([]byte{1, 0, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeWindowState(b)
		if err != nil {
			if !errors.Is(err, ErrWindowState) {
				t.Fatalf("error %v does not wrap ErrWindowState", err)
			}
			return
		}
		if again := got.encode(); !bytes.Equal(again, b) {
			// Varints have one shortest form; a longer one is still accepted.
			if got2, err := decodeWindowState(again); err != nil || !bytes.Equal(got2.encode(), again) {
				t.Fatalf("re-encoding %x gives %x, which does not round-trip", b, again)
			}
		}
	})
}

func TestDecodeWindowStateRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", []byte{}},
		{"unknown version", []byte{9}},
		{"truncated count", []byte{1, 0}},
		{"accumulator past the end", []byte{1, 0, 1, 0, 2, 50}},
		{"trailing bytes", append((&windowState{}).encode(), 0)},
		{"windows repeated", (&windowState{open: []openWindow{{start: 24, end: 24}, {start: 24, end: 24, acc: []byte("0")}}}).encode()},
		{"windows out of order", (&windowState{open: []openWindow{{start: 0, end: 10}, {start: -10, end: 0}}}).encode()},
		{"same end, starts out of order", (&windowState{open: []openWindow{{start: 5, end: 10}, {start: 0, end: 10}}}).encode()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeWindowState(tc.in); !errors.Is(err, ErrWindowState) {
				t.Fatalf("decode(%x) = %v, want ErrWindowState", tc.in, err)
			}
		})
	}
}
