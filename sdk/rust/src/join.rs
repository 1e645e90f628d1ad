//! The interval join and the enrichment join: ports of the Go SDK's
//! `IntervalJoin` and `EnrichJoin` whose emits, timers, state bytes and
//! error texts are the Go helpers', byte for byte (sdk/JOINS.md).
//!
//! ```
//! use flowhost::{Batch, Computation, EnrichJoin, Error, IntervalJoin, JoinPair};
//!
//! const MINUTE: i64 = 60_000_000_000;
//!
//! struct OrderPayments(IntervalJoin);
//!
//! impl Computation for OrderPayments {
//!     fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
//!         let j = &self.0;
//!         batch.for_each_key(|k| j.process(k))
//!     }
//! }
//!
//! // |ts_order - ts_payment| <= 30 min; bounds are i64 nanoseconds.
//! let j = IntervalJoin::new("orders", "payments", -30 * MINUTE, 30 * MINUTE,
//!     |p: &JoinPair| [&p.left.payload[..], b",", &p.right.payload].concat(), "joined", "unmatched")
//!     .with_expired(|r| r.payload.clone()); // optional
//! let _ = OrderPayments(j);
//!
//! let _e = EnrichJoin::new("customers", "orders",
//!     |event, value| [event.payload, b"+", &value.payload].concat(), "enriched", "no-customer");
//! ```

use crate::params::go_quote;
use crate::{Error, Key, Message};

/// The prefix of every error a key fails with when its state is not the
/// encoding the join helpers write; the rest names the field and its byte
/// offset. It is the Go SDK's `ErrJoinState` text.
pub const JOIN_STATE_ERROR: &str = "flowhost: the key's state is not a join state";

const VERSION: u8 = 1;
const KIND_INTERVAL: u8 = b'I';
const KIND_ENRICH: u8 = b'E';

/// One side of a join: a message as delivered, or as kept in the key's
/// state from an earlier call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRecord {
    /// The message's message_id, kept so that a payload can name a side
    /// that is no longer an input (sdk/JOINS.md, "Parents").
    pub id: String,
    /// The stream the record was read from (for a record from state, the
    /// join's stream of its side).
    pub stream: String,
    /// The message's event time, ns since the Unix epoch.
    pub event_ts: i64,
    /// The message body.
    pub payload: Vec<u8>,
    /// The record's index among the key's inputs when it is an input of
    /// this call; None when it came from state.
    pub input: Option<usize>,
}

impl JoinRecord {
    fn from_message(m: &Message<'_>) -> JoinRecord {
        JoinRecord {
            id: m.id.to_string(),
            stream: m.stream.to_string(),
            event_ts: m.event_ts,
            payload: m.payload.to_vec(),
            input: Some(m.input),
        }
    }
}

/// A match of an interval join.
#[derive(Clone, Copy, Debug)]
pub struct JoinPair<'a> {
    /// The key's canonical text.
    pub key: &'a str,
    /// The record of the left stream.
    pub left: &'a JoinRecord,
    /// The record of the right stream.
    pub right: &'a JoinRecord,
}

/// Reads the join state encodings, naming the field and its byte offset on
/// failure, with the Go SDK's words.
struct StateReader<'a> {
    b: &'a [u8],
    off: usize,
    err: Option<String>,
}

/// Go's binary.Uvarint: (value, bytes read), 0 bytes when the buffer ends
/// first, negative on overflow.
fn uvarint(buf: &[u8]) -> (u64, isize) {
    let (mut x, mut s) = (0u64, 0u32);
    for (i, &b) in buf.iter().enumerate() {
        if i == 10 {
            return (0, -(i as isize + 1));
        }
        if b < 0x80 {
            if i == 9 && b > 1 {
                return (0, -(i as isize + 1));
            }
            return (x | (b as u64) << s, i as isize + 1);
        }
        x |= ((b & 0x7f) as u64) << s;
        s += 7;
    }
    (0, 0)
}

