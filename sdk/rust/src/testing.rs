//! Native unit tests of a computation, with `cargo test` and without
//! WebAssembly: build a batch as the host would send it, pass it through
//! the computation with the same envelopes the host uses ([`Guest`]), and
//! read the response: what each key emitted, the state it left and the
//! timers it set or cancelled.
//!
//! ```
//! use flowhost::testing::{process, StateChange, TestBatch, TestInit};
//! use flowhost::{Batch, Computation, Error};
//!
//! struct Count;
//! impl Computation for Count {
//!     fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
//!         batch.for_each_key(|key| {
//!             let mut n: u64 = match key.state() {
//!                 Some(s) => std::str::from_utf8(s)?.parse()?,
//!                 None => 0,
//!             };
//!             for m in key.messages() {
//!                 n += 1;
//!                 key.emit("out", format!("{}={}", key.key(), n)).parent(&m);
//!             }
//!             key.set_state(n.to_string());
//!             Ok(())
//!         })
//!     }
//! }
//!
//! let batch = TestBatch::new().state("a", b"4").message("a", "in", 10, b"x").message("b", "in", 11, b"y");
//! let resp = process(Count, &TestInit::new(), &batch).unwrap();
//! assert_eq!(resp.emitted("out"), vec!["a=5", "b=1"]);
//! assert_eq!(resp.key("a").unwrap().state, StateChange::Replace(b"5".to_vec()));
//! ```
//!
//! The module exists only outside WebAssembly
//! (`cfg(not(target_arch = "wasm32"))`), so a guest's release build does
//! not carry it.

use std::collections::BTreeMap;
use std::fmt;

/// A CBOR value, for [`TestInit::param`].
pub use serde_cbor::Value;

use crate::{Computation, Guest, Status};

/// The watermark before the first one.
pub const NO_WATERMARK: i64 = i64::MIN;

struct KeyIn {
    key: String,
    state: Option<Vec<u8>>,
    timers: Vec<Value>,
    messages: Vec<Value>,
}

/// A request under construction: a transform batch of computation `test`,
/// partition 0, epoch 1, without a watermark, until told otherwise.
pub struct TestBatch {
    kind: String,
    epoch: u64,
    watermarks: (i64, i64),
    keys: Vec<KeyIn>,
    seq: u64,
}

impl Default for TestBatch {
    fn default() -> Self {
        TestBatch::new()
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (text(k), v)).collect())
}

impl TestBatch {
    /// An empty transform batch.
    pub fn new() -> Self {
        TestBatch { kind: "transform".to_string(), epoch: 1, watermarks: (NO_WATERMARK, NO_WATERMARK), keys: Vec::new(), seq: 0 }
    }

    /// Sets the kind: `"transform"` or `"map"`.
    pub fn kind(mut self, kind: &str) -> Self {
        self.kind = kind.to_string();
        self
    }

    /// Sets the epoch.
    pub fn epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// Sets the event and system watermarks (nanoseconds since the Unix
    /// epoch).
    pub fn watermarks(mut self, event: i64, system: i64) -> Self {
        self.watermarks = (event, system);
        self
    }

    fn key(&mut self, key: &str) -> &mut KeyIn {
        let i = match self.keys.iter().position(|k| k.key == key) {
            Some(i) => i,
            None => {
                self.keys.push(KeyIn { key: key.to_string(), state: None, timers: Vec::new(), messages: Vec::new() });
                self.keys.len() - 1
            }
        };
        &mut self.keys[i]
    }

    /// Gives `key` the state the host holds for it.
    pub fn state(mut self, key: &str, state: &[u8]) -> Self {
        self.key(key).state = Some(state.to_vec());
        self
    }

    /// Adds a message of `stream` to `key`, its event time as every
    /// timestamp; ids are given in order (`m1`, `m2`, ...).
    pub fn message(mut self, key: &str, stream: &str, event_ts: i64, payload: &[u8]) -> Self {
        self.seq += 1;
        let id = format!("m{}", self.seq);
        let m = map(vec![
            ("id", text(&id)),
            ("stream", text(stream)),
            ("event_ts", Value::Integer(event_ts.into())),
            ("system_ts", Value::Integer(event_ts.into())),
            ("alignment_ts", Value::Integer(event_ts.into())),
            ("payload", Value::Bytes(payload.to_vec())),
        ]);
        self.key(key).messages.push(m);
        self
    }

    /// Adds a due timer of `key` (delivered before its messages).
    pub fn timer(mut self, key: &str, trigger_ts: i64, payload: &[u8]) -> Self {
        self.seq += 1;
        let id = format!("t{}", self.seq);
        let mut entries = vec![
            ("id", text(&id)),
            ("trigger_ts", Value::Integer(trigger_ts.into())),
            ("event_ts", Value::Integer(trigger_ts.into())),
        ];
        if !payload.is_empty() {
            entries.push(("payload", Value::Bytes(payload.to_vec())));
        }
        self.key(key).timers.push(map(entries));
        self
    }

