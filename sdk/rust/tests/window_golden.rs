//! The Rust window helper does byte for byte what the Go SDK's does:
//! testdata/window_golden.txt is written by the Go test TestWindowGolden
//! (window_golden_test.go) from the Go SDK's Windows and checked against it
//! on every `go test ./sdk/rust`, so it cannot drift. This test replays
//! each call's input through the Rust helper and requires the same state
//! bytes, emits (stream, event time, parents, payload), timers set and
//! timers cancelled.

use flowhost::testing::{process, StateChange, TestBatch, TestInit};
use flowhost::{Aggregator, Batch, Computation, Error, Message, WindowSpec, Windows};

/// Concatenates payloads, as the Go test's aggregator does.
struct Append;

impl Aggregator for Append {
    fn add(&self, mut acc: Vec<u8>, m: &Message<'_>) -> Vec<u8> {
        acc.extend_from_slice(m.payload);
        acc
    }
    fn merge(&self, mut a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
        a.extend_from_slice(&b);
        a
    }
}

struct Windowed(Windows<Append>);

impl Computation for Windowed {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        batch.for_each_key(|key| Ok(self.0.process(key)?))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{:02x}", x)).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn ints(s: &str) -> Vec<i64> {
    if s == "-" {
        return Vec::new();
    }
    s.split(',').map(|x| x.parse().expect("integer")).collect()
}

fn join<T: ToString>(xs: &[T]) -> String {
    if xs.is_empty() {
        return "-".to_string();
    }
    xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

fn windows(fields: &[&str]) -> Windowed {
    let n = |i: usize| -> i64 { fields[i].parse().expect("integer") };
    let spec = match fields[1] {
        "tumbling" => WindowSpec::tumbling(n(2)),
        "hopping" => WindowSpec::hopping(n(2), n(3)),
        "session" => WindowSpec::session(n(4)),
        other => panic!("unknown kind {}", other),
    };
    Windowed(Windows::new(spec, Append, "out", "late").allowed_lateness(n(5)))
}

#[test]
fn window_state_and_effects_equal_go() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/window_golden.txt");
    let text = std::fs::read_to_string(path).expect("testdata/window_golden.txt (go test ./sdk/rust -run TestWindowGolden)");
    let init = TestInit::new().output("out").output("late");
    let mut case: Vec<&str> = Vec::new();
    let mut state: Option<Vec<u8>> = None;
    let mut pending: Option<TestBatch> = None;
    let (mut calls, mut cases) = (0, 0);
    for (n, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[0] {
            "#" => {}
            "case" => {
                case = fields[1..].to_vec();
                state = None;
                cases += 1;
            }
            "in" => {
                let mut b = TestBatch::new();
                for t in ints(fields[1]) {
                    b = b.timer("k", t, b"");
                }
                if fields[2] != "-" {
                    for m in fields[2].split(',') {
                        let (ts, payload) = m.split_once(':').expect("ts:hex");
                        b = b.message("k", "in", ts.parse().expect("ts"), &unhex(payload));
                    }
                }
                if let Some(s) = &state {
                    b = b.state("k", s);
                }
                pending = Some(b);
            }
            "out" => {
                let batch = pending.take().expect("an in line before each out line");
                let resp = process(windows(&case), &init, &batch).expect("the batch succeeds");
                assert_eq!(resp.keys.len(), 1);
                let k = &resp.keys[0];
                assert_eq!(k.error, None);
                let st = match &k.state {
                    StateChange::Keep => "keep".to_string(),
                    StateChange::Delete => {
                        state = None;
                        "delete".to_string()
                    }
                    StateChange::Replace(s) => {
                        state = Some(s.clone());
                        hex(s)
                    }
                };
                let emits: Vec<String> = k
                    .emits
                    .iter()
                    .map(|e| {
                        let ts = e.event_ts.map_or("-".to_string(), |t| t.to_string());
                        let parents = e.parents.as_deref().map_or("-".to_string(), join);
                        format!("{}/{}/{}/{}", e.stream, ts, parents, hex(&e.payload))
                    })
                    .collect();
                let emits = if emits.is_empty() { "-".to_string() } else { emits.join(";") };
                let set: Vec<i64> = k.timers_set.iter().map(|t| t.trigger_ts).collect();
                let got = format!("out {} {} {} {}", st, emits, join(&set), join(&k.timers_cancel));
                assert_eq!(got, line, "case {} (line {})", case[0], n + 1);
                calls += 1;
            }
            other => panic!("line {}: unknown record {}", n + 1, other),
        }
    }
    assert!(cases >= 5 && calls >= 15, "the golden file has {} cases, {} calls", cases, calls);
}
