//! Event-time windows: the port of the Go SDK's `Windows`
//! (`sdk/go/window.go`), following the design every SDK shares
//! (`sdk/WINDOWS.md`): the same windows, lateness rule, timers and state
//! encoding, so that a key's state is byte-identical to the Go SDK's for
//! the same input and either SDK can take over the other's state.
//!
//! Arithmetic on timestamps wraps as Go's `int64` does, so that even
//! windows at the ends of time agree with the Go SDK.

use std::fmt;

use crate::{Error, Key, Message};

/// Which event-time windows a record belongs to. Build one with
/// [`tumbling`](Self::tumbling), [`hopping`](Self::hopping) or
/// [`session`](Self::session); durations are nanoseconds and window bounds
/// are counted from the Unix epoch (floor division, so times before 1970
/// work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    kind: WindowKind,
    size: i64,
    advance: i64,
    gap: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WindowKind {
    Tumbling,
    Hopping,
    Session,
}

impl WindowSpec {
    /// Windows `[n*size, (n+1)*size)`: each record belongs to exactly one.
    /// Panics when `size` is not positive.
    pub fn tumbling(size: i64) -> Self {
        assert!(size > 0, "flowhost: tumbling window size must be positive");
        WindowSpec { kind: WindowKind::Tumbling, size, advance: size, gap: 0 }
    }

    /// Windows of length `size` starting every `advance`
    /// (`[n*advance, n*advance+size)`): a record belongs to every window
    /// that contains its event time. Panics unless `0 < advance <= size`.
    pub fn hopping(size: i64, advance: i64) -> Self {
        assert!(advance > 0 && size >= advance, "flowhost: hopping windows need 0 < advance <= size");
        WindowSpec { kind: WindowKind::Hopping, size, advance, gap: 0 }
    }

    /// Session windows: records of one key whose event times are less than
    /// `gap` apart share one window `[first, last+gap)`. Panics when `gap`
    /// is not positive.
    pub fn session(gap: i64) -> Self {
        assert!(gap > 0, "flowhost: session gap must be positive");
        WindowSpec { kind: WindowKind::Session, size: 0, advance: 0, gap }
    }
}

/// One window of one key: `[start, end)` in event time (nanoseconds since
/// the Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window<'a> {
    /// The key's canonical text.
    pub key: &'a str,
    /// The first instant of the window.
    pub start: i64,
    /// The first instant after the window.
    pub end: i64,
}

