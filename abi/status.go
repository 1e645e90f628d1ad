package abi

import "strconv"

// Status is the negative code ExportProcess or ExportInit returns instead
// of a packed region when the guest could not produce an envelope at all.
// Codes lie in MinStatus..-1; a region inside a 32-bit memory never packs
// into that range, so every other return value is a region.
type Status int64

const (
	// StatusBadRequest: the guest could not decode the request (or the
	// init envelope).
	StatusBadRequest Status = -1
	// StatusGuestFailure: the guest failed internally, for example its
	// code panicked; it should have logged why through ImportLog.
	StatusGuestFailure Status = -2
	// StatusUnsupportedVersion: the envelope's abi field names a version
	// the guest does not implement.
	StatusUnsupportedVersion Status = -3

	// MinStatus is the smallest value that is a Status rather than a
	// packed region. Values below it are regions (see UnpackResult).
	MinStatus Status = -4095
)

// String names the status, or gives its number for a code this version
// does not define.
func (s Status) String() string {
	switch s {
	case StatusBadRequest:
		return "request could not be decoded"
	case StatusGuestFailure:
		return "guest failure"
	case StatusUnsupportedVersion:
		return "unsupported ABI version"
	}
	return "status " + strconv.FormatInt(int64(s), 10)
}

// Error makes a Status usable as the error a host reports; it reads
// "guest returned status -2 (guest failure)".
func (s Status) Error() string {
	return "guest returned status " + strconv.FormatInt(int64(s), 10) + " (" + s.String() + ")"
}

// PackResult packs a region of guest memory into the value ExportProcess
// and ExportInit return: ptr<<32 | size.
func PackResult(ptr, size uint32) int64 {
	return int64(uint64(ptr)<<32 | uint64(size))
}

// UnpackResult splits a value returned by ExportProcess or ExportInit.
// A value in MinStatus..-1 is returned as err (a Status); any other value
// is the region ptr<<32 | size, zero meaning an empty region (ExportInit's
// "succeeded, nothing to say").
func UnpackResult(r int64) (ptr, size uint32, err error) {
	if r < 0 && r >= int64(MinStatus) {
		return 0, 0, Status(r)
	}
	return uint32(uint64(r) >> 32), uint32(uint64(r)), nil
}
