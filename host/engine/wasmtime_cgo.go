//go:build cgo && !nowasmtime

package engine

// This file calls a few functions of the wasmtime C API directly, from the
// libwasmtime the wasmtime-go bindings link; the declarations match the
// headers of wasmtime 39 (wasmtime/store.h, func.h, memory.h, trap.h,
// error.h), with opaque pointers for the values whose layout the bindings
// own.
//
//   - The epoch deadline callback, which the bindings do not expose:
//     without it reaching a deadline always traps, so a store could only be
//     stopped at a time fixed when a call starts, never on a cancellation.
//     The callback is C, resuming the guest unless its instance's
//     interrupt flag is set, so an epoch tick never calls back into Go.
//   - The calls of the guest's exports and the view of its memory: the
//     bindings' Func.Call builds and frees the function's type on every
//     call (about 10 µs per batch, fifty times wazero's whole call), and
//     flowhost_call makes the call unchecked (CheckABI fixed the
//     signatures) in one crossing.

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;

extern void wasmtime_store_epoch_deadline_callback(wasmtime_store_t *store,
	wasmtime_error_t *(*func)(wasmtime_context_t *context, void *data,
		uint64_t *epoch_deadline_delta, uint8_t *update_kind),
	void *data, void (*finalizer)(void *));
extern wasmtime_error_t *wasmtime_error_new(const char *message);

#define FLOWHOST_INTERRUPTED "flowhost: guest interrupted"

// flowhost_epoch_deadline runs on the guest's thread whenever the engine's
// epoch passes the store's deadline: it stops the guest when its flag is
// set and otherwise moves the deadline one epoch on and resumes.
static wasmtime_error_t *flowhost_epoch_deadline(wasmtime_context_t *context, void *data,
		uint64_t *epoch_deadline_delta, uint8_t *update_kind) {
	if (__atomic_load_n((int32_t *)data, __ATOMIC_SEQ_CST) != 0) {
		return wasmtime_error_new(FLOWHOST_INTERRUPTED);
	}
	*epoch_deadline_delta = 1;
	*update_kind = 0; // WASMTIME_UPDATE_DEADLINE_CONTINUE
	return NULL;
}

static void flowhost_watch_epoch(void *store, int32_t *flag) {
	wasmtime_store_epoch_deadline_callback((wasmtime_store_t *)store, flowhost_epoch_deadline, flag, NULL);
}

typedef struct wasm_trap_t wasm_trap_t;
typedef struct fh_byte_vec { size_t size; char *data; } fh_byte_vec_t;

// The func and memory arguments point at the bindings' wasmtime_func_t and
// wasmtime_memory_t values; args_and_results at 16-byte raw values.
extern wasmtime_error_t *wasmtime_func_call_unchecked(wasmtime_context_t *store, const void *func,
	void *args_and_results, size_t args_and_results_len, wasm_trap_t **trap);
extern uint8_t *wasmtime_memory_data(const wasmtime_context_t *store, const void *memory);
extern size_t wasmtime_memory_data_size(const wasmtime_context_t *store, const void *memory);
extern void wasmtime_context_set_epoch_deadline(wasmtime_context_t *context, uint64_t ticks_beyond_current);
extern bool wasmtime_trap_code(const wasm_trap_t *trap, uint8_t *code);
extern void wasm_trap_message(const wasm_trap_t *trap, fh_byte_vec_t *out);
extern void wasm_trap_delete(wasm_trap_t *trap);
extern void wasmtime_error_message(const wasmtime_error_t *error, fh_byte_vec_t *out);
extern bool wasmtime_error_exit_status(const wasmtime_error_t *error, int *status);
extern void wasmtime_error_delete(wasmtime_error_t *error);
extern void wasm_byte_vec_delete(fh_byte_vec_t *vec);

// fh_outcome is what went wrong in a call; failed is 0 when nothing did.
typedef struct fh_outcome {
	int32_t failed;      // 1: a trap, 2: an error
	int32_t has_code;    // the trap has a code
	int32_t code;
	int32_t has_exit;    // the error is a WASI exit
	int32_t exit_status;
	fh_byte_vec_t message; // the caller frees it with wasm_byte_vec_delete
} fh_outcome_t;

static void flowhost_call(void *context, const void *func, void *vals, size_t n, fh_outcome_t *out) {
	wasm_trap_t *trap = NULL;
	wasmtime_error_t *err = wasmtime_func_call_unchecked(context, func, vals, n, &trap);
	out->failed = 0;
	if (trap != NULL) {
		uint8_t code = 0;
		out->failed = 1;
		out->has_code = wasmtime_trap_code(trap, &code);
		out->code = code;
		out->has_exit = 0;
		wasm_trap_message(trap, &out->message);
		wasm_trap_delete(trap);
	} else if (err != NULL) {
		int status = 0;
		out->failed = 2;
		out->has_code = 0;
		out->has_exit = wasmtime_error_exit_status(err, &status);
		out->exit_status = status;
		wasmtime_error_message(err, &out->message);
		wasmtime_error_delete(err);
	}
}

