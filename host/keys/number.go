package keys

import (
	"errors"
	"math"
	"math/big"
	"strconv"
)

// maxExactDigits bounds the integers written exactly: those below 10^21,
// where float formatting switches to exponent notation.
const maxExactDigits = 21

// appendCanonicalNumber appends the canonical text of a validated JSON
// number literal (see the package documentation for the rule).
func appendCanonicalNumber(dst, lit []byte) ([]byte, error) {
	neg := lit[0] == '-'
	i := 0
	if neg {
		i++
	}
	intStart := i
	for i < len(lit) && isDigit(lit[i]) {
		i++
	}
	intPart := lit[intStart:i]
	var frac []byte
	if i < len(lit) && lit[i] == '.' {
		i++
		fracStart := i
		for i < len(lit) && isDigit(lit[i]) {
			i++
		}
		frac = lit[fracStart:i]
	}
	exp, expOK := 0, true
	if i < len(lit) { // 'e' or 'E'
		i++
		expNeg := lit[i] == '-'
		if lit[i] == '+' || lit[i] == '-' {
			i++
		}
		for ; i < len(lit); i++ {
			if exp > 1e6 {
				expOK = false // far outside the exact range either way
				continue
			}
			exp = exp*10 + int(lit[i]-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	// The value is 0.DIGITS scaled: DIGITS = intPart+frac without leading
	// zeros; integral when the fractional digits that remain after applying
	// the exponent are all zero.
	if expOK {
		var digitBuf [maxExactDigits]byte
		if digits, ok := exactInteger(digitBuf[:0], intPart, frac, exp); ok {
			if len(digits) == 0 {
				return append(dst, '0'), nil
			}
			if neg {
				dst = append(dst, '-')
			}
			return append(dst, digits...), nil
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, errors.New("number " + string(lit) + " is beyond the float64 range")
	}
	return appendFloat(dst, f), nil
}

// exactInteger appends the decimal digits (no leading zeros; none for zero)
// of intPart.frac * 10^exp if that is an integer below 10^21.
func exactInteger(dst, intPart, frac []byte, exp int) ([]byte, bool) {
	// Position of the decimal point, counted in the concatenated digits.
	point := len(intPart) + exp
	n := len(intPart) + len(frac)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	// Every digit after the point must be zero.
	for k := max(point, 0); k < n; k++ {
		if digit(k) != '0' {
			return nil, false
		}
	}
	for k := 0; k < min(point, n); k++ {
		c := digit(k)
		if len(dst) == 0 && c == '0' {
			continue
		}
		if len(dst) == maxExactDigits {
			return nil, false
		}
		dst = append(dst, c)
	}
	if len(dst) > 0 {
		for k := n; k < point; k++ { // trailing zeros from the exponent
			if len(dst) == maxExactDigits {
				return nil, false
			}
			dst = append(dst, '0')
		}
	}
	return dst, true
}

// appendFloat writes f as ECMAScript (and encoding/json) do, except that
// an integral f below 10^21 is written with all its exact digits (ECMAScript
// writes 2^63 as 9223372036854776000, which would differ from the key of the
// same integer written exactly), and -0 is written as 0 because it equals 0.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	abs := math.Abs(f)
	if abs < 1e21 && f == math.Trunc(f) {
		return strconv.AppendFloat(dst, f, 'f', 0, 64)
	}
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-09 to e-9.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendCanonicalFloat is appendFloat for values decoded from CBOR, which
// may be NaN or infinite.
func appendCanonicalFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("number " + strconv.FormatFloat(f, 'g', -1, 64) + " has no JSON equivalent")
	}
	return appendFloat(dst, f), nil
}

var exactLimit = new(big.Int).Exp(big.NewInt(10), big.NewInt(maxExactDigits), nil)

// appendCanonicalBigInt writes an integer from a CBOR bignum or a negative
// integer beyond int64.
func appendCanonicalBigInt(dst []byte, v *big.Int) ([]byte, error) {
	if new(big.Int).Abs(v).Cmp(exactLimit) < 0 {
		return v.Append(dst, 10), nil
	}
	f, _ := new(big.Float).SetInt(v).Float64()
	return appendCanonicalFloat(dst, f)
}