    /// The request envelope, as the host encodes it.
    pub fn encode(&self) -> Vec<u8> {
        let keys = self
            .keys
            .iter()
            .map(|k| {
                let mut entries = vec![("key", text(&k.key))];
                if let Some(s) = &k.state {
                    entries.push(("state", Value::Bytes(s.clone())));
                }
                if !k.timers.is_empty() {
                    entries.push(("timers", Value::Array(k.timers.clone())));
                }
                if !k.messages.is_empty() {
                    entries.push(("messages", Value::Array(k.messages.clone())));
                }
                map(entries)
            })
            .collect();
        let req = map(vec![
            ("abi", Value::Integer(1)),
            ("computation", text("test")),
            ("kind", text(&self.kind)),
            ("partition", Value::Integer(0)),
            ("epoch", Value::Integer(self.epoch.into())),
            (
                "watermarks",
                map(vec![
                    ("event", Value::Integer(self.watermarks.0.into())),
                    ("system", Value::Integer(self.watermarks.1.into())),
                ]),
            ),
            ("keys", Value::Array(keys)),
        ]);
        serde_cbor::to_vec(&req).expect("a CBOR value always encodes")
    }
}

/// The start of an instance: its parameters and declared output streams
/// (`out` when none is declared).
#[derive(Default)]
pub struct TestInit {
    params: BTreeMap<String, Value>,
    outputs: Vec<String>,
}

impl TestInit {
    /// No parameters, output stream `out`.
    pub fn new() -> Self {
        TestInit::default()
    }

    /// Sets a parameter, as the pipeline spec's `parameters` would.
    pub fn param(mut self, name: &str, value: Value) -> Self {
        self.params.insert(name.to_string(), value);
        self
    }

    /// Declares an output stream.
    pub fn output(mut self, stream: &str) -> Self {
        self.outputs.push(stream.to_string());
        self
    }

    fn encode(&self, kind: &str) -> Vec<u8> {
        let outputs = if self.outputs.is_empty() { vec!["out".to_string()] } else { self.outputs.clone() };
        let mut entries = vec![
            ("abi", Value::Integer(1)),
            ("computation", text("test")),
            ("kind", text(kind)),
            ("partition", Value::Integer(0)),
            ("output_streams", Value::Array(outputs.iter().map(|s| text(s)).collect())),
        ];
        if !self.params.is_empty() {
            entries.push(("parameters", Value::Map(self.params.iter().map(|(k, v)| (text(k), v.clone())).collect())));
        }
        serde_cbor::to_vec(&map(entries)).expect("a CBOR value always encodes")
    }
}

/// Why [`process`] has no response.
#[derive(Debug, Clone, PartialEq)]
pub enum TestError {
    /// The computation's `init` refused to start, with its message.
    InitRefused(String),
    /// The guest answered a failure status (it logged why).
    Status(Status),
    /// The response did not decode as the host would decode it.
    BadResponse(String),
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestError::InitRefused(m) => write!(f, "init refused to start: {}", m),
            TestError::Status(s) => write!(f, "the guest answered status {:?}", s),
            TestError::BadResponse(m) => write!(f, "bad response: {}", m),
        }
    }
}

impl std::error::Error for TestError {}

/// What a key's response does to its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChange {
    /// The state stays as it was.
    Keep,
    /// The state becomes these bytes.
    Replace(Vec<u8>),
    /// The state is deleted.
    Delete,
}

/// One emitted message.
#[derive(Debug, Clone, PartialEq)]
pub struct TestEmit {
    pub stream: String,
    /// "" for none.
    pub key: String,
    pub payload: Vec<u8>,
    /// `None`: the host derives it from the parents.
    pub event_ts: Option<i64>,
    /// `None`: every input of the key.
    pub parents: Option<Vec<u32>>,
}

/// One timer set.
#[derive(Debug, Clone, PartialEq)]
pub struct TestTimer {
    pub trigger_ts: i64,
    pub event_ts: Option<i64>,
    pub payload: Vec<u8>,
}

/// The response for one key.
#[derive(Debug, Clone, PartialEq)]
pub struct TestKey {
    pub key: String,
    pub emits: Vec<TestEmit>,
    /// Set when the key failed.
    pub error: Option<String>,
    pub state: StateChange,
    pub timers_set: Vec<TestTimer>,
    pub timers_cancel: Vec<i64>,
}

/// The response to one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct TestResponse {
    pub keys: Vec<TestKey>,
    /// Set when the whole batch failed.
    pub error: Option<String>,
}

