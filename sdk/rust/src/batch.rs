use std::fmt;
use std::panic::Location;

use crate::envelope::{DueTimer, EmitOut, Emits, MessageIn, Parents, Payload, Request, RequestKey, Response, ResponseKey, TimerOut};
use crate::params::go_quote;
use crate::Error;

/// A computation's kind (ABI.md section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// May keep state and timers; outputs are timestamped when the host
    /// accepts the response.
    Transform,
    /// A deterministic per-message function: no state, no timers; outputs
    /// inherit their parents' timestamps.
    Map,
}

impl Kind {
    /// The kind's name in the pipeline spec and on the wire: `"transform"`
    /// or `"map"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Transform => "transform",
            Kind::Map => "map",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Kind> {
        match s {
            "transform" => Some(Kind::Transform),
            "map" => Some(Kind::Map),
            _ => None,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A partition's input watermarks, in nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Watermarks {
    /// The EventWatermark: inputs with a smaller EventTimestamp are no
    /// longer expected (a heuristic).
    pub event: i64,
    /// The SystemWatermark: exact for internal streams.
    pub system: i64,
}

/// What the host says about a batch as a whole. [`Batch`] and every
/// [`Key`] of it give access to it.
#[derive(Clone, Debug)]
pub struct BatchInfo<'a> {
    computation: &'a str,
    kind: Kind,
    partition: u64,
    epoch: u64,
    watermarks: Watermarks,
    outputs: &'a [String],
    request: Envelope<'a>,
}

/// The request envelope a batch was decoded from: a payload emitted as it
/// came is encoded from it rather than copied.
#[derive(Clone, Copy)]
struct Envelope<'a>(&'a [u8]);

impl fmt::Debug for Envelope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

impl Envelope<'_> {
    /// The payload of an emit: the place of its bytes when they are the
    /// envelope's (a pointer comparison, no unsafe code), its own bytes
    /// otherwise.
    fn payload(&self, p: impl IntoBytes) -> Payload {
        if let Some(b) = p.borrowed() {
            let (base, at) = (self.0.as_ptr() as usize, b.as_ptr() as usize);
            if at >= base && at + b.len() <= base + self.0.len() {
                return Payload::Request(at - base..at - base + b.len());
            }
        }
        Payload::Owned(p.into_bytes())
    }
}

impl<'a> BatchInfo<'a> {
    /// The computation's name in the pipeline spec.
    pub fn computation(&self) -> &'a str {
        self.computation
    }

    /// The computation's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The computation partition the batch belongs to.
    pub fn partition(&self) -> u64 {
        self.partition
    }

    /// The epoch the batch's effects commit in. A retried batch keeps its
    /// epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The partition's input watermarks when the batch was cut.
    pub fn watermarks(&self) -> Watermarks {
        self.watermarks
    }

    /// The computation's declared output streams.
    pub fn output_streams(&self) -> &'a [String] {
        self.outputs
    }
}