/// Folds a window's records into an accumulator of bytes, which
/// [`Windows`] keeps in the key's host-owned state between batches. It
/// must be deterministic: the same records in the same order give the same
/// bytes, or the windows differ between runs.
pub trait Aggregator {
    /// The accumulator of an empty window; empty by default.
    fn init(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Returns `acc` with `m` folded in; it may reuse `acc`'s buffer.
    fn add(&self, acc: Vec<u8>, m: &Message<'_>) -> Vec<u8>;

    /// Combines the accumulators of two session windows that a record
    /// joined, `a` starting earlier than `b` (or at the same time and
    /// ending no later). Only session windows call it.
    fn merge(&self, a: Vec<u8>, b: Vec<u8>) -> Vec<u8>;

    /// The payload emitted for a closed window; the accumulator itself by
    /// default.
    fn result(&self, window: &Window<'_>, acc: Vec<u8>) -> Vec<u8> {
        let _ = window;
        acc
    }
}

/// Why a key's state is not a window state: the key fails with it (its
/// inputs go to dead letters), as with `ErrWindowState` in the Go SDK.
/// `at` is the offset in the state of the byte where decoding stopped;
/// `window` is the index of the open window being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowStateError {
    /// The state is empty or its first byte is not version 1.
    Version {
        /// The first byte, `None` for an empty state.
        found: Option<u8>,
    },
    /// `fired_through` is not a varint (truncated or overflowing).
    FiredThrough {
        /// Where the varint starts.
        at: usize,
    },
    /// The count of open windows is not a uvarint or exceeds the bytes
    /// left.
    Count {
        /// Where the uvarint starts.
        at: usize,
    },
    /// A window's start is not a varint.
    Start {
        /// The window's index, from 0.
        window: u64,
        /// Where the field starts.
        at: usize,
    },
    /// A window's end is not a varint.
    End {
        /// The window's index, from 0.
        window: u64,
        /// Where the field starts.
        at: usize,
    },
    /// A window's accumulator length is not a uvarint or runs past the end
    /// of the state.
    AccumulatorLength {
        /// The window's index, from 0.
        window: u64,
        /// Where the field starts.
        at: usize,
    },
    /// A window is not after the one before it in (end, start) order:
    /// the encoding keeps them sorted and distinct.
    Order {
        /// The window's index, from 0.
        window: u64,
        /// Where the window starts.
        at: usize,
    },
    /// Bytes follow the last window.
    TrailingBytes {
        /// Where the last window ends.
        at: usize,
        /// The state's length.
        len: usize,
    },
}

impl fmt::Display for WindowStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The prefix and the words are the Go SDK's, with the position added.
        f.write_str("flowhost: the key's state is not a window state: ")?;
        match *self {
            WindowStateError::Version { found: None } => f.write_str("missing or unknown version byte (the state is empty)"),
            WindowStateError::Version { found: Some(b) } => {
                write!(f, "missing or unknown version byte (byte 0 is {}, want 1)", b)
            }
            WindowStateError::FiredThrough { at } => write!(f, "bad fired-through at byte {}", at),
            WindowStateError::Count { at } => write!(f, "bad window count at byte {}", at),
            WindowStateError::Start { window, at } => write!(f, "bad window start of window {} at byte {}", window, at),
            WindowStateError::End { window, at } => write!(f, "bad window end of window {} at byte {}", window, at),
            WindowStateError::AccumulatorLength { window, at } => {
                write!(f, "bad accumulator length of window {} at byte {}", window, at)
            }
            WindowStateError::Order { window, at } => {
                write!(f, "windows out of (end, start) order or repeated: window {} at byte {}", window, at)
            }
            WindowStateError::TrailingBytes { at, len } => write!(f, "trailing bytes: {} from byte {}", len - at, at),
        }
    }
}

impl std::error::Error for WindowStateError {}

/// The state encoding's first byte (sdk/WINDOWS.md, version 1).
const STATE_VERSION: u8 = 1;

/// One window still waiting for its timer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenWindow {
    pub(crate) start: i64,
    pub(crate) end: i64,
    pub(crate) acc: Vec<u8>,
}

/// What [`Windows`] keeps in a key's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WindowState {
    /// The largest trigger that closed a window of the key; `i64::MIN`:
    /// none.
    pub(crate) fired_through: i64,
    /// Sorted by (end, start).
    pub(crate) open: Vec<OpenWindow>,
}

/// Go's `binary.Uvarint`: the value and the bytes read; 0 bytes when the
/// input ends first, and -(bytes) on overflow. Overlong forms are
/// accepted, as Go accepts them.
fn uvarint(b: &[u8]) -> (u64, isize) {
    let mut x: u64 = 0;
    let mut s: u32 = 0;
    for (i, &c) in b.iter().enumerate() {
        if i == 10 {
            return (0, -(i as isize + 1));
        }
        if c < 0x80 {
            if i == 9 && c > 1 {
                return (0, -(i as isize + 1));
            }
            return (x | (c as u64) << s, i as isize + 1);
        }
        x |= ((c & 0x7f) as u64) << s;
        s += 7;
    }
    (0, 0)
}

/// Go's `binary.Varint`: zig-zag over [`uvarint`].
fn varint(b: &[u8]) -> (i64, isize) {
    let (ux, n) = uvarint(b);
    let mut x = (ux >> 1) as i64;
    if ux & 1 != 0 {
        x = !x;
    }
    (x, n)
}

/// Go's `binary.AppendUvarint`.
fn append_uvarint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// Go's `binary.AppendVarint`.
fn append_varint(out: &mut Vec<u8>, x: i64) {
    let mut ux = (x as u64) << 1;
    if x < 0 {
        ux = !ux;
    }
    append_uvarint(out, ux);
}

impl WindowState {
    fn empty() -> Self {
        WindowState { fired_through: i64::MIN, open: Vec::new() }
    }

