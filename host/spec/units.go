package spec

import (
	"errors"
	"math"
	"time"

	"github.com/flowhost/flowhost/plugins"
)

// sizeExpected is the expectation stated by every size error.
const sizeExpected = `a size such as 65536, "10MB" or "64MiB"`

// errSize is what ParseSize reports for text that is not a size.
var errSize = errors.New("expected " + sizeExpected)

// ParseSize parses a byte size as [plugins.ParseSize] does: a
// non-negative integer followed by an optional unit, B, k/KB, M/MB, G/GB,
// T/TB (powers of 1000) or Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB (powers of 1024),
// the same in a spec as in a plugin manifest. Its errors say what a spec
// expects.
func ParseSize(s string) (int64, error) {
	n, err := plugins.ParseSize(s)
	switch {
	case errors.Is(err, plugins.ErrSizeTooLarge):
		return 0, errors.New("size too large: the limit is 8EiB")
	case err != nil:
		return 0, errSize
	}
	return n, nil
}

// durationExpected is the expectation stated by every duration error.
const durationExpected = `a non-negative duration such as "250ms" or "5m", or an integer number of milliseconds`

// durationFromMillis converts Flow's integer form of a duration.
func durationFromMillis(ms int64) (time.Duration, error) {
	if ms < 0 {
		return 0, errors.New("negative")
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, errors.New("too large: the limit is about 292 years")
	}
	return time.Duration(ms) * time.Millisecond, nil
}