/// One call of the computation: the inputs of several keys of one
/// partition, and the effects the computation produces for them. It lives
/// only during [`Computation::process`](crate::Computation::process).
pub struct Batch<'a> {
    info: BatchInfo<'a>,
    inputs: &'a [RequestKey<'a>],
    outs: Vec<KeyOut>,
    error: Option<Error>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(req: &'a Request<'a>, envelope: &'a [u8], kind: Kind, outputs: &'a [String]) -> Self {
        Batch {
            info: BatchInfo {
                computation: req.computation.0,
                kind,
                partition: req.partition,
                epoch: req.epoch,
                watermarks: Watermarks { event: req.watermarks.event, system: req.watermarks.system },
                outputs,
                request: Envelope(envelope),
            },
            inputs: &req.keys,
            outs: req.keys.iter().map(|_| KeyOut::default()).collect(),
            error: None,
        }
    }

    /// What the host says about the batch.
    pub fn info(&self) -> &BatchInfo<'a> {
        &self.info
    }

    /// The computation's name in the pipeline spec.
    pub fn computation(&self) -> &'a str {
        self.info.computation
    }

    /// The computation's kind.
    pub fn kind(&self) -> Kind {
        self.info.kind
    }

    /// The computation partition the batch belongs to.
    pub fn partition(&self) -> u64 {
        self.info.partition
    }

    /// The epoch the batch's effects commit in.
    pub fn epoch(&self) -> u64 {
        self.info.epoch
    }

    /// The partition's input watermarks when the batch was cut.
    pub fn watermarks(&self) -> Watermarks {
        self.info.watermarks
    }

    /// The number of keys in the batch.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Whether the batch has no keys.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Iterates over the batch's keys in the host's order. Every key has at
    /// least one due timer or message.
    pub fn keys(&mut self) -> Keys<'_> {
        Keys { inputs: self.inputs.iter(), outs: self.outs.iter_mut(), info: &self.info }
    }

    /// Runs `f` for every key in order. An `Err` fails that key alone (as
    /// [`Key::fail`]) and the next key follows, except an error made by
    /// [`Error::batch`], which stops the loop and is returned, so that `?`
    /// fails the batch.
    pub fn for_each_key<F>(&mut self, mut f: F) -> Result<(), Error>
    where
        F: FnMut(&mut Key<'_>) -> Result<(), Error>,
    {
        for mut key in self.keys() {
            if let Err(err) = f(&mut key) {
                if err.fails_batch() {
                    return Err(err);
                }
                key.fail(err);
            }
        }
        Ok(())
    }

    /// Fails the whole batch with `err`, as returning it from
    /// [`Computation::process`](crate::Computation::process) would:
    /// everything the batch did is dropped and the host applies the
    /// pipeline's failure policy to all its inputs. The first failure is
    /// the one reported.
    pub fn fail_batch(&mut self, err: impl Into<Error>) {
        if self.error.is_none() {
            self.error = Some(err.into());
        }
    }

    /// The first misuse of the API during the batch, if any.
    pub(crate) fn misuse(&self) -> Option<&str> {
        self.outs.iter().find_map(|o| o.misuse.as_deref())
    }

    /// The response to the batch, given what process returned.
    pub(crate) fn response<'r>(&'r self, result: &'r Result<(), Error>) -> Response<'r> {
        let failed = self.error.as_ref().or(result.as_ref().err());
        if let Some(err) = failed {
            return Response { keys: Vec::new(), error: Some(err.wire_text()) };
        }
        let keys = self
            .inputs
            .iter()
            .zip(&self.outs)
            .filter_map(|(input, out)| out.response(input.key.0, &self.info))
            .collect();
        Response { keys, error: None }
    }
}

/// The iterator of [`Batch::keys`].
pub struct Keys<'b> {
    inputs: std::slice::Iter<'b, RequestKey<'b>>,
    outs: std::slice::IterMut<'b, KeyOut>,
    info: &'b BatchInfo<'b>,
}

impl<'b> Iterator for Keys<'b> {
    type Item = Key<'b>;

    fn next(&mut self) -> Option<Key<'b>> {
        Some(Key { input: self.inputs.next()?, out: self.outs.next()?, info: self.info })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inputs.size_hint()
    }
}

impl ExactSizeIterator for Keys<'_> {}

/// What the computation did for one key.
#[derive(Default)]
struct KeyOut {
    emits: Vec<EmitOut>,
    /// 0 keep, 1 replace (with `state`), 2 delete.
    state_op: u8,
    state: Vec<u8>,
    timers_set: Vec<TimerOut>,
    timers_cancel: Vec<i64>,
    error: Option<Error>,
    misuse: Option<String>,
}

const STATE_REPLACE: u8 = 1;
const STATE_DELETE: u8 = 2;

impl KeyOut {
    fn misused(&mut self, what: String, at: &Location<'_>) {
        if self.misuse.is_none() {
            self.misuse = Some(format!("flowhost: {what} (at {at})"));
        }
    }

    /// The key's response entry, or None when it has nothing to report.
    fn response<'o>(&'o self, key: &'o str, info: &'o BatchInfo<'o>) -> Option<ResponseKey<'o>> {
        let mut r = ResponseKey {
            key,
            emits: Emits { emits: &[], outputs: info.outputs, request: info.request.0 },
            error: None,
            state: None,
            state_op: 0,
            timers_set: &[],
            timers_cancel: &[],
        };
        if let Some(err) = &self.error {
            r.error = Some(err.wire_text());
            return Some(r);
        }
        if self.emits.is_empty() && self.timers_set.is_empty() && self.timers_cancel.is_empty() && self.state_op == 0 {
            return None;
        }
        r.emits.emits = &self.emits;
        r.state_op = self.state_op;
        if self.state_op == STATE_REPLACE {
            r.state = Some(&self.state);
        }
        r.timers_set = &self.timers_set;
        r.timers_cancel = &self.timers_cancel;
        Some(r)
    }
}

/// One key of a batch: its state, its inputs, and the effects the
/// computation produces for it. Its inputs are numbered from 0: first its
/// due timers, then its messages; an emit names its parents by these
/// numbers.
pub struct Key<'b> {
    input: &'b RequestKey<'b>,
    out: &'b mut KeyOut,
    info: &'b BatchInfo<'b>,
}

