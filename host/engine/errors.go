package engine

import (
	"errors"
	"fmt"
	"strings"
)

// Causes of a *GuestError. Test for them with errors.Is.
var (
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access,
	// division by zero, stack overflow, a host function refusing it). A Go
	// guest traps this way after a panic or when it runs out of memory.
	// The instance is dead.
	ErrTrap = errors.New("guest trapped")
	// ErrExit: the guest called proc_exit (os.Exit in Go). The instance
	// is dead.
	ErrExit = errors.New("guest exited")
	// ErrDeadline: the call's context deadline passed, the CPU limit of a
	// batch. The error also matches context.DeadlineExceeded. The instance
	// is dead unless the deadline had passed before the call started.
	ErrDeadline = errors.New("deadline exceeded")
	// ErrCanceled: the call's context was cancelled. The error also
	// matches context.Canceled. The instance is dead unless the context
	// was cancelled before the call started.
	ErrCanceled = errors.New("canceled")
	// ErrStatus: the guest answered a negative status, in
	// GuestError.Status. The instance stays usable.
	ErrStatus = errors.New("guest returned a failure status")
	// ErrAlloc: flowhost_alloc answered a null pointer. The instance stays
	// usable.
	ErrAlloc = errors.New("guest could not allocate")
	// ErrOutOfBounds: the guest answered a region outside its memory. The
	// instance stays usable.
	ErrOutOfBounds = errors.New("region outside guest memory")
	// ErrResponseTooLarge: the guest's response exceeds the configured
	// maximum. The instance stays usable.
	ErrResponseTooLarge = errors.New("response exceeds limit")
	// ErrRequestTooLarge: the request does not fit a wasm32 length.
	ErrRequestTooLarge = errors.New("request exceeds wasm32 limit")
	// ErrDead: the instance died in an earlier call; create a new one.
	ErrDead = errors.New("instance is dead after an earlier failure")
	// ErrClosed: the instance, its module or its engine was closed.
	ErrClosed = errors.New("closed")
)

// Operations named in GuestError.Op.
const (
	OpInstantiate = "instantiate"
	OpAlloc       = "alloc"
	OpInit        = "init"
	OpProcess     = "process"
)

// GuestError is the error of a failed guest call. Its message reads
// `plugin "name": op: cause[: detail]`.
type GuestError struct {
	// Plugin is the module's plugin name.
	Plugin string
	// Op is the operation that failed: one of the Op constants.
	Op string
	// Cause is one of the Err variables of this package.
	Cause error
	// Status is the guest's negative status when Cause is ErrStatus.
	Status int64
	// Detail is what the engine or the guest said about the failure, such
	// as "wasm error: unreachable" or "exit code 3", preceded by the first
	// line the guest wrote to stderr during the call when there is one:
	// "panic: boom (wasm error: unreachable)". It may be empty.
	Detail string
	// Err is the underlying error, such as context.DeadlineExceeded; nil
	// when there is none.
	Err error
}

func (e *GuestError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q: %s: %v", e.Plugin, e.Op, e.Cause)
	if e.Cause == ErrStatus {
		fmt.Fprintf(&b, " %d", e.Status)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap exposes both Cause and Err to errors.Is and errors.As.
func (e *GuestError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.Err}
}

// ValidationError lists every way a module breaks ABI v1 or asks for more
// than was granted. Its message reads `plugin "name": problem; problem`.
type ValidationError struct {
	// Plugin is the plugin name.
	Plugin string
	// Problems are the findings, each naming the export or import at
	// fault, in the order exports then imports.
	Problems []string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("plugin %q: %s", e.Plugin, strings.Join(e.Problems, "; "))
}