impl TestResponse {
    /// The response for `key`, if the computation said anything of it.
    pub fn key(&self, key: &str) -> Option<&TestKey> {
        self.keys.iter().find(|k| k.key == key)
    }

    /// The payloads emitted to `stream`, over every key in response order,
    /// as text (invalid UTF-8 replaced).
    pub fn emitted(&self, stream: &str) -> Vec<String> {
        self.keys
            .iter()
            .flat_map(|k| k.emits.iter())
            .filter(|e| e.stream == stream)
            .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
            .collect()
    }
}

/// Starts `computation` with `init` and passes `batch` through it, envelopes
/// and all, as the host does.
pub fn process<C: Computation + 'static>(computation: C, init: &TestInit, batch: &TestBatch) -> Result<TestResponse, TestError> {
    let mut guest = Guest::new(computation);
    match guest.init(&init.encode(&batch.kind)) {
        Ok(None) => {}
        Ok(Some(result)) => {
            let v: Value = serde_cbor::from_slice(result).map_err(|e| TestError::BadResponse(e.to_string()))?;
            return Err(TestError::InitRefused(field_text(&v, "error").unwrap_or_default()));
        }
        Err(s) => return Err(TestError::Status(s)),
    }
    let out = guest.process(&batch.encode()).map_err(TestError::Status)?;
    decode_response(out).map_err(TestError::BadResponse)
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Map(m) => m.get(&text(name)),
        _ => None,
    }
}

fn field_text(v: &Value, name: &str) -> Option<String> {
    match field(v, name) {
        Some(Value::Text(s)) => Some(s.clone()),
        _ => None,
    }
}

fn field_int(v: &Value, name: &str) -> Result<Option<i64>, String> {
    match field(v, name) {
        None => Ok(None),
        Some(Value::Integer(i)) => i64::try_from(*i).map(Some).map_err(|_| format!("{}: {} is out of range", name, i)),
        Some(other) => Err(format!("{}: not an integer: {:?}", name, other)),
    }
}

fn field_bytes(v: &Value, name: &str) -> Result<Option<Vec<u8>>, String> {
    match field(v, name) {
        None => Ok(None),
        Some(Value::Bytes(b)) => Ok(Some(b.clone())),
        Some(other) => Err(format!("{}: not a byte string: {:?}", name, other)),
    }
}

fn field_array<'a>(v: &'a Value, name: &str) -> Result<&'a [Value], String> {
    match field(v, name) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!("{}: not an array: {:?}", name, other)),
    }
}

fn decode_response(data: &[u8]) -> Result<TestResponse, String> {
    let v: Value = serde_cbor::from_slice(data).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    for k in field_array(&v, "keys")? {
        let mut emits = Vec::new();
        for e in field_array(k, "emits")? {
            let parents = match field(e, "parents") {
                None => None,
                Some(Value::Array(a)) => Some(
                    a.iter()
                        .map(|p| match p {
                            Value::Integer(i) => u32::try_from(*i).map_err(|_| format!("parent {} is out of range", i)),
                            other => Err(format!("parent: not an integer: {:?}", other)),
                        })
                        .collect::<Result<Vec<u32>, String>>()?,
                ),
                Some(other) => return Err(format!("parents: not an array: {:?}", other)),
            };
            emits.push(TestEmit {
                stream: field_text(e, "stream").ok_or("emit without a stream")?,
                key: field_text(e, "key").unwrap_or_default(),
                payload: field_bytes(e, "payload")?.ok_or("emit without a payload")?,
                event_ts: field_int(e, "event_ts")?,
                parents,
            });
        }
        let mut timers_set = Vec::new();
        for t in field_array(k, "timers_set")? {
            timers_set.push(TestTimer {
                trigger_ts: field_int(t, "trigger_ts")?.ok_or("timer without trigger_ts")?,
                event_ts: field_int(t, "event_ts")?,
                payload: field_bytes(t, "payload")?.unwrap_or_default(),
            });
        }
        let mut timers_cancel = Vec::new();
        for c in field_array(k, "timers_cancel")? {
            match c {
                Value::Integer(i) => timers_cancel.push(i64::try_from(*i).map_err(|_| format!("timers_cancel {} is out of range", i))?),
                other => return Err(format!("timers_cancel: not an integer: {:?}", other)),
            }
        }
        let state = match field_int(k, "state_op")?.unwrap_or(0) {
            0 => StateChange::Keep,
            1 => StateChange::Replace(field_bytes(k, "state")?.unwrap_or_default()),
            2 => StateChange::Delete,
            op => return Err(format!("state_op {} is unknown", op)),
        };
        keys.push(TestKey {
            key: field_text(k, "key").ok_or("response key without a key")?,
            emits,
            error: field_text(k, "error"),
            state,
            timers_set,
            timers_cancel,
        });
    }
    Ok(TestResponse { keys, error: field_text(&v, "error") })
}