impl<'b> Key<'b> {
    /// The key's canonical text: the values of the computation's
    /// `group_by` fields as a compact JSON array, such as `["o-17",3]`;
    /// `""` for an unkeyed computation.
    pub fn key(&self) -> &'b str {
        self.input.key.0
    }

    /// What the host says about the batch the key belongs to.
    pub fn batch(&self) -> &'b BatchInfo<'b> {
        self.info
    }

    /// The number of the key's inputs: due timers plus messages.
    pub fn inputs(&self) -> usize {
        self.input.timers.len() + self.input.messages.len()
    }

    /// The key's state as this batch has left it so far: the stored state,
    /// or what [`set_state`](Self::set_state) last set; None when the key
    /// has no state (it never had one, or
    /// [`delete_state`](Self::delete_state) was called). An empty state is
    /// still a state.
    pub fn state(&self) -> Option<&[u8]> {
        match self.out.state_op {
            STATE_REPLACE => Some(&self.out.state),
            STATE_DELETE => None,
            _ => self.input.state.map(|b| b.0),
        }
    }

    /// Replaces the key's state, creating it if the key had none. Only a
    /// transform keeps state: in a map computation the call is a misuse
    /// that fails the guest.
    #[track_caller]
    pub fn set_state(&mut self, state: impl IntoBytes) {
        if self.require_transform("set_state", Location::caller()) {
            self.out.state_op = STATE_REPLACE;
            self.out.state = state.into_bytes();
        }
    }

    /// Deletes the key's state. Only a transform keeps state.
    #[track_caller]
    pub fn delete_state(&mut self) {
        if self.require_transform("delete_state", Location::caller()) {
            self.out.state_op = STATE_DELETE;
            self.out.state = Vec::new();
        }
    }

    /// Iterates over the key's due timers, in fire order. The iterator
    /// does not borrow the key, so the loop body may emit.
    pub fn timers(&self) -> Timers<'b> {
        Timers { inner: self.input.timers.iter().enumerate() }
    }

    /// Iterates over the key's messages, in delivery order. The iterator
    /// does not borrow the key, so the loop body may emit.
    pub fn messages(&self) -> Messages<'b> {
        Messages { inner: self.input.messages.iter().enumerate(), first: self.input.timers.len() }
    }

    /// Produces an output message on `stream` and returns a builder to
    /// give it a key, an EventTimestamp or parents.
    ///
    /// Its parents (the inputs it derives from, which decide its
    /// timestamps and lineage) are every input of the key unless the
    /// builder names them: in a loop over the key's messages, name the
    /// message, `key.emit("out", p).parent(&m)`. A stream that is not one
    /// of the computation's declared output streams is a misuse that
    /// fails the guest, reported with this call's source location.
    #[track_caller]
    pub fn emit(&mut self, stream: &str, payload: impl IntoBytes) -> EmitBuilder<'_> {
        let at = Location::caller();
        let inputs = self.inputs();
        let declared = self.info.outputs.iter().position(|s| s == stream);
        if let Some(stream) = declared {
            self.out.emits.push(EmitOut {
                key: String::new(),
                stream,
                parents: None,
                payload: self.info.request.payload(payload),
                event_ts: None,
            });
        } else {
            let list = self.info.outputs.join(", ");
            self.out.misused(
                format!("emit to {}, which is not a declared output stream (declared: {list})", go_quote(stream)),
                at,
            );
        }
        EmitBuilder { out: &mut *self.out, key: self.input.key.0, inputs, active: declared.is_some() }
    }

    /// Asks the host to fire a timer for this key when the watermark of
    /// the computation's timer stream reaches `trigger_ts` (nanoseconds
    /// since the Unix epoch), and returns a builder to give it an
    /// EventTimestamp or a payload. Timers of one key with the same
    /// trigger are one timer. Only a transform keeps timers.
    #[track_caller]
    pub fn set_timer(&mut self, trigger_ts: i64) -> TimerBuilder<'_> {
        if !self.require_transform("set_timer", Location::caller()) {
            return TimerBuilder { timer: None };
        }
        self.out.timers_set.push(TimerOut { payload: Vec::new(), event_ts: None, trigger_ts });
        TimerBuilder { timer: self.out.timers_set.last_mut() }
    }

    /// Deletes the key's pending timers at `trigger_ts`, including those
    /// set earlier in this batch; a later [`set_timer`](Self::set_timer)
    /// at the same trigger sets a new one. Only a transform keeps timers.
    #[track_caller]
    pub fn cancel_timer(&mut self, trigger_ts: i64) {
        if !self.require_transform("cancel_timer", Location::caller()) {
            return;
        }
        self.out.timers_set.retain(|t| t.trigger_ts != trigger_ts);
        if !self.out.timers_cancel.contains(&trigger_ts) {
            self.out.timers_cancel.push(trigger_ts);
        }
    }

    /// Fails the key with `err`: everything the batch did for the key is
    /// dropped and the host sends the key's inputs to the dead-letter
    /// stream. Other keys are not affected. The first failure is the one
    /// reported.
    pub fn fail(&mut self, err: impl Into<Error>) {
        if self.out.error.is_none() {
            self.out.error = Some(err.into());
        }
    }

    /// The error the key was failed with, if any.
    pub fn error(&self) -> Option<&Error> {
        self.out.error.as_ref()
    }

    fn require_transform(&mut self, call: &str, at: &Location<'_>) -> bool {
        if self.info.kind == Kind::Map {
            self.out.misused(format!("{call} in a map computation; only a transform keeps state and timers"), at);
            return false;
        }
        true
    }
}

