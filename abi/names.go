// Package abi is the contract between the flowhost host and a guest
// computation compiled to WebAssembly: the names a guest exports and imports,
// the ABI version, the CBOR envelopes passed across the boundary, and the
// error codes. It knows nothing of engines or of the runtime; abi/ABI.md is
// the human-readable specification and abi/testdata holds the golden vectors
// that every SDK is tested against.
package abi

import "strconv"

// Version is the ABI version this package speaks. A guest declares the
// version it implements by exporting the marker function named by
// VersionMarker(Version).
const Version = 1

// Export names a guest module provides. Every name is a function export.
const (
	// ExportVersionMarker is the ABI v1 marker: func(). Its presence, not
	// its behaviour, declares the version; the host never calls it.
	ExportVersionMarker = "flowhost_abi_v1"
	// ExportAlloc is func(size i32) -> ptr i32. It returns a region of
	// guest memory of at least size bytes that the host may write the
	// next request into. The region stays valid until the next call of
	// ExportProcess or ExportInit returns.
	ExportAlloc = "flowhost_alloc"
	// ExportProcess is func(ptr i32, len i32) -> i64. It takes an encoded
	// Request and returns the encoded Response packed as ptr<<32 | len,
	// or a negative Status when the guest could not produce a response.
	ExportProcess = "flowhost_process"
	// ExportInit is the optional func(ptr i32, len i32) -> i64. It takes
	// an encoded Init and returns 0, a packed ptr<<32 | len of an encoded
	// InitResult, or a negative Status.
	ExportInit = "flowhost_init"
	// ExportMemory is the guest's linear memory.
	ExportMemory = "memory"
)

// Import module and names the host provides to every guest.
const (
	// ImportModule is the module name of the host functions.
	ImportModule = "flowhost"
	// ImportLog is func(level i32, ptr i32, len i32): writes a UTF-8 log
	// line at a slog level (-4 debug, 0 info, 4 warn, 8 error).
	ImportLog = "log"
)

// VersionMarker returns the name of the marker function a guest exports to
// declare that it implements ABI version v; VersionMarker(Version) is
// ExportVersionMarker.
func VersionMarker(v int) string { return "flowhost_abi_v" + strconv.Itoa(v) }