    /// Decodes a key's state; `None` (no state) is a key with no windows.
    pub(crate) fn decode(state: Option<&[u8]>) -> Result<WindowState, WindowStateError> {
        let all = match state {
            None => return Ok(WindowState::empty()),
            Some(b) => b,
        };
        match all.first() {
            Some(&STATE_VERSION) => {}
            found => return Err(WindowStateError::Version { found: found.copied() }),
        }
        let mut at = 1;
        let (fired_through, n) = varint(&all[at..]);
        if n <= 0 {
            return Err(WindowStateError::FiredThrough { at });
        }
        at += n as usize;
        let (count, n) = uvarint(&all[at..]);
        // Each window takes at least three bytes, so a count above the
        // bytes left is refused before anything is allocated for it.
        if n <= 0 || count > (all.len() - at) as u64 {
            return Err(WindowStateError::Count { at });
        }
        at += n as usize;
        let mut open = Vec::with_capacity(count as usize);
        for window in 0..count {
            let window_at = at;
            let (start, n) = varint(&all[at..]);
            if n <= 0 {
                return Err(WindowStateError::Start { window, at });
            }
            at += n as usize;
            let (end, n) = varint(&all[at..]);
            if n <= 0 {
                return Err(WindowStateError::End { window, at });
            }
            at += n as usize;
            let (size, n) = uvarint(&all[at..]);
            if n <= 0 || size > (all.len() - at - n as usize) as u64 {
                return Err(WindowStateError::AccumulatorLength { window, at });
            }
            at += n as usize;
            let acc = all[at..at + size as usize].to_vec();
            at += size as usize;
            if let Some(last) = open.last() {
                let last: &OpenWindow = last;
                if (last.end, last.start) >= (end, start) {
                    return Err(WindowStateError::Order { window, at: window_at });
                }
            }
            open.push(OpenWindow { start, end, acc });
        }
        if at != all.len() {
            return Err(WindowStateError::TrailingBytes { at, len: all.len() });
        }
        Ok(WindowState { fired_through, open })
    }

    /// The encoding of sdk/WINDOWS.md, version 1.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = vec![STATE_VERSION];
        append_varint(&mut out, self.fired_through);
        append_uvarint(&mut out, self.open.len() as u64);
        for w in &self.open {
            append_varint(&mut out, w.start);
            append_varint(&mut out, w.end);
            append_uvarint(&mut out, w.acc.len() as u64);
            out.extend_from_slice(&w.acc);
        }
        out
    }
}

/// `t / d` rounded towards minus infinity, for windows before 1970.
fn floor_div(t: i64, d: i64) -> i64 {
    let q = t.wrapping_div(d);
    if t.wrapping_rem(d) != 0 && (t < 0) != (d < 0) {
        q - 1
    } else {
        q
    }
}

/// Aggregates a transform's messages per (key, window) and emits each
/// window's result once the watermark passes its end plus the allowed
/// lateness: the Rust port of the Go SDK's `Windows`, with the same
/// results, late records, timers and state bytes (sdk/WINDOWS.md).
///
/// It owns the key's state and timers: a computation that uses `Windows`
/// keeps nothing else in them. A result is emitted on the output stream
/// with EventTimestamp `end - 1` and the firing timer as its only parent.
/// A record whose every window has already fired for its key is late: it
/// goes unchanged to the late stream, with itself as parent. Lateness
/// depends only on the key's fired timers, which the host places at fixed
/// positions among the messages, so results do not depend on batch
/// limits.
///
/// ```
/// use flowhost::{Aggregator, Batch, Computation, Error, Message, WindowSpec, Windows};
///
/// /// Counts records, the count as decimal text.
/// struct Count;
/// impl Aggregator for Count {
///     fn add(&self, acc: Vec<u8>, _m: &Message<'_>) -> Vec<u8> {
///         let n: u64 = std::str::from_utf8(&acc).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
///         (n + 1).to_string().into_bytes()
///     }
///     fn merge(&self, a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
///         let n = |v: &[u8]| -> u64 { std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()).unwrap_or(0) };
///         (n(&a) + n(&b)).to_string().into_bytes()
///     }
/// }
///
/// struct PerMinute(Windows<Count>);
/// impl Computation for PerMinute {
///     fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
///         // A bad state fails its key alone: its inputs go to dead letters.
///         batch.for_each_key(|key| Ok(self.0.process(key)?))
///     }
/// }
///
/// const MINUTE: i64 = 60_000_000_000;
/// let w = Windows::new(WindowSpec::tumbling(MINUTE), Count, "counts", "late-orders")
///     .allowed_lateness(10_000_000_000);
/// flowhost::export!(PerMinute(Windows::new(WindowSpec::tumbling(MINUTE), Count, "counts", "late")));
/// # let _ = w;
/// ```
pub struct Windows<A> {
    spec: WindowSpec,
    agg: A,
    output: String,
    late: String,
    lateness: i64,
}