/// One input message of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The message's message_id: unique, stable across replays.
    pub id: &'a str,
    /// The stream the message was read from.
    pub stream: &'a str,
    /// The message body.
    pub payload: &'a [u8],
    /// EventTimestamp: when the event happened.
    pub event_ts: i64,
    /// SystemTimestamp: when the message was created.
    pub system_ts: i64,
    /// AlignmentTimestamp: the message's ordering timestamp.
    pub alignment_ts: i64,
    /// The message's index among the key's inputs (timers first, then
    /// messages); [`EmitBuilder::parent`] takes it, or the message itself.
    pub input: usize,
}

/// A due timer of a key, firing in this batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer<'a> {
    /// The timer's message_id.
    pub id: &'a str,
    /// The time the timer was set for.
    pub trigger_ts: i64,
    /// The timer's EventTimestamp.
    pub event_ts: i64,
    /// What was attached when the timer was set; empty when nothing was.
    pub payload: &'a [u8],
    /// The timer's index among the key's inputs; [`EmitBuilder::parent`]
    /// takes it, or the timer itself.
    pub input: usize,
}

/// The iterator of [`Key::messages`].
pub struct Messages<'a> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, MessageIn<'a>>>,
    first: usize,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        let (i, m) = self.inner.next()?;
        Some(Message {
            id: m.id.0,
            stream: m.stream.0,
            payload: m.payload.0,
            event_ts: m.event_ts,
            system_ts: m.system_ts,
            alignment_ts: m.alignment_ts,
            input: self.first + i,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for Messages<'_> {}

/// The iterator of [`Key::timers`].
pub struct Timers<'a> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, DueTimer<'a>>>,
}

impl<'a> Iterator for Timers<'a> {
    type Item = Timer<'a>;

    fn next(&mut self) -> Option<Timer<'a>> {
        let (i, t) = self.inner.next()?;
        Some(Timer {
            id: t.id.0,
            trigger_ts: t.trigger_ts,
            event_ts: t.event_ts,
            payload: t.payload.map(|b| b.0).unwrap_or_default(),
            input: i,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for Timers<'_> {}

/// An input of a key that an output can derive from: a [`Message`], a
/// [`Timer`], or an input index.
pub trait Parent {
    /// The input's index among the key's inputs.
    fn input_index(&self) -> usize;
}

impl Parent for usize {
    fn input_index(&self) -> usize {
        *self
    }
}

impl Parent for Message<'_> {
    fn input_index(&self) -> usize {
        self.input
    }
}

impl Parent for Timer<'_> {
    fn input_index(&self) -> usize {
        self.input
    }
}

impl<T: Parent + ?Sized> Parent for &T {
    fn input_index(&self) -> usize {
        (**self).input_index()
    }
}

/// Adjusts the emit [`Key::emit`] just produced; every method applies at
/// once, so the builder can simply be dropped.
pub struct EmitBuilder<'k> {
    out: &'k mut KeyOut,
    key: &'k str,
    inputs: usize,
    /// False when the emit was refused: the builder then changes nothing.
    active: bool,
}

impl<'k> EmitBuilder<'k> {
    fn emit(&mut self) -> Option<&mut EmitOut> {
        if self.active {
            self.out.emits.last_mut()
        } else {
            None
        }
    }

    /// Gives the output a key (for example the record key a Kafka sink
    /// writes); `""` means none. It does not change which key's state or
    /// timers the emit belongs to: receivers compute their own key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        if let Some(e) = self.emit() {
            e.key = key.into();
        }
        self
    }

    /// Sets the output's EventTimestamp instead of the one the host
    /// derives (the minimum over the parents).
    pub fn event_ts(mut self, event_ts: i64) -> Self {
        if let Some(e) = self.emit() {
            e.event_ts = Some(event_ts);
        }
        self
    }

    /// Adds `input` (a [`Message`], a [`Timer`] or an input index) to the
    /// output's parents; a repeated input counts once. An index that is
    /// not an input of the key is a misuse that fails the guest.
    #[track_caller]
    pub fn parent(self, input: impl Parent) -> Self {
        self.parents(std::iter::once(input))
    }

    /// Adds every input in `inputs` to the output's parents, as
    /// [`parent`](Self::parent) does. Naming no input at all is a misuse:
    /// use [`all_parents`](Self::all_parents) for every input.
    #[track_caller]
    pub fn parents<I>(mut self, inputs: I) -> Self
    where
        I: IntoIterator,
        I::Item: Parent,
    {
        let at = Location::caller();
        let (n, key) = (self.inputs, self.key);
        let mut problem = None;
        if let Some(e) = self.emit() {
            let parents = e.parents.get_or_insert_with(Parents::default);
            for p in inputs {
                let i = p.input_index();
                if i >= n {
                    problem.get_or_insert(format!("parent {i}: key {} has {n} inputs", go_quote(key)));
                    continue;
                }
                if !parents.contains(i as u32) {
                    parents.push(i as u32);
                }
            }
            if parents.is_empty() {
                e.parents = None;
                problem.get_or_insert_with(|| "parents without inputs; use all_parents for every input".to_string());
            }
        }
        if let Some(p) = problem {
            self.out.misused(p, at);
        }
        self
    }

    /// Makes every input of the key a parent of the output (the parents
    /// field is left out), undoing [`parent`](Self::parent).
    pub fn all_parents(mut self) -> Self {
        if let Some(e) = self.emit() {
            e.parents = None;
        }
        self
    }
}

