//! The window helper against a model, as the Go SDK's TestWindowsMatchModel
//! (sdk/go/window_test.go): every window kind, random out-of-order input
//! with late records, batches of 1, 7 and 1000 inputs with timers placed by
//! the host's rule, compared per key with outputs computed from the input
//! alone. The driver re-implements the host's timer placement; it is not
//! the host.

use std::collections::BTreeMap;

use flowhost::testing::{process, StateChange, TestBatch, TestInit};
use flowhost::{Aggregator, Batch, Computation, Error, Message, Window, WindowSpec, Windows};

#[derive(Clone, Copy, Debug)]
struct Input {
    key: &'static str,
    ts: i64,
    value: i64,
}

/// Aggregates "count,sum" as text, so that state and results are easy to
/// read.
struct CountSum;

fn parse_count_sum(b: &[u8]) -> (i64, i64) {
    let s = std::str::from_utf8(b).unwrap_or("");
    let (c, v) = s.split_once(',').unwrap_or((s, ""));
    (c.parse().unwrap_or(0), v.parse().unwrap_or(0))
}

impl Aggregator for CountSum {
    fn init(&self) -> Vec<u8> {
        b"0,0".to_vec()
    }
    fn add(&self, acc: Vec<u8>, m: &Message<'_>) -> Vec<u8> {
        let (c, s) = parse_count_sum(&acc);
        let v: i64 = std::str::from_utf8(m.payload).unwrap().parse().unwrap();
        format!("{},{}", c + 1, s + v).into_bytes()
    }
    fn merge(&self, a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
        let ((ca, sa), (cb, sb)) = (parse_count_sum(&a), parse_count_sum(&b));
        format!("{},{}", ca + cb, sa + sb).into_bytes()
    }
    fn result(&self, w: &Window<'_>, acc: Vec<u8>) -> Vec<u8> {
        format!("{} [{},{}) {}", w.key, w.start, w.end, String::from_utf8(acc).unwrap()).into_bytes()
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Tumbling,
    Hopping,
    Session,
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    name: &'static str,
    kind: Kind,
    size: i64,
    advance: i64,
    gap: i64,
    lateness: i64,
}

const SPECS: [Spec; 6] = [
    Spec { name: "tumbling", kind: Kind::Tumbling, size: 10, advance: 0, gap: 0, lateness: 0 },
    Spec { name: "tumbling-lateness", kind: Kind::Tumbling, size: 10, advance: 0, gap: 0, lateness: 5 },
    Spec { name: "hopping", kind: Kind::Hopping, size: 10, advance: 5, gap: 0, lateness: 0 },
    Spec { name: "hopping-uneven", kind: Kind::Hopping, size: 10, advance: 3, gap: 0, lateness: 2 },
    Spec { name: "session", kind: Kind::Session, size: 0, advance: 0, gap: 4, lateness: 0 },
    Spec { name: "session-lateness", kind: Kind::Session, size: 0, advance: 0, gap: 4, lateness: 3 },
];

struct Windowed(Windows<CountSum>);

impl Computation for Windowed {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        batch.for_each_key(|key| Ok(self.0.process(key)?))
    }
}

fn windows_for(sp: &Spec) -> Windowed {
    let spec = match sp.kind {
        Kind::Tumbling => WindowSpec::tumbling(sp.size),
        Kind::Hopping => WindowSpec::hopping(sp.size, sp.advance),
        Kind::Session => WindowSpec::session(sp.gap),
    };
    Windowed(Windows::new(spec, CountSum, "out", "late").allowed_lateness(sp.lateness))
}

type PerKey = BTreeMap<String, Vec<String>>;

/// The watermark at position l (just before input l): the newest event
/// time before it minus bound, the end of time after the last.
fn watermark_at(input: &[Input], l: usize, bound: i64) -> i64 {
    if l >= input.len() {
        return i64::MAX;
    }
    input[..l].iter().map(|r| r.ts - bound).max().unwrap_or(i64::MIN)
}