static uint8_t *flowhost_memory(void *context, const void *memory, size_t *size) {
	*size = wasmtime_memory_data_size(context, memory);
	return wasmtime_memory_data(context, memory);
}
*/
import "C"

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bytecodealliance/wasmtime-go/v39"
)

// interruptedMessage is the message of the error flowhost_epoch_deadline
// stops a guest with.
const interruptedMessage = C.FLOWHOST_INTERRUPTED

// interruptFlag is a flag in C memory that flowhost_epoch_deadline reads:
// set, the guest stops at its next epoch check. The instance's goroutine
// clears, tests and frees it; the engine's Close and a context's AfterFunc
// may set it at any time, so setting and freeing take mu.
type interruptFlag struct {
	mu sync.Mutex
	p  *C.int32_t // nil once freed
}

func newInterruptFlag() *interruptFlag {
	return &interruptFlag{p: (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0)))))}
}

func (f *interruptFlag) word() *atomic.Int32 { return (*atomic.Int32)(unsafe.Pointer(f.p)) }

// set asks the running guest to stop; it does nothing once the flag is freed.
func (f *interruptFlag) set() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.p != nil {
		f.word().Store(1)
	}
}

// clear is for the instance's goroutine, before free.
func (f *interruptFlag) clear() { f.word().Store(0) }

// free releases the flag; the store that reads it must be gone.
func (f *interruptFlag) free() {
	f.mu.Lock()
	defer f.mu.Unlock()
	C.free(unsafe.Pointer(f.p))
	f.p = nil
}

// watchEpoch installs flowhost_epoch_deadline on store with flag.
func watchEpoch(store *wasmtime.Store, flag *interruptFlag) {
	C.flowhost_watch_epoch(storePointer(store), flag.p)
}

// rawVal is a wasmtime_val_raw_t: 16 bytes, 8-aligned; an i32 or i64 is
// its first word (wasmtime runs on little-endian machines only).
type rawVal [2]uint64

// wasmtimeCall is a call of a guest export through flowhost_call.
type wasmtimeCall struct {
	context unsafe.Pointer // the store's wasmtime_context_t
	vals    [2]rawVal      // arguments, then results
	outcome C.fh_outcome_t
}

// call calls fn with the first n of c.vals as arguments, leaving its
// results there. It returns nil or a *wasmtimeError.
func (c *wasmtimeCall) call(fn *wasmtime.Func, n int) error {
	C.flowhost_call(c.context, unsafe.Pointer(fn), unsafe.Pointer(&c.vals[0]), C.size_t(n), &c.outcome)
	if c.outcome.failed == 0 {
		return nil
	}
	msg := C.GoStringN(c.outcome.message.data, C.int(c.outcome.message.size))
	C.wasm_byte_vec_delete(&c.outcome.message)
	return &wasmtimeError{
		trap:    c.outcome.failed == 1,
		hasCode: c.outcome.has_code != 0,
		code:    wasmtime.TrapCode(c.outcome.code),
		hasExit: c.outcome.has_exit != 0,
		exit:    int32(c.outcome.exit_status),
		msg:     strings.TrimSuffix(msg, "\x00"),
	}
}

// memory views the whole linear memory mem.
func (c *wasmtimeCall) memory(mem *wasmtime.Memory) []byte {
	var size C.size_t
	p := C.flowhost_memory(c.context, unsafe.Pointer(mem), &size)
	if p == nil || size == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(size))
}

// setEpochDeadline moves the store's deadline to one epoch from now.
func (c *wasmtimeCall) setEpochDeadline() {
	C.wasmtime_context_set_epoch_deadline((*C.wasmtime_context_t)(c.context), 1)
}

// wasmtimeError is a trap or an error of a guest call.
type wasmtimeError struct {
	trap    bool
	hasCode bool
	code    wasmtime.TrapCode
	hasExit bool
	exit    int32
	msg     string
}

func (e *wasmtimeError) Error() string { return e.msg }

// storePointer returns the wasmtime_store_t of store: the first field of
// wasmtime.Store, unexported. checkStoreLayout guards the assumption.
func storePointer(store *wasmtime.Store) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(store))
}

// checkBindingsLayout verifies what this file assumes of the bindings'
// types: a wasmtime.Store begins with its C store pointer, a Func and a
// Memory are their C values. An upgrade of the bindings that changes them
// then fails engine creation instead of corrupting memory.
func checkBindingsLayout() error {
	for _, c := range []struct {
		t     reflect.Type
		field string
		kind  reflect.Kind
	}{
		{reflect.TypeFor[wasmtime.Store](), "_ptr", reflect.Pointer},
		{reflect.TypeFor[wasmtime.Func](), "val", reflect.Struct},
		{reflect.TypeFor[wasmtime.Memory](), "val", reflect.Struct},
	} {
		if c.t.NumField() == 0 || c.t.Field(0).Offset != 0 || c.t.Field(0).Name != c.field || c.t.Field(0).Type.Kind() != c.kind ||
			(c.kind == reflect.Struct && c.t.NumField() != 1) {
			return fmt.Errorf("engine: the layout of wasmtime-go's %s changed; host/engine/wasmtime_cgo.go needs updating", c.t.Name())
		}
	}
	return nil
}