/// Adjusts the timer [`Key::set_timer`] just set; every method applies at
/// once.
pub struct TimerBuilder<'k> {
    timer: Option<&'k mut TimerOut>,
}

impl TimerBuilder<'_> {
    /// Sets the EventTimestamp the timer carries when it fires; by default
    /// it is the trigger timestamp.
    pub fn event_ts(mut self, event_ts: i64) -> Self {
        if let Some(t) = self.timer.as_deref_mut() {
            t.event_ts = Some(event_ts);
        }
        self
    }

    /// Attaches `payload` to the timer; [`Timer::payload`] returns it when
    /// the timer fires.
    pub fn payload(mut self, payload: impl IntoBytes) -> Self {
        if let Some(t) = self.timer.as_deref_mut() {
            t.payload = payload.into_bytes();
        }
        self
    }
}

/// A payload or state the SDK can take: byte and text strings, owned or
/// borrowed. Owned values are moved, not copied.
pub trait IntoBytes {
    /// The bytes.
    fn into_bytes(self) -> Vec<u8>;

    /// The bytes when they are borrowed: an emit of bytes borrowed from
    /// the request (a message's payload) encodes them from there instead
    /// of copying them.
    #[doc(hidden)]
    fn borrowed(&self) -> Option<&[u8]> {
        None
    }
}

impl IntoBytes for Vec<u8> {
    fn into_bytes(self) -> Vec<u8> {
        self
    }
}

impl IntoBytes for &Vec<u8> {
    fn into_bytes(self) -> Vec<u8> {
        self.clone()
    }

    fn borrowed(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl IntoBytes for &[u8] {
    fn into_bytes(self) -> Vec<u8> {
        self.to_vec()
    }

    fn borrowed(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl<const N: usize> IntoBytes for [u8; N] {
    fn into_bytes(self) -> Vec<u8> {
        self.to_vec()
    }
}

impl<const N: usize> IntoBytes for &[u8; N] {
    fn into_bytes(self) -> Vec<u8> {
        self.to_vec()
    }

    fn borrowed(&self) -> Option<&[u8]> {
        Some(&self[..])
    }
}

impl IntoBytes for String {
    fn into_bytes(self) -> Vec<u8> {
        String::into_bytes(self)
    }
}

impl IntoBytes for &String {
    fn into_bytes(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    fn borrowed(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}

impl IntoBytes for &str {
    fn into_bytes(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    fn borrowed(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}
