//! Guest SDK for flowhost computations written in Rust.
//!
//! A computation is a type implementing [`Computation`]; the [`export!`]
//! macro turns the crate into a flowhost guest by defining the exports of
//! ABI v1 (`flowhost_abi_v1`, `flowhost_alloc`, `flowhost_init`,
//! `flowhost_process`, and `_initialize`). Build it as a `cdylib` for
//! `wasm32-wasi`:
//!
//! ```
//! use flowhost::{Batch, Computation, Error};
//!
//! /// Counts each key's messages and emits the running count.
//! #[derive(Default)]
//! struct Counter;
//!
//! impl Computation for Counter {
//!     fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
//!         batch.for_each_key(|key| {
//!             let mut n: u64 = match key.state() {
//!                 Some(s) => std::str::from_utf8(s)?.parse()?,
//!                 None => 0,
//!             };
//!             for m in key.messages() {
//!                 n += 1;
//!                 key.emit("counts", n.to_string()).parent(&m);
//!             }
//!             key.set_state(n.to_string());
//!             Ok(())
//!         })
//!     }
//! }
//!
//! flowhost::export!(Counter);
//! ```
//!
//! The host owns timestamps, ordering, keys, state and timers: a batch
//! carries, per key, the key's state and its due timers and messages; the
//! computation answers with emits, a state change and timer changes, which
//! the host commits atomically. State that must survive belongs in the
//! key's state, never in the computation's fields: an instance may be
//! discarded and replaced at any time.
//!
//! Errors: an `Err` returned for a key (by [`Batch::for_each_key`]'s
//! closure, or passed to [`Key::fail`]) fails that key alone, whose inputs
//! go to the dead-letter stream; an `Err` returned by
//! [`Computation::process`], an [`Error::batch`], or [`Batch::fail_batch`]
//! fails the whole batch. Misusing the API (an emit to an undeclared
//! stream, a parent that is not an input of the key, state or timers in a
//! `map` computation) makes the guest answer "guest failure" with a log
//! line naming the call's source location, as the Go SDK does.
//!
//! Event-time windows (tumbling, hopping, session, with allowed lateness
//! and a late stream) are [`Windows`]: the port of the Go SDK's helper,
//! with the same results and state bytes (`sdk/WINDOWS.md`).
//!
//! A panic traps the instance: WebAssembly has no unwinding. The SDK logs
//! the panic message through `flowhost.log` first; the host reports the
//! trap and starts a new instance, losing nothing, since state lives in the
//! host.

mod batch;
mod cbor;
mod envelope;
mod error;
mod guest;
mod join;
mod json;
mod key_fields;
mod log;
mod params;
mod state;
mod window;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use batch::{
    Batch, BatchInfo, EmitBuilder, IntoBytes, Key, Keys, Kind, Message, Messages, Parent, Timer,
    TimerBuilder, Timers, Watermarks,
};
pub use error::Error;
pub use guest::{Guest, Status};
pub use join::{EnrichJoin, IntervalJoin, JoinPair, JoinRecord, JOIN_STATE_ERROR};
pub use key_fields::{parse_key, KeyError, KeyFields};
pub use log::{log, Level};
pub use params::{ParamError, Params, Value};
pub use state::{
    decode_typed_state, Cbor, Codec, Json, ListCell, MapCell, RawCell, StateError, TypedState, ValueCell,
    ABI_MAX_STATE_BYTES, MAX_STATE_PARAM,
};
pub use window::{Aggregator, Window, WindowSpec, WindowStateError, Windows};

/// What a guest module computes. The [`export!`] macro makes one value of
/// it the module's computation; the host calls [`init`](Self::init) once
/// per instance and then [`process`](Self::process) once per batch, never
/// concurrently.
pub trait Computation {
    /// Runs once per instance, before the first batch, with the
    /// computation's parameters from the pipeline spec. An `Err` keeps the
    /// computation from starting; the host reports its text with the
    /// plugin's name.
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        let _ = params;
        Ok(())
    }

    /// Handles one batch: the inputs of several keys of one partition. An
    /// `Err` fails the whole batch (the host retries it or sends it to the
    /// dead-letter stream, by policy) and drops everything the batch did;
    /// [`Key::fail`] fails a single key instead.
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error>;
}

/// A boxed computation is a computation, so that a `Box<dyn Computation>`
/// chosen at run time can be exported or tested like any other.
impl<C: Computation + ?Sized> Computation for Box<C> {
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        (**self).init(params)
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        (**self).process(batch)
    }
}

/// Makes a computation the guest module's computation by defining the
/// exports of flowhost ABI v1 in the calling crate, which must be built
/// as a `cdylib`. The expression is evaluated once per instance, when the
/// host first calls the module, and must give a value of a type that
/// implements [`Computation`] and `'static`.
///
/// ```ignore
/// flowhost::export!(WindowCount::new());
/// ```
///
/// Use it exactly once per module: a second use fails to link because the
/// export names repeat.
#[macro_export]
macro_rules! export {
    ($computation:expr) => {
        const _: () = {
            fn __flowhost_make() -> ::std::boxed::Box<dyn $crate::Computation> {
                ::std::boxed::Box::new($computation)
            }

            #[export_name = "flowhost_abi_v1"]
            extern "C" fn __flowhost_abi_v1() {}

            #[export_name = "flowhost_alloc"]
            extern "C" fn __flowhost_alloc(size: i32) -> i32 {
                $crate::__rt::alloc(size)
            }

            #[export_name = "flowhost_init"]
            extern "C" fn __flowhost_init(ptr: i32, len: i32) -> i64 {
                $crate::__rt::init(ptr, len, __flowhost_make)
            }

            #[export_name = "flowhost_process"]
            extern "C" fn __flowhost_process(ptr: i32, len: i32) -> i64 {
                $crate::__rt::process(ptr, len, __flowhost_make)
            }

            // A reactor's initializer: with it the linker treats the module
            // as a library whose exports may be called any number of times,
            // instead of wrapping every export in constructor and destructor
            // calls as it does for a command.
            #[cfg(target_arch = "wasm32")]
            #[export_name = "_initialize"]
            extern "C" fn __flowhost_initialize() {
                $crate::__rt::initialize()
            }
        };
    };
}

/// Writes a log line at [`Level::Debug`], formatted like `format!`.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::Level::Debug, &::std::format!($($arg)*)) };
}

/// Writes a log line at [`Level::Info`], formatted like `format!`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::Level::Info, &::std::format!($($arg)*)) };
}

/// Writes a log line at [`Level::Warn`], formatted like `format!`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::Level::Warn, &::std::format!($($arg)*)) };
}

/// Writes a log line at [`Level::Error`], formatted like `format!`.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log($crate::Level::Error, &::std::format!($($arg)*)) };
}

/// The functions behind [`export!`]'s exports. Not a public API.
#[doc(hidden)]
pub mod __rt {
    pub use crate::guest::rt::{alloc, init, initialize, process};
}
