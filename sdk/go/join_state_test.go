package flowhost

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeJoinState checks that any state either decodes, as an interval
// or an enrichment state, to a value that re-encodes to bytes that decode
// to the same value, or is refused with ErrJoinState.
func FuzzDecodeJoinState(f *testing.F) {
	f.Add(encodeIntervalState([]heldRecord{
		{rec: JoinRecord{ID: "orders/p0:1", EventTimestamp: -5, Payload: []byte(`{"a":1}`)}},
		{right: true, matched: true, rec: JoinRecord{ID: "p", EventTimestamp: 1 << 40, Payload: nil}},
	}))
	f.Add(encodeIntervalState(nil))
	f.Add(encodeEnrichState(&JoinRecord{ID: "customers/p0:3", EventTimestamp: 7, Payload: []byte("ann")}))
	f.Add([]byte{})
	f.Add([]byte{1, 'I', 1, 2})
	f.Add([]byte{1, 'E', 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		held, err := decodeIntervalState(b)
		if err != nil {
			if !errors.Is(err, ErrJoinState) {
				t.Fatalf("interval: error %v does not wrap ErrJoinState", err)
			}
		} else {
			again := encodeIntervalState(held)
			held2, err := decodeIntervalState(again)
			if err != nil || !bytes.Equal(encodeIntervalState(held2), again) {
				t.Fatalf("interval: re-encoding %x gives %x, which does not round-trip (%v)", b, again, err)
			}
		}
		v, err := decodeEnrichState(b)
		if err != nil {
			if !errors.Is(err, ErrJoinState) {
				t.Fatalf("enrich: error %v does not wrap ErrJoinState", err)
			}
			return
		}
		if v != nil {
			again := encodeEnrichState(v)
			v2, err := decodeEnrichState(again)
			if err != nil || !bytes.Equal(encodeEnrichState(v2), again) {
				t.Fatalf("enrich: re-encoding %x gives %x, which does not round-trip (%v)", b, again, err)
			}
		}
	})
}

// TestDecodeJoinStateRefusesBadInput requires each bad state to be refused
// with an error naming the field and its byte offset.
func TestDecodeJoinStateRefusesBadInput(t *testing.T) {
	good := encodeIntervalState([]heldRecord{{rec: JoinRecord{ID: "m", EventTimestamp: 1, Payload: []byte("p")}}})
	for _, tc := range []struct {
		name, want string
		in         []byte
		enrich     bool
	}{
		{"empty", "missing version at byte 0", []byte{}, false},
		{"unknown version", "unknown version 2 at byte 0", []byte{2, 'I', 0}, false},
		{"a window state", "kind", []byte{1, 0, 0}, false},
		{"enrich state read as interval", `kind 'E', want 'I' at byte 1`, encodeEnrichState(&JoinRecord{Payload: []byte("v")}), false},
		{"truncated count", "bad record count at byte 2", []byte{1, 'I'}, false},
		{"count larger than the state", "record count larger than the state at byte 3", []byte{1, 'I', 100}, false},
		{"bad side", "record 0: side 2, want 0 or 1 at byte 3", []byte{1, 'I', 1, 2, 0, 0, 0, 0}, false},
		{"bad matched", "record 0: matched 7, want 0 or 1 at byte 4", []byte{1, 'I', 1, 0, 7, 0, 0, 0}, false},
		{"payload past the end", "payload length past the end at byte 8", []byte{1, 'I', 1, 0, 0, 0, 1, 'm', 9, 'x'}, false},
		{"trailing bytes", "trailing bytes at byte 10", append(good, 0), false},
		{"enrich kind", `kind 'I', want 'E' at byte 1`, good, true},
		{"enrich empty payload", "empty payload (a tombstone is no state) at byte 4", []byte{1, 'E', 0, 0, 0}, true},
		{"enrich truncated id", "message_id length past the end at byte 3", []byte{1, 'E', 0, 5, 'a'}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.enrich {
				_, err = decodeEnrichState(tc.in)
			} else {
				_, err = decodeIntervalState(tc.in)
			}
			if !errors.Is(err, ErrJoinState) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode(%x) = %v, want ErrJoinState with %q", tc.in, err, tc.want)
			}
		})
	}
}
