use std::collections::BTreeMap;

use crate::batch::{Batch, Kind};
use crate::cbor;
use crate::envelope::{Init, InitResult, Request};
use crate::log::{log, Level};
use crate::params::{Params, Value};
use crate::Computation;

/// The ABI version this SDK speaks.
const ABI_VERSION: u64 = 1;

/// A failure status a guest answers instead of an envelope (ABI.md
/// section 1). The host reports it with the plugin's name and applies the
/// pipeline's failure policy to the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    /// The guest could not decode the request or init envelope.
    BadRequest = -1,
    /// The guest failed internally; it logged why first.
    GuestFailure = -2,
    /// The envelope speaks an ABI version this SDK does not.
    UnsupportedVersion = -3,
}

/// The ABI dispatch of one guest instance: it decodes envelopes, runs the
/// computation and encodes its answers. The [`export!`](crate::export)
/// macro's exports call it; it is public so that a computation can be
/// tested natively with envelope bytes, such as the golden vectors.
pub struct Guest {
    computation: Box<dyn Computation>,
    started: bool,
    outputs: Vec<String>,
    /// The envelope returned last; the host may read it until its next
    /// call, so it is only reset when that call starts.
    out: Vec<u8>,
}

impl Guest {
    /// A guest running `computation`.
    pub fn new(computation: impl Computation + 'static) -> Self {
        Guest { computation: Box::new(computation), started: false, outputs: Vec::new(), out: Vec::new() }
    }

    /// Handles the init envelope (`flowhost_init`): `Ok(None)` when the
    /// computation started, `Ok(Some(init_result))` when it refused, with
    /// the encoded InitResult carrying its error.
    pub fn init(&mut self, envelope: &[u8]) -> Result<Option<&[u8]>, Status> {
        self.started = false;
        let init = decode_init(envelope)?;
        let params = params(&init)?;
        self.outputs = params.output_streams.clone();
        if let Err(err) = self.computation.init(&params) {
            return self.encode(&InitResult { error: err.wire_text() }).map(Some);
        }
        self.started = true;
        Ok(None)
    }

    /// Handles one request envelope (`flowhost_process`) and returns the
    /// encoded response. It needs a successful [`init`](Self::init) first,
    /// as the host always calls it first.
    pub fn process(&mut self, envelope: &[u8]) -> Result<&[u8], Status> {
        if !self.started {
            log(Level::Error, "flowhost: flowhost_process called before a successful flowhost_init");
            return Err(Status::GuestFailure);
        }
        let req = decode_request(envelope)?;
        let kind = Kind::parse(req.kind.0).ok_or_else(|| {
            log(Level::Error, &format!("flowhost: request of unknown kind {:?}", req.kind.0));
            Status::BadRequest
        })?;
        let mut batch = Batch::new(&req, envelope, kind, &self.outputs);
        let result = self.computation.process(&mut batch);
        if let Some(misuse) = batch.misuse() {
            log(Level::Error, misuse);
            return Err(Status::GuestFailure);
        }
        let resp = batch.response(&result);
        self.out.clear();
        if let Err(err) = serde_cbor::to_writer(&mut self.out, &resp) {
            log(Level::Error, &format!("flowhost: cannot encode the response: {err}"));
            return Err(Status::GuestFailure);
        }
        Ok(&self.out)
    }

    fn encode(&mut self, result: &InitResult<'_>) -> Result<&[u8], Status> {
        self.out.clear();
        if let Err(err) = serde_cbor::to_writer(&mut self.out, result) {
            log(Level::Error, &format!("flowhost: cannot encode the init result: {err}"));
            return Err(Status::GuestFailure);
        }
        Ok(&self.out)
    }
}

/// Reports an envelope that does not decode: as one of another ABI version
/// when its `abi` field says so, as a bad request otherwise.
fn bad_envelope(what: &str, data: &[u8], err: &str) -> Status {
    match cbor::peek_version(data) {
        Some(v) if v != ABI_VERSION => {
            log(
                Level::Error,
                &format!("flowhost: the {what} speaks ABI version {v}; this SDK speaks {ABI_VERSION}"),
            );
            Status::UnsupportedVersion
        }
        _ => {
            log(Level::Error, &format!("flowhost: cannot decode the {what}: {err}"));
            Status::BadRequest
        }
    }
}

fn decode_request(data: &[u8]) -> Result<Request<'_>, Status> {
    cbor::check_envelope(data).map_err(|e| bad_envelope("request", data, &e))?;
    let req: Request = serde_cbor::from_slice(data).map_err(|e| bad_envelope("request", data, &e.to_string()))?;
    if req.abi != ABI_VERSION {
        return Err(bad_envelope("request", data, "wrong version"));
    }
    Ok(req)
}

fn decode_init(data: &[u8]) -> Result<Init<'_>, Status> {
    cbor::check_envelope(data).map_err(|e| bad_envelope("init envelope", data, &e))?;
    let init: Init = serde_cbor::from_slice(data).map_err(|e| bad_envelope("init envelope", data, &e.to_string()))?;
    if init.abi != ABI_VERSION {
        return Err(bad_envelope("init envelope", data, "wrong version"));
    }
    Ok(init)
}