/// The expected outputs per key, straight from the input with no batches
/// or ABI: at each position the key's windows whose end plus lateness the
/// watermark has reached close; a record is late when all its windows end
/// (plus lateness) at or before the key's largest closed trigger.
fn model(sp: &Spec, input: &[Input], bound: i64) -> (PerKey, PerKey) {
    #[derive(Clone, Copy)]
    struct Win {
        start: i64,
        end: i64,
        count: i64,
        sum: i64,
    }
    let mut open: BTreeMap<&str, Vec<Win>> = BTreeMap::new();
    let mut fired: BTreeMap<&str, i64> = BTreeMap::new();
    let (mut results, mut late) = (PerKey::new(), PerKey::new());
    let close_due = |wm: i64, open: &mut BTreeMap<&'static str, Vec<Win>>, fired: &mut BTreeMap<&'static str, i64>, results: &mut PerKey| {
        for (key, ws) in open.iter_mut() {
            ws.sort_by_key(|w| w.end);
            let mut kept = Vec::new();
            for w in ws.drain(..) {
                if w.end + sp.lateness <= wm {
                    results.entry(key.to_string()).or_default().push(format!("{} [{},{}) {},{}", key, w.start, w.end, w.count, w.sum));
                    let f = fired.entry(key).or_insert(i64::MIN);
                    *f = (*f).max(w.end + sp.lateness);
                } else {
                    kept.push(w);
                }
            }
            *ws = kept;
        }
    };
    for (l, r) in input.iter().enumerate() {
        close_due(watermark_at(input, l, bound), &mut open, &mut fired, &mut results);
        let closed = |fired: &BTreeMap<&str, i64>, end: i64| fired.get(r.key).map_or(false, |f| end + sp.lateness <= *f);
        let mut accepted = false;
        match sp.kind {
            Kind::Session => {
                if !closed(&fired, r.ts + sp.gap) {
                    accepted = true;
                    let mut n = Win { start: r.ts, end: r.ts + sp.gap, count: 1, sum: r.value };
                    let ws = open.entry(r.key).or_default();
                    let mut kept = Vec::new();
                    for w in ws.drain(..) {
                        if w.start < n.end && n.start < w.end {
                            n = Win { start: n.start.min(w.start), end: n.end.max(w.end), count: n.count + w.count, sum: n.sum + w.sum };
                        } else {
                            kept.push(w);
                        }
                    }
                    kept.push(n);
                    *ws = kept;
                }
            }
            Kind::Tumbling | Kind::Hopping => {
                let (size, adv) = match sp.kind {
                    Kind::Tumbling => (sp.size, sp.size),
                    _ => (sp.size, sp.advance),
                };
                let mut start = (r.ts / adv) * adv;
                while start > r.ts - size {
                    if !closed(&fired, start + size) {
                        accepted = true;
                        let ws = open.entry(r.key).or_default();
                        let i = match ws.iter().position(|w| w.start == start) {
                            Some(i) => i,
                            None => {
                                ws.push(Win { start, end: start + size, count: 0, sum: 0 });
                                ws.len() - 1
                            }
                        };
                        ws[i].count += 1;
                        ws[i].sum += r.value;
                    }
                    start -= adv;
                }
            }
        }
        if !accepted {
            late.entry(r.key.to_string()).or_default().push(r.value.to_string());
        }
    }
    close_due(i64::MAX, &mut open, &mut fired, &mut results);
    (results, late)
}

