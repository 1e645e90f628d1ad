package spec

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// sizeUnits maps a lower-cased unit to its multiplier: decimal units are
// powers of 1000, binary (…iB) units powers of 1024, as in IEC 80000-13.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// sizeExpected is the expectation stated by every size error.
const sizeExpected = `a size such as 65536, "10MB" or "64MiB"`

// errSize is what ParseSize reports for text that is not a size.
var errSize = errors.New("expected " + sizeExpected)

// ParseSize parses a byte size written as a non-negative integer followed by
// an optional unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB
// (powers of 1024), case-insensitive, with optional spaces between. It
// rejects fractions, signs and results above math.MaxInt64.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	digits := 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return 0, errSize
	}
	mult, ok := sizeUnits[strings.ToLower(strings.TrimSpace(s[digits:]))]
	if !ok {
		return 0, errSize
	}
	n, err := strconv.ParseInt(s[:digits], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, errors.New("size too large: the limit is 8EiB")
	}
	return n * mult, nil
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