/// Validates the init envelope as the host's `abi.Init.Validate` does and
/// turns it into Params.
fn params(init: &Init<'_>) -> Result<Params, Status> {
    let invalid = |msg: String| {
        log(Level::Error, &format!("flowhost: invalid init envelope: {msg}"));
        Status::BadRequest
    };
    let kind = Kind::parse(init.kind.0)
        .ok_or_else(|| invalid(format!("kind: unknown kind {:?} (want transform or map)", init.kind.0)))?;
    if init.computation.0.is_empty() {
        return Err(invalid("computation: empty".to_string()));
    }
    let mut outputs: Vec<String> = Vec::with_capacity(init.output_streams.len());
    for (i, s) in init.output_streams.iter().enumerate() {
        if s.0.is_empty() {
            return Err(invalid(format!("output_streams[{i}]: empty")));
        }
        if let Some(j) = outputs.iter().position(|o| o == s.0) {
            return Err(invalid(format!("output_streams[{i}]: {:?} repeats output_streams[{j}]", s.0)));
        }
        outputs.push(s.0.to_string());
    }
    let mut values = BTreeMap::new();
    for (name, v) in init.parameters.iter().flatten() {
        let v = Value::from_cbor(v.clone(), &format!("parameters.{}", name.0)).map_err(invalid)?;
        values.insert(name.0.to_string(), v);
    }
    Ok(Params {
        computation: init.computation.0.to_string(),
        kind,
        partition: init.partition,
        output_streams: outputs,
        values,
    })
}

/// The module-wide instance behind the exports of [`export!`](crate::export).
pub mod rt {
    use std::cell::RefCell;

    use super::{Guest, Status};
    use crate::log::{log, Level};
    use crate::Computation;

    /// The region size above which alloc gives memory back when a much
    /// smaller request follows a large one.
    const SHRINK_ABOVE: usize = 1 << 20;

    struct Instance {
        /// The region flowhost_alloc handed out last.
        input: Vec<u8>,
        guest: Option<Guest>,
    }

    thread_local! {
        // WebAssembly guests have one thread, and the host calls one export
        // at a time, so the cell is never contended.
        static INSTANCE: RefCell<Instance> = RefCell::new(Instance { input: Vec::new(), guest: None });
    }

    /// `_initialize`: runs the module's static constructors, as the
    /// reactor entry point of wasi-libc does, and installs the panic hook.
    pub fn initialize() {
        #[cfg(target_arch = "wasm32")]
        {
            extern "C" {
                fn __wasm_call_ctors();
            }
            // Synthesized by the linker; the host calls _initialize once,
            // before any other export.
            unsafe { __wasm_call_ctors() }
        }
        install_panic_hook();
    }