impl<A: Aggregator> Windows<A> {
    /// Windows of `spec` aggregated by `agg`, whose results go to `output`
    /// and whose late records go to `late`, with no allowed lateness.
    /// Panics when a stream name is empty: a late record always has
    /// somewhere to go.
    pub fn new(spec: WindowSpec, agg: A, output: impl Into<String>, late: impl Into<String>) -> Self {
        let (output, late) = (output.into(), late.into());
        assert!(
            !output.is_empty() && !late.is_empty(),
            "flowhost: Windows needs an output stream and a late stream"
        );
        Windows { spec, agg, output, late, lateness: 0 }
    }

    /// Keeps each window open until the watermark passes its end plus
    /// `lateness` nanoseconds, instead of its end. Panics when `lateness`
    /// is negative.
    pub fn allowed_lateness(mut self, lateness: i64) -> Self {
        assert!(lateness >= 0, "flowhost: allowed lateness must not be negative");
        self.lateness = lateness;
        self
    }

    /// The aggregator.
    pub fn aggregator(&self) -> &A {
        &self.agg
    }

    /// Handles one key of a batch: fires the windows whose timers are due,
    /// adds the key's messages to their windows (or sends them to the late
    /// stream) and saves the key's state and timers. On a state it cannot
    /// decode it fails the key ([`Key::fail`]; its inputs go to dead
    /// letters), changes nothing else and returns the error.
    pub fn process(&self, key: &mut Key<'_>) -> Result<(), WindowStateError> {
        let mut s = match WindowState::decode(key.state()) {
            Ok(s) => s,
            Err(err) => {
                key.fail(Error::new(err.to_string()));
                return Err(err);
            }
        };
        // The triggers set during this call. Such a timer is never
        // cancelled in the same call: the host re-cuts a batch only for the
        // timers its response sets, so cancelling one that would have fired
        // before a later message of the batch would make the result depend
        // on where the batch was cut.
        let mut set_here: Vec<i64> = Vec::new();
        for t in key.timers() {
            let mut kept = Vec::with_capacity(s.open.len());
            for o in std::mem::take(&mut s.open) {
                if o.end.wrapping_add(self.lateness) <= t.trigger_ts {
                    // Only a timer that closes a window counts: a session's
                    // stale timer closes nothing.
                    s.fired_through = s.fired_through.max(t.trigger_ts);
                    let payload = self.agg.result(&Window { key: key.key(), start: o.start, end: o.end }, o.acc);
                    key.emit(&self.output, payload).event_ts(o.end.wrapping_sub(1)).parent(&t);
                } else {
                    kept.push(o);
                }
            }
            s.open = kept;
        }
        for m in key.messages() {
            if !self.add(key, &mut s, &m, &mut set_here) {
                key.emit(&self.late, m.payload).parent(&m);
            }
        }
        if s.open.is_empty() && s.fired_through == i64::MIN {
            key.delete_state();
        } else {
            key.set_state(s.encode());
        }
        Ok(())
    }

    /// Whether a window ending at `end` has fired for the key.
    fn closed(&self, s: &WindowState, end: i64) -> bool {
        s.fired_through != i64::MIN && end.wrapping_add(self.lateness) <= s.fired_through
    }

    fn set_timer(&self, key: &mut Key<'_>, trigger: i64, set_here: &mut Vec<i64>) {
        key.set_timer(trigger);
        set_here.push(trigger);
    }