/// Runs the computation in batches of at most batch_size inputs, placing
/// timers as host/spec/README.md ("When a timer fires") says the host
/// does: due timers fire at a position before its message, a batch ends
/// before a message a pending timer precedes, and a batch whose own new
/// timers would precede one of its later messages is processed again,
/// shorter.
fn drive(sp: &Spec, input: &[Input], bound: i64, batch_size: usize) -> (PerKey, PerKey) {
    let mut state: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut timers: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let (mut results, mut late) = (PerKey::new(), PerKey::new());
    let due_at = |timers: &BTreeMap<String, Vec<i64>>, wm: i64| timers.values().any(|ts| ts.iter().any(|&t| t <= wm));
    let init = TestInit::new().output("out").output("late");
    let mut l = 0;
    while l <= input.len() {
        let wm = watermark_at(input, l, bound);
        let mut end = l + 1;
        while end < input.len() && end - l < batch_size && !due_at(&timers, watermark_at(input, end, bound)) {
            end += 1;
        }
        end = end.min(input.len());
        if l == input.len() && !due_at(&timers, wm) {
            break;
        }
        loop {
            // Per key (sorted), the timers due at the batch's first
            // position, then the messages; the pending timers stay until
            // the batch is accepted.
            let mut batch = TestBatch::new().watermarks(wm, wm);
            let mut fired: Vec<(String, i64)> = Vec::new();
            for (key, ts) in &timers {
                let mut ts = ts.clone();
                ts.sort_unstable();
                for t in ts {
                    if t <= wm {
                        batch = batch.timer(key, t, b"");
                        fired.push((key.clone(), t));
                    }
                }
            }
            for r in &input[l..end] {
                batch = batch.message(r.key, "in", r.ts, r.value.to_string().as_bytes());
            }
            for (key, s) in &state {
                // The host sends only keys with inputs.
                if fired.iter().any(|(k, _)| k == key) || input[l..end].iter().any(|r| r.key == key) {
                    batch = batch.state(key, s);
                }
            }
            let resp = process(windows_for(sp), &init, &batch).unwrap_or_else(|e| panic!("batch at {}: {}", l, e));
            assert_eq!(resp.error, None, "batch at {}", l);
            let mut cut = end;
            for k in &resp.keys {
                for st in &k.timers_set {
                    for j in l + 1..cut {
                        if st.trigger_ts <= watermark_at(input, j, bound) {
                            cut = j;
                        }
                    }
                }
            }
            if cut < end {
                end = cut;
                continue;
            }
            for (key, t) in fired {
                timers.get_mut(&key).unwrap().retain(|&x| x != t);
            }
            for k in &resp.keys {
                assert_eq!(k.error, None, "key {}", k.key);
                for e in &k.emits {
                    let text = String::from_utf8(e.payload.clone()).unwrap();
                    let to = if e.stream == "late" { &mut late } else { &mut results };
                    to.entry(k.key.clone()).or_default().push(text);
                }
                match &k.state {
                    StateChange::Replace(s) => {
                        state.insert(k.key.clone(), s.clone());
                    }
                    StateChange::Delete => {
                        state.remove(&k.key);
                    }
                    StateChange::Keep => {}
                }
                let ts = timers.entry(k.key.clone()).or_default();
                ts.retain(|t| !k.timers_cancel.contains(t));
                for st in &k.timers_set {
                    if !ts.contains(&st.trigger_ts) {
                        ts.push(st.trigger_ts);
                    }
                }
            }
            break;
        }
        if l == input.len() {
            continue; // the end of time: fire until no timer is left
        }
        l = end;
    }
    (results, late)
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

    /// A number in [lo, hi].
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[test]
fn windows_match_model() {
    for sp in &SPECS {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ sp.name.len() as u64);
        let (mut saw_late, mut saw_result) = (false, false);
        for case in 0..100 {
            let n = rng.range(0, 60) as usize;
            let bound = rng.range(0, 8);
            let input: Vec<Input> = (0..n)
                .map(|i| Input {
                    key: ["a", "b", "c"][rng.range(0, 2) as usize],
                    ts: i as i64 + rng.range(-15, 3) + 100,
                    value: i as i64 + 1,
                })
                .collect();
            let (want_res, want_late) = model(sp, &input, bound);
            saw_late |= !want_late.is_empty();
            saw_result |= !want_res.is_empty();
            for &size in &[1, 7, 1000] {
                let (got_res, got_late) = drive(sp, &input, bound, size);
                assert!(
                    got_res == want_res && got_late == want_late,
                    "{} case {} batch size {} (bound {}, input {:?}):\n results {:?}\n want    {:?}\n late {:?}\n want {:?}",
                    sp.name,
                    case,
                    size,
                    bound,
                    input,
                    got_res,
                    want_res,
                    got_late,
                    want_late
                );
            }
        }
        // The generator must reach both paths, or the check proves little.
        assert!(saw_late && saw_result, "{}: late records {} window results {}", sp.name, saw_late, saw_result);
    }
}