    /// Logs a panic through the host before the instance traps: a panic
    /// aborts, as WebAssembly has no unwinding, and the trap alone would
    /// not say why.
    fn install_panic_hook() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                log(Level::Error, &format!("flowhost: the computation {info}"));
                default(info);
            }));
        });
    }

    /// `flowhost_alloc`: a region of at least `size` bytes for the next
    /// envelope; a zero size still gets a non-zero address. 0 for a
    /// negative size, or when the memory cannot grow that far (the host
    /// then reports the batch as failed, and the instance stays usable).
    pub fn alloc(size: i32) -> i32 {
        let size = match usize::try_from(size) {
            Ok(n) => n.max(1),
            Err(_) => return 0,
        };
        INSTANCE.with(|inst| {
            let input = &mut inst.borrow_mut().input;
            let cap = input.capacity();
            if cap < size || (cap > SHRINK_ABOVE && cap / 4 > size) {
                *input = Vec::new(); // give the old region back first
                if input.try_reserve_exact(size).is_err() {
                    log(Level::Error, &format!("flowhost: flowhost_alloc({size}): out of memory"));
                    return 0;
                }
            }
            input.resize(size, 0);
            input.as_ptr() as usize as i32
        })
    }

    /// `flowhost_init`.
    pub fn init(ptr: i32, len: i32, make: fn() -> Box<dyn Computation>) -> i64 {
        call("flowhost_init", ptr, len, make, |g, env| g.init(env).map(|r| r.map(pack).unwrap_or(0)))
    }

    /// `flowhost_process`.
    pub fn process(ptr: i32, len: i32, make: fn() -> Box<dyn Computation>) -> i64 {
        call("flowhost_process", ptr, len, make, |g, env| g.process(env).map(pack))
    }

    fn call(
        name: &str,
        ptr: i32,
        len: i32,
        make: fn() -> Box<dyn Computation>,
        f: impl FnOnce(&mut Guest, &[u8]) -> Result<i64, Status>,
    ) -> i64 {
        install_panic_hook();
        INSTANCE.with(|inst| {
            let inst = &mut *inst.borrow_mut();
            let region = usize::try_from(len).ok().filter(|&n| {
                !inst.input.is_empty() && ptr as u32 as usize == inst.input.as_ptr() as usize && n <= inst.input.len()
            });
            let n = match region {
                Some(n) => n,
                None => {
                    log(
                        Level::Error,
                        &format!("flowhost: {name}({}, {len}) names memory that flowhost_alloc did not hand out", ptr as u32),
                    );
                    return Status::BadRequest as i64;
                }
            };
            let guest = inst.guest.get_or_insert_with(|| Guest::new(make()));
            match f(guest, &inst.input[..n]) {
                Ok(r) => r,
                Err(status) => status as i64,
            }
        })
    }

    /// Packs a region of guest memory into flowhost_process's result:
    /// address in the high 32 bits, length in the low 32.
    fn pack(region: &[u8]) -> i64 {
        ((region.as_ptr() as usize as u64) << 32 | region.len() as u64) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Error};

    struct Echo;

    impl Computation for Echo {
        fn init(&mut self, params: &Params) -> Result<(), Error> {
            match params.get("refuse") {
                Some(v) => Err(Error::new(v.as_str().unwrap_or_default())),
                None => Ok(()),
            }
        }

        fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
            batch.for_each_key(|key| {
                for m in key.messages() {
                    key.emit("out", m.payload).parent(&m);
                }
                Ok(())
            })
        }
    }

    /// {"abi":1,"kind":"transform","partition":0,"computation":"c","output_streams":["out"]}
    const INIT: &[u8] = b"\xa5\x63abi\x01\x64kind\x69transform\x69partition\x00\x6bcomputation\x61c\x6eoutput_streams\x81\x63out";

    /// A request with one key "k" and one message with payload "hi".
    fn request(abi: u8, kind: &str) -> Vec<u8> {
        let mut r = vec![0xa7, 0x63];
        r.extend_from_slice(b"abi");
        r.push(abi);
        r.extend_from_slice(b"\x64keys\x81\xa2\x63key\x61k\x68messages\x81\xa6");
        r.extend_from_slice(b"\x62id\x61m\x66stream\x61s\x67payload\x42hi\x68event_ts\x01\x69system_ts\x02\x6calignment_ts\x03");
        r.push(0x64);
        r.extend_from_slice(b"kind");
        r.push(0x60 + kind.len() as u8);
        r.extend_from_slice(kind.as_bytes());
        r.extend_from_slice(b"\x65epoch\x07\x69partition\x00\x6awatermarks\xa2\x65event\x00\x66system\x00");
        r.extend_from_slice(b"\x6bcomputation\x61c");
        r
    }

    #[test]
    fn answers_a_request() {
        let mut g = Guest::new(Echo);
        assert_eq!(g.init(INIT), Ok(None));
        let out = g.process(&request(1, "transform")).unwrap().to_vec();
        let want = b"\xa1\x64keys\x81\xa2\x63key\x61k\x65emits\x81\xa3\x66stream\x63out\x67parents\x81\x00\x67payload\x42hi";
        assert_eq!(out, want.to_vec());
    }

    #[test]
    fn statuses() {
        let mut g = Guest::new(Echo);
        assert_eq!(g.process(&request(1, "transform")), Err(Status::GuestFailure), "process before init");
        assert_eq!(g.init(INIT), Ok(None));
        assert_eq!(g.process(&request(2, "transform")), Err(Status::UnsupportedVersion));
        assert_eq!(g.process(&request(1, "reduce")), Err(Status::BadRequest));
        assert_eq!(g.process(b"\xa0"), Err(Status::BadRequest));
        assert_eq!(g.process(b""), Err(Status::BadRequest));
        let mut trailing = request(1, "transform");
        trailing.push(0);
        assert_eq!(g.process(&trailing), Err(Status::BadRequest));
        let logged = crate::log::captured::take();
        assert!(logged.iter().all(|(l, _)| *l == Level::Error));
        assert!(logged.iter().any(|(_, m)| m.contains("speaks ABI version 2")), "{logged:?}");
        assert!(logged.iter().any(|(_, m)| m.contains("unknown kind \"reduce\"")), "{logged:?}");
    }

    #[test]
    fn init_refusal_is_an_init_result() {
        let mut init = INIT.to_vec();
        init[0] = 0xa6;
        init.extend_from_slice(b"\x6aparameters\xa1\x66refuse\x62no");
        let mut g = Guest::new(Echo);
        assert_eq!(g.init(&init), Ok(Some(&b"\xa1\x65error\x62no"[..])));
        assert_eq!(g.process(&request(1, "transform")), Err(Status::GuestFailure));
    }

    #[test]
    fn misuse_is_a_guest_failure_that_names_the_call() {
        struct Misuse;
        impl Computation for Misuse {
            fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
                batch.for_each_key(|key| {
                    key.emit("nope", "x");
                    Ok(())
                })
            }
        }
        let mut g = Guest::new(Misuse);
        g.init(INIT).unwrap();
        crate::log::captured::take();
        assert_eq!(g.process(&request(1, "transform")), Err(Status::GuestFailure));
        let logged = crate::log::captured::take();
        assert_eq!(logged.len(), 1);
        let msg = &logged[0].1;
        assert!(msg.starts_with("flowhost: emit to \"nope\", which is not a declared output stream (declared: out) (at src/guest.rs:"), "{msg}");
    }
}
