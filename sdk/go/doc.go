// Package flowhost is the Go SDK for flowhost computations: code compiled
// to a WebAssembly module that the flowhost host calls with batches of
// keyed messages and due timers, and that answers with derived messages,
// state changes and timers.
//
// A computation is a Go main package built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter.wasm .
//
// Its main function is empty and never called; an init function registers
// the computation, and this package provides every export of flowhost's ABI
// v1 (flowhost_abi_v1, flowhost_alloc, flowhost_init, flowhost_process):
//
//	func init() {
//		flowhost.Register(flowhost.Computation{Process: func(b *flowhost.Batch) error {
//			for k := range b.Keys() {
//				for m := range k.Messages() {
//					k.Emit("upper", bytes.ToUpper(m.Payload))
//				}
//			}
//			return nil
//		}})
//	}
//
//	func main() {}
//
// The host owns ordering, timestamps, state and timers: a computation sees
// each key's due timers, then its messages, in the guaranteed order; what
// it emits gets its SystemTimestamp, AlignmentTimestamp and message_id from
// the host, derived from the inputs the emit names as parents (by default
// the timer or message being iterated). A panic in Process or Init is
// recovered, logged through the host and reported as a guest failure.
//
// Helpers that own a key's state and timers, with results independent of
// batching: Windows (event-time windows, sdk/WINDOWS.md), IntervalJoin and
// EnrichJoin (sdk/JOINS.md).
//
// Envelopes are read and written by package abi's codec, which is written
// for exactly the envelope types (no reflection, no CBOR library), the same
// one the host uses; it keeps a module small (about 2.9 MB for the identity
// computation) and its per-message cost low. An Emit copies its payload
// into memory shared by the batch's emits rather than allocating per emit.
//
// A key's state is one byte blob (Key.State, SetState). [Value], [List]
// and [Map] layer named, typed cells on it, encoded with [JSON] or
// sdk/go/statecbor's Codec; [SaveState] writes them once per key, refusing
// with a *[QuotaError] a blob over the limit (Computation.MaxStateBytes,
// the parameter max_state_bytes_per_key, or 16 MiB). sdk/JOINS.md gives
// the format, which the Rust SDK shares byte for byte.
//
// Outside WebAssembly the package compiles too, so that a computation's
// logic can be tested with go test; Log then writes to standard error.
// abi/ABI.md in the flowhost repository specifies the wire format.
package flowhost