fn put_uvarint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn put_varint(out: &mut Vec<u8>, x: i64) {
    let ux = ((x as u64) << 1) ^ ((x >> 63) as u64);
    put_uvarint(out, ux);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvarint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A byte as Go's `%q` prints it (strconv.QuoteRune of the byte's code
/// point), so error texts match the Go helper's.
fn go_quote_byte(b: u8) -> String {
    match b {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        _ => {
            let s = go_quote(&(b as char).to_string());
            format!("'{}'", &s[1..s.len() - 1])
        }
    }
}

impl<'a> StateReader<'a> {
    fn new(b: &'a [u8]) -> Self {
        StateReader { b, off: 0, err: None }
    }

    fn fail(&mut self, field: &str) {
        if self.err.is_none() {
            self.err = Some(format!("{}: {} at byte {}", JOIN_STATE_ERROR, field, self.off));
        }
    }

    fn byte(&mut self, field: &str) -> u8 {
        if self.err.is_some() {
            return 0;
        }
        if self.off >= self.b.len() {
            self.fail(&format!("missing {}", field));
            return 0;
        }
        self.off += 1;
        self.b[self.off - 1]
    }

    fn uvarint(&mut self, field: &str) -> u64 {
        if self.err.is_some() {
            return 0;
        }
        let (v, n) = uvarint(&self.b[self.off..]);
        if n <= 0 {
            self.fail(&format!("bad {}", field));
            return 0;
        }
        self.off += n as usize;
        v
    }

    fn varint(&mut self, field: &str) -> i64 {
        let ux = self.uvarint(field);
        let x = (ux >> 1) as i64;
        if ux & 1 != 0 {
            !x
        } else {
            x
        }
    }

    fn bytes(&mut self, field: &str) -> Vec<u8> {
        let start = self.off;
        let size = self.uvarint(&format!("{} length", field));
        if self.err.is_some() {
            return Vec::new();
        }
        if size > (self.b.len() - self.off) as u64 {
            self.off = start; // name the length, not what follows it
            self.fail(&format!("{} length past the end", field));
            return Vec::new();
        }
        let v = self.b[self.off..self.off + size as usize].to_vec();
        self.off += size as usize;
        v
    }

    /// A message_id: Go keeps any bytes, but a Rust `String` is UTF-8, so
    /// an id that is not is refused rather than altered.
    fn id(&mut self) -> String {
        let start = self.off;
        let b = self.bytes("message_id");
        match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => {
                self.off = start;
                self.fail("message_id not UTF-8");
                String::new()
            }
        }
    }

    fn header(&mut self, kind: u8) {
        let v = self.byte("version");
        if self.err.is_none() && v != VERSION {
            self.off -= 1;
            self.fail(&format!("unknown version {}", v));
        }
        let k = self.byte("kind");
        if self.err.is_none() && k != kind {
            self.off -= 1;
            self.fail(&format!("kind {}, want {}", go_quote_byte(k), go_quote_byte(kind)));
        }
    }

    fn end(&mut self) {
        if self.err.is_none() && self.off != self.b.len() {
            self.fail("trailing bytes");
        }
    }

    fn result<T>(mut self, v: T) -> Result<T, Error> {
        self.end();
        match self.err {
            Some(e) => Err(Error::new(e)),
            None => Ok(v),
        }
    }
}

/// One record waiting in an interval join's state.
#[derive(Clone, Debug)]
struct Held {
    right: bool,
    matched: bool,
    rec: JoinRecord,
}

fn decode_interval_state(b: &[u8], left: &str, right: &str) -> Result<Vec<Held>, Error> {
    let mut r = StateReader::new(b);
    r.header(KIND_INTERVAL);
    let n = r.uvarint("record count");
    if r.err.is_none() && n > b.len() as u64 {
        r.fail("record count larger than the state");
    }
    let mut held = Vec::new();
    let mut i = 0u64;
    while r.err.is_none() && i < n {
        let mut h = Held {
            right: false,
            matched: false,
            rec: JoinRecord { id: String::new(), stream: String::new(), event_ts: 0, payload: Vec::new(), input: None },
        };
        let s = r.byte("side");
        if r.err.is_none() {
            if s > 1 {
                r.off -= 1;
                r.fail(&format!("record {}: side {}, want 0 or 1", i, s));
            } else {
                h.right = s == 1;
            }
        }
        let m = r.byte("matched");
        if r.err.is_none() {
            if m > 1 {
                r.off -= 1;
                r.fail(&format!("record {}: matched {}, want 0 or 1", i, m));
            } else {
                h.matched = m == 1;
            }
        }
        h.rec.event_ts = r.varint("ts");
        h.rec.id = r.id();
        h.rec.payload = r.bytes("payload");
        h.rec.stream = if h.right { right } else { left }.to_string();
        held.push(h);
        i += 1;
    }
    r.result(held)
}