    /// Puts `m` into its windows; false means every one has fired: `m` is
    /// late.
    fn add(&self, key: &mut Key<'_>, s: &mut WindowState, m: &Message<'_>, set_here: &mut Vec<i64>) -> bool {
        if self.spec.kind == WindowKind::Session {
            return self.add_session(key, s, m, set_here);
        }
        let t = m.event_ts;
        let (size, advance) = (self.spec.size, self.spec.advance);
        let mut added = false;
        let mut start = floor_div(t, advance).wrapping_mul(advance);
        while start > t.wrapping_sub(size) {
            let end = start.wrapping_add(size);
            if self.closed(s, end) {
                break; // earlier windows end earlier: closed too
            }
            let i = match s.open.iter().position(|o| o.start == start) {
                Some(i) => i,
                None => {
                    s.open.push(OpenWindow { start, end, acc: self.agg.init() });
                    self.set_timer(key, end.wrapping_add(self.lateness), set_here);
                    s.open.len() - 1
                }
            };
            let acc = std::mem::take(&mut s.open[i].acc);
            s.open[i].acc = self.agg.add(acc, m);
            added = true;
            start = start.wrapping_sub(advance);
        }
        sort_open(&mut s.open);
        added
    }

    fn add_session(&self, key: &mut Key<'_>, s: &mut WindowState, m: &Message<'_>, set_here: &mut Vec<i64>) -> bool {
        let t = m.event_ts;
        let (n_start, n_end) = (t, t.wrapping_add(self.spec.gap));
        if self.closed(s, n_end) {
            return false;
        }
        let n = OpenWindow { start: n_start, end: n_end, acc: self.agg.add(self.agg.init(), m) };
        let mut kept = Vec::with_capacity(s.open.len() + 1);
        let mut merged = Vec::new();
        for o in std::mem::take(&mut s.open) {
            if o.start < n.end && n.start < o.end {
                merged.push(o);
            } else {
                kept.push(o);
            }
        }
        let old_ends: Vec<i64> = merged.iter().map(|o| o.end).collect();
        merged.push(n);
        // Stable, as Go's sort is for these few windows: a window equal to
        // the new one stays before it.
        merged.sort_by(|a, b| (a.start, a.end).cmp(&(b.start, b.end)));
        let mut it = merged.into_iter();
        let first = it.next().expect("the new window is there");
        let (mut start, mut end, mut acc) = (first.start, first.end, first.acc);
        for o in it {
            acc = self.agg.merge(acc, o.acc);
            start = start.min(o.start);
            end = end.max(o.end);
        }
        for old_end in old_ends {
            let trigger = old_end.wrapping_add(self.lateness);
            if old_end != end && !set_here.contains(&trigger) {
                key.cancel_timer(trigger);
            }
        }
        self.set_timer(key, end.wrapping_add(self.lateness), set_here);
        kept.push(OpenWindow { start, end, acc });
        s.open = kept;
        sort_open(&mut s.open);
        true
    }
}

