package ordering

import (
	"math"
	"testing"
)

// mrgDecodeScript turns fuzz bytes into a merge script; every input decodes
// to some script, so the fuzzer explores scripts rather than a format.
//
//	byte 0: streams = 1 + b%6; bit 7 set means WithoutBias
//	byte 1: bit i set means stream i has a delay, read from the next bytes
//	        in stream order with mrgFuzzTime
//	then ops: a byte b; b%4 == 0 is a Pop, otherwise a Push onto stream
//	        (b>>2) % streams of a message with alignment and event from
//	        mrgFuzzTime, task = next%4, id rank = next%4, payload = next%4.
//
// Missing bytes read as 0; ops past mrgFuzzMaxOps are ignored, since the
// reference is quadratic.
func mrgDecodeScript(data []byte) mrgScript {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	head := next()
	sc := mrgScript{Streams: 1 + int(head%6), NoBias: head&0x80 != 0, Delays: map[int]int64{}}
	mask := next()
	for s := range sc.Streams {
		if mask&(1<<s) != 0 {
			sc.Delays[s] = mrgFuzzTime(next())
		}
	}
	for len(data) > 0 && len(sc.Ops) < mrgFuzzMaxOps {
		b := next()
		if b%4 == 0 {
			sc.Ops = append(sc.Ops, mrgOp{Pop: true})
			continue
		}
		sc.Ops = append(sc.Ops, mrgOp{
			Stream:    int(b>>2) % sc.Streams,
			Alignment: mrgFuzzTime(next()),
			Event:     mrgFuzzTime(next()),
			Task:      TaskID(next() % 4),
			IDRank:    uint64(next() % 4),
			Payload:   int(next() % 4),
		})
	}
	return sc
}

const mrgFuzzMaxOps = 256

// mrgFuzzTime maps a byte to a timestamp: small values (so that
// priorities tie) and the ends of int64 (so that sums clamp).
func mrgFuzzTime(b byte) int64 {
	switch b {
	case 0xff:
		return math.MaxInt64
	case 0xfe:
		return math.MinInt64
	case 0xfd:
		return math.MaxInt64 - 1
	case 0xfc:
		return math.MinInt64 + 1
	}
	return int64(int8(b))
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 0x00, 0x01, 10, 10, 0, 0, 0, 0x02, 9, 100, 1, 0, 0, 0x00, 0x00})
	f.Add([]byte{0x82, 0x03, 5, 0xfb, 0x01, 0xff, 0xfe, 1, 1, 1, 0x05, 0xfe, 0xff, 0, 0, 0, 0x00, 0x00, 0x00})
	f.Add([]byte{0x05, 0xff, 1, 2, 3, 4, 5, 6, 0x01, 1, 1, 0, 0, 0, 0x05, 1, 1, 0, 0, 0, 0x09, 1, 120, 0, 0, 0, 0x00, 0x0d, 1, 0xff, 2, 2, 2, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		mrgRunScript(t, mrgDecodeScript(data))
	})
}