fn encode_interval_state(held: &[Held]) -> Vec<u8> {
    let mut out = vec![VERSION, KIND_INTERVAL];
    put_uvarint(&mut out, held.len() as u64);
    for h in held {
        out.push(h.right as u8);
        out.push(h.matched as u8);
        put_varint(&mut out, h.rec.event_ts);
        put_bytes(&mut out, h.rec.id.as_bytes());
        put_bytes(&mut out, &h.rec.payload);
    }
    out
}

/// a+b+1 clamped to i64 (the expiry trigger of a record at a whose last
/// possible match is at a+b), so times near the ends of i64 do not wrap
/// around into the past.
fn sat_add(a: i64, b: i64) -> i64 {
    match a.checked_add(b) {
        None if b > 0 => i64::MAX,
        None => i64::MIN,
        Some(i64::MAX) => i64::MAX,
        Some(s) => s + 1,
    }
}

type JoinFn = Box<dyn Fn(&JoinPair<'_>) -> Vec<u8>>;
type ExpiredFn = Box<dyn Fn(&JoinRecord) -> Vec<u8>>;

/// Joins two streams per key: a left record at ts_l and a right record at
/// ts_r match when `lower <= ts_r - ts_l <= upper` (ns). It owns the key's
/// state and timers: a computation that uses it keeps nothing else in them.
///
/// Every match is emitted on the output stream, event time the later of
/// the two; every record that never matched is emitted on the expired
/// stream when its expiry timer fires, so nothing is dropped. Results
/// depend only on the key's inputs in merge order, not on batch limits;
/// emits, timers, state bytes and error texts are the Go SDK's
/// `IntervalJoin`'s (sdk/JOINS.md).
pub struct IntervalJoin {
    left: String,
    right: String,
    lower: i64,
    upper: i64,
    join: JoinFn,
    output: String,
    expired: String,
    on_expired: Option<ExpiredFn>,
}

impl IntervalJoin {
    /// A join of the streams `left` and `right` with
    /// `lower <= ts_right - ts_left <= upper` (ns), whose matches `join`
    /// builds and emits on `output` and whose unmatched records go to
    /// `expired`. It panics when `lower > upper`, `lower` is `i64::MIN`, a
    /// stream name is empty or `left` equals `right`.
    pub fn new<F>(left: &str, right: &str, lower: i64, upper: i64, join: F, output: &str, expired: &str) -> Self
    where
        F: Fn(&JoinPair<'_>) -> Vec<u8> + 'static,
    {
        if lower > upper {
            panic!("flowhost: IntervalJoin::new needs lower <= upper");
        }
        if lower == i64::MIN {
            panic!("flowhost: IntervalJoin::new needs lower > i64::MIN"); // -lower must exist for a right record's expiry
        }
        if left.is_empty() || right.is_empty() || output.is_empty() || expired.is_empty() {
            panic!("flowhost: IntervalJoin::new needs left, right, output and expired streams");
        }
        if left == right {
            panic!("flowhost: IntervalJoin::new needs two different input streams");
        }
        IntervalJoin {
            left: left.to_string(),
            right: right.to_string(),
            lower,
            upper,
            join: Box::new(join),
            output: output.to_string(),
            expired: expired.to_string(),
            on_expired: None,
        }
    }

    /// Makes `f` build the payload of an expired record instead of its own
    /// payload.
    pub fn with_expired<F>(mut self, f: F) -> Self
    where
        F: Fn(&JoinRecord) -> Vec<u8> + 'static,
    {
        self.on_expired = Some(Box::new(f));
        self
    }

    /// The trigger after which no on-time record can match h.
    fn expiry(&self, h: &Held) -> i64 {
        if h.right {
            sat_add(h.rec.event_ts, -self.lower)
        } else {
            sat_add(h.rec.event_ts, self.upper)
        }
    }

    /// lower <= tr - tl <= upper; a difference that overflows i64 is
    /// outside any range.
    fn in_range(&self, tl: i64, tr: i64) -> bool {
        match tr.checked_sub(tl) {
            Some(d) => self.lower <= d && d <= self.upper,
            None => false,
        }
    }

    /// Handles one key of a batch: it expires the held records whose timers
    /// fired, matches the key's messages and holds them, and saves the
    /// key's state and timers. On a bad state or a message of neither
    /// stream it fails the key (its inputs go to dead letters) and returns
    /// the error.
    pub fn process(&self, key: &mut Key<'_>) -> Result<(), Error> {
        let result = match key.state() {
            None => Ok(Vec::new()),
            Some(b) => decode_interval_state(b, &self.left, &self.right),
        }
        .and_then(|held| self.process_held(key, held));
        if let Err(e) = &result {
            key.fail(e.clone());
        }
        result
    }

    fn process_held(&self, key: &mut Key<'_>, mut held: Vec<Held>) -> Result<(), Error> {
        let mut changed = false;
        for t in key.timers() {
            let mut kept = Vec::with_capacity(held.len());
            for h in held {
                if self.expiry(&h) > t.trigger_ts {
                    kept.push(h);
                    continue;
                }
                changed = true;
                if !h.matched {
                    let payload = match &self.on_expired {
                        Some(f) => f(&h.rec),
                        None => h.rec.payload,
                    };
                    key.emit(&self.expired, payload).event_ts(h.rec.event_ts).parent(&t);
                }
            }
            held = kept;
        }
        // touched are the expiry triggers whose hold this call changed;
        // reset those of them that have a timer from an earlier call.
        let (mut touched, mut reset) = (Vec::new(), Vec::new());
        for m in key.messages() {
            let right = if m.stream == self.left {
                false
            } else if m.stream == self.right {
                true
            } else {
                return Err(Error::new(format!(
                    "message {}: stream {} is neither the left stream {} nor the right stream {} of the join",
                    m.id,
                    go_quote(m.stream),
                    go_quote(&self.left),
                    go_quote(&self.right)
                )));
            };
            let mut n = Held { right, matched: false, rec: JoinRecord::from_message(&m) };
            for i in 0..held.len() {
                if held[i].right == right {
                    continue;
                }
                let (l, r) = if right { (&held[i].rec, &n.rec) } else { (&n.rec, &held[i].rec) };
                if !self.in_range(l.event_ts, r.event_ts) {
                    continue;
                }
                let payload = (self.join)(&JoinPair { key: key.key(), left: l, right: r });
                let event_ts = l.event_ts.max(r.event_ts);
                let h = &mut held[i];
                if !h.matched {
                    let e = self.expiry(h);
                    touched.push(e);
                    if h.rec.input.is_none() {
                        reset.push(e); // its pending timer still holds h's time
                    }
                }
                h.matched = true;
                n.matched = true;
                let mut parents = vec![m.input];
                if let Some(p) = h.rec.input {
                    parents.push(p);
                    parents.sort_unstable();
                }
                key.emit(&self.output, payload).parents(parents).event_ts(event_ts);
            }
            touched.push(self.expiry(&n));
            held.push(n);
            changed = true;
        }
        self.set_timers(key, &held, touched, &reset);
        if changed {
            if held.is_empty() {
                if key.state().is_some() {
                    key.delete_state();
                }
            } else {
                key.set_state(encode_interval_state(&held));
            }
        }
        Ok(())
    }

    /// Sets the timer of each touched trigger with the event time it must
    /// hold the output watermark at: the oldest held unmatched record of
    /// that expiry, which may still come out expired at its own time. A
    /// timer from an earlier call is cancelled first, since the host keeps
    /// the smallest event time of one trigger; set again at the same
    /// trigger it fires at the same position (sdk/JOINS.md).
    fn set_timers(&self, key: &mut Key<'_>, held: &[Held], mut touched: Vec<i64>, reset: &[i64]) {
        touched.sort_unstable();
        touched.dedup();
        for trigger in touched {
            if reset.contains(&trigger) {
                key.cancel_timer(trigger);
            }
            let hold = held.iter().filter(|h| !h.matched && self.expiry(h) == trigger).map(|h| h.rec.event_ts).min();
            match hold {
                Some(ts) => {
                    key.set_timer(trigger).event_ts(ts);
                }
                None => {
                    key.set_timer(trigger); // event_ts = trigger: in the future, it holds nothing back
                }
            }
        }
    }
}

type EnrichFn = Box<dyn Fn(&Message<'_>, &JoinRecord) -> Vec<u8>>;

/// Enriches the events of one stream with the latest value of a table
/// stream of the same key, in merge order. A table record with an empty
/// payload is a tombstone that deletes the value. An event with no value
/// goes unchanged to the unmatched stream: it is never dropped, and it does
/// not wait for a value. It owns the key's state and sets no timers; emits,
/// state bytes and error texts are the Go SDK's `EnrichJoin`'s
/// (sdk/JOINS.md).
pub struct EnrichJoin {
    table: String,
    events: String,
    enrich: EnrichFn,
    output: String,
    unmatched: String,
}

fn decode_enrich_state(b: &[u8], table: &str) -> Result<JoinRecord, Error> {
    let mut r = StateReader::new(b);
    r.header(KIND_ENRICH);
    let event_ts = r.varint("ts");
    let id = r.id();
    let start = r.off;
    let payload = r.bytes("payload");
    if r.err.is_none() && payload.is_empty() {
        r.off = start;
        r.fail("empty payload (a tombstone is no state)");
    }
    r.result(JoinRecord { id, stream: table.to_string(), event_ts, payload, input: None })
}

fn encode_enrich_state(v: &JoinRecord) -> Vec<u8> {
    let mut out = vec![VERSION, KIND_ENRICH];
    put_varint(&mut out, v.event_ts);
    put_bytes(&mut out, v.id.as_bytes());
    put_bytes(&mut out, &v.payload);
    out
}

impl EnrichJoin {
    /// An enrichment of `events` by `table`, whose results `enrich` builds
    /// and emits on `output` and whose events without a value go to
    /// `unmatched`. It panics when a stream name is empty or `table` equals
    /// `events`.
    pub fn new<F>(table: &str, events: &str, enrich: F, output: &str, unmatched: &str) -> Self
    where
        F: Fn(&Message<'_>, &JoinRecord) -> Vec<u8> + 'static,
    {
        if table.is_empty() || events.is_empty() || output.is_empty() || unmatched.is_empty() {
            panic!("flowhost: EnrichJoin::new needs table, events, output and unmatched streams");
        }
        if table == events {
            panic!("flowhost: EnrichJoin::new needs two different input streams");
        }
        EnrichJoin {
            table: table.to_string(),
            events: events.to_string(),
            enrich: Box::new(enrich),
            output: output.to_string(),
            unmatched: unmatched.to_string(),
        }
    }

    /// Handles one key of a batch in delivery order: table messages set or
    /// delete the value, events are enriched or sent to unmatched. On a bad
    /// state or a message of neither stream it fails the key and returns
    /// the error.
    pub fn process(&self, key: &mut Key<'_>) -> Result<(), Error> {
        let result = match key.state() {
            None => Ok(None),
            Some(b) => decode_enrich_state(b, &self.table).map(Some),
        }
        .and_then(|v| self.process_value(key, v));
        if let Err(e) = &result {
            key.fail(e.clone());
        }
        result
    }

    fn process_value(&self, key: &mut Key<'_>, mut v: Option<JoinRecord>) -> Result<(), Error> {
        let mut changed = false;
        for m in key.messages() {
            if m.stream == self.table {
                changed = true;
                v = if m.payload.is_empty() { None } else { Some(JoinRecord::from_message(&m)) };
            } else if m.stream == self.events {
                match &v {
                    None => {
                        key.emit(&self.unmatched, m.payload).parent(&m);
                    }
                    Some(value) => {
                        let payload = (self.enrich)(&m, value);
                        let parents = match value.input {
                            Some(p) => vec![p, m.input],
                            None => vec![m.input],
                        };
                        key.emit(&self.output, payload).parents(parents).event_ts(m.event_ts);
                    }
                }
            } else {
                return Err(Error::new(format!(
                    "message {}: stream {} is neither the table stream {} nor the events stream {} of the join",
                    m.id,
                    go_quote(m.stream),
                    go_quote(&self.table),
                    go_quote(&self.events)
                )));
            }
        }
        if changed {
            match &v {
                None => {
                    if key.state().is_some() {
                        key.delete_state();
                    }
                }
                Some(value) => key.set_state(encode_enrich_state(value)),
            }
        }
        Ok(())
    }
}