fn sort_open(ws: &mut [OpenWindow]) {
    ws.sort_by(|a, b| (a.end, a.start).cmp(&(b.end, b.start)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_go_encoding_binary() {
        // Values and bytes from Go's binary.AppendVarint / AppendUvarint.
        let cases: &[(i64, &[u8])] = &[
            (0, &[0]),
            (-1, &[1]),
            (1, &[2]),
            (-64, &[127]),
            (64, &[128, 1]),
            (i64::MIN, &[255, 255, 255, 255, 255, 255, 255, 255, 255, 1]),
            (i64::MAX, &[254, 255, 255, 255, 255, 255, 255, 255, 255, 1]),
        ];
        for &(v, want) in cases {
            let mut out = Vec::new();
            append_varint(&mut out, v);
            assert_eq!(out, want, "varint {}", v);
            assert_eq!(varint(want), (v, want.len() as isize));
        }
        assert_eq!(uvarint(&[0x80, 0x00]), (0, 2), "an overlong form is accepted, as in Go");
        assert_eq!(uvarint(&[0x80]), (0, 0), "truncated");
        assert_eq!(uvarint(&[0xff; 9].iter().copied().chain([2]).collect::<Vec<u8>>()), (0, -10), "overflow");
        assert_eq!(uvarint(&[0x80; 11]), (0, -11), "too long");
    }

    #[test]
    fn floor_div_rounds_down() {
        assert_eq!(floor_div(-1, 10), -1);
        assert_eq!(floor_div(-10, 10), -1);
        assert_eq!(floor_div(-11, 10), -2);
        assert_eq!(floor_div(9, 10), 0);
        assert_eq!(floor_div(10, 10), 1);
    }

    #[test]
    fn state_round_trips() {
        let s = WindowState {
            fired_through: 42,
            open: vec![
                OpenWindow { start: -10, end: 0, acc: b"1,2".to_vec() },
                OpenWindow { start: 0, end: 10, acc: Vec::new() },
            ],
        };
        let b = s.encode();
        assert_eq!(WindowState::decode(Some(&b)), Ok(s));
        assert_eq!(WindowState::decode(None), Ok(WindowState::empty()));
    }

    #[test]
    fn bad_states_are_refused_precisely() {
        use WindowStateError::*;
        let trailing = {
            let mut b = WindowState { fired_through: 0, open: Vec::new() }.encode();
            b.push(0);
            b
        };
        let cases: Vec<(&str, Vec<u8>, WindowStateError)> = vec![
            ("empty", vec![], Version { found: None }),
            ("unknown version", vec![9], Version { found: Some(9) }),
            ("truncated fired-through", vec![1, 0x80], FiredThrough { at: 1 }),
            ("truncated count", vec![1, 0], Count { at: 2 }),
            ("count past the end", vec![1, 0, 5, 0], Count { at: 2 }),
            ("truncated start", vec![1, 0, 1, 0x80], Start { window: 0, at: 3 }),
            ("truncated end", vec![1, 0, 1, 0, 0x80], End { window: 0, at: 4 }),
            ("accumulator past the end", vec![1, 0, 1, 0, 2, 50], AccumulatorLength { window: 0, at: 5 }),
            ("second window cut", vec![1, 0, 2, 0, 2, 0, 0], End { window: 1, at: 7 }),
            ("trailing bytes", trailing, TrailingBytes { at: 3, len: 4 }),
            ("windows repeated", vec![1, 0, 2, 0, 2, 0, 0, 2, 0], Order { window: 1, at: 6 }),
            ("windows out of order", vec![1, 0, 2, 0, 20, 0, 0, 2, 0], Order { window: 1, at: 6 }),
        ];
        for (name, input, want) in cases {
            assert_eq!(WindowState::decode(Some(&input)), Err(want), "{}", name);
        }
        assert_eq!(
            Start { window: 1, at: 6 }.to_string(),
            "flowhost: the key's state is not a window state: bad window start of window 1 at byte 6"
        );
        assert_eq!(
            Version { found: Some(9) }.to_string(),
            "flowhost: the key's state is not a window state: missing or unknown version byte (byte 0 is 9, want 1)"
        );
    }

    /// A deterministic xorshift generator: no crate needed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Any bytes decode to a state that re-encodes to a state that decodes
    /// to itself, or are refused: a poor man's fuzz target over random and
    /// mutated states.
    #[test]
    fn decode_never_panics_and_round_trips() {
        let mut rng = Rng(0x9e3779b97f4a7c15);
        let good = WindowState {
            fired_through: -5,
            open: vec![OpenWindow { start: 1 << 40, end: (1 << 40) + 7, acc: vec![1, 2, 3] }],
        }
        .encode();
        for i in 0..20000 {
            let mut b = if i % 2 == 0 { good.clone() } else { Vec::new() };
            let len = (rng.next() % 16) as usize;
            for _ in 0..len {
                b.push(rng.next() as u8);
            }
            if !b.is_empty() && i % 3 == 0 {
                let j = (rng.next() as usize) % b.len();
                b[j] = rng.next() as u8;
            }
            if let Ok(s) = WindowState::decode(Some(&b)) {
                let again = s.encode();
                assert_eq!(WindowState::decode(Some(&again)).as_ref(), Ok(&s), "{:?}", b);
            }
        }
    }
}
