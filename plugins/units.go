package plugins

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps a lower-cased unit to its multiplier: k, M, G, T are
// powers of 1000 and Ki, Mi, Gi, Ti powers of 1024 (IEC 80000-13, and the
// Kubernetes quantity convention), each with or without a trailing B.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
}

var (
	// ErrSizeSyntax is returned by [ParseSize] for text that is not a size.
	ErrSizeSyntax = errors.New("not a size")
	// ErrSizeTooLarge is returned by [ParseSize] for a size above
	// math.MaxInt64 bytes.
	ErrSizeTooLarge = errors.New("size too large")
)

// ParseSize parses a byte size written as a non-negative integer followed
// by an optional unit: B, k/KB, M/MB, G/GB, T/TB (powers of 1000) or
// Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB (powers of 1024), case-insensitive, with
// optional spaces between. It
// rejects fractions and signs. Manifests and pipeline specs both read sizes
// with it, so a size means the same in every file flowhost reads.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	digits := 0
	for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return 0, ErrSizeSyntax
	}
	mult, ok := sizeUnits[strings.ToLower(strings.TrimSpace(s[digits:]))]
	if !ok {
		return 0, ErrSizeSyntax
	}
	n, err := strconv.ParseInt(s[:digits], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, ErrSizeTooLarge
	}
	return n * mult, nil
}
