//! The join helpers run natively through `flowhost::testing`: the rules of
//! sdk/JOINS.md on small cases, and bad states refused with the Go SDK's
//! exact texts. sdk/rust/join_test.go checks random inputs against the Go
//! helpers byte for byte.

use flowhost::testing::{process, StateChange, TestBatch, TestEmit, TestInit, TestTimer};
use flowhost::{Batch, Computation, EnrichJoin, Error, IntervalJoin, JoinPair};

struct Interval(IntervalJoin);

impl Computation for Interval {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let j = &self.0;
        batch.for_each_key(|k| j.process(k))
    }
}

struct Enrich(EnrichJoin);

impl Computation for Enrich {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let e = &self.0;
        batch.for_each_key(|k| e.process(k))
    }
}

fn interval() -> Interval {
    Interval(IntervalJoin::new(
        "l",
        "r",
        -10,
        10,
        |p: &JoinPair| format!("{}+{}", String::from_utf8_lossy(&p.left.payload), String::from_utf8_lossy(&p.right.payload)).into_bytes(),
        "joined",
        "expired",
    ))
}

fn enrich() -> Enrich {
    Enrich(EnrichJoin::new(
        "t",
        "e",
        |m, v| format!("{}@{}", String::from_utf8_lossy(m.payload), String::from_utf8_lossy(&v.payload)).into_bytes(),
        "out",
        "none",
    ))
}

fn init() -> TestInit {
    TestInit::new().output("joined").output("expired").output("out").output("none")
}

fn emit(stream: &str, payload: &str, event_ts: i64, parents: &[u32]) -> TestEmit {
    TestEmit { stream: stream.into(), key: String::new(), payload: payload.into(), event_ts: Some(event_ts), parents: Some(parents.to_vec()) }
}

fn timer(trigger_ts: i64, event_ts: Option<i64>) -> TestTimer {
    TestTimer { trigger_ts, event_ts, payload: Vec::new() }
}

/// The interval state of the given (side, matched, ts, id, payload).
fn state(records: &[(u8, u8, i64, &str, &str)]) -> Vec<u8> {
    let mut out = vec![1, b'I', records.len() as u8];
    for &(side, matched, ts, id, payload) in records {
        out.extend([side, matched]);
        let z = ((ts << 1) ^ (ts >> 63)) as u64;
        assert!(z < 0x80, "test helper: small ts only");
        out.push(z as u8);
        out.push(id.len() as u8);
        out.extend(id.as_bytes());
        out.push(payload.len() as u8);
        out.extend(payload.as_bytes());
    }
    out
}

#[test]
fn interval_matches_in_range_and_releases_the_hold() {
    let b = TestBatch::new().message("a", "l", 40, b"L").message("a", "r", 45, b"R").message("a", "r", 51, b"late");
    let resp = process(interval(), &init(), &b).unwrap();
    let k = resp.key("a").unwrap();
    assert_eq!(k.error, None);
    assert_eq!(k.emits, vec![emit("joined", "L+R", 45, &[0, 1])]);
    // Left expires at 40+10+1, both rights at ts+10+1; only the unmatched
    // right at 51 holds the watermark.
    assert_eq!(k.timers_set, vec![timer(51, None), timer(56, None), timer(62, Some(51))]);
    assert_eq!(k.timers_cancel, Vec::<i64>::new());
    assert_eq!(k.state, StateChange::Replace(state(&[(0, 1, 40, "m1", "L"), (1, 1, 45, "m2", "R"), (1, 0, 51, "m3", "late")])));
}

#[test]
fn interval_matches_a_held_record_and_resets_its_timer() {
    let held = state(&[(0, 0, 40, "old", "L")]);
    let b = TestBatch::new().state("a", &held).message("a", "r", 30, b"R");
    let k = process(interval(), &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.emits, vec![emit("joined", "L+R", 40, &[0])]);
    assert_eq!(k.timers_cancel, vec![51]);
    assert_eq!(k.timers_set, vec![timer(41, None), timer(51, None)]);
}

#[test]
fn interval_timer_expires_unmatched_records_only() {
    let held = state(&[(0, 0, 40, "m1", "L"), (1, 1, 41, "m2", "R"), (0, 1, 60, "m3", "keep")]);
    let b = TestBatch::new().state("a", &held).timer("a", 52, b"");
    let k = process(interval(), &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.emits, vec![emit("expired", "L", 40, &[0])]);
    assert_eq!(k.state, StateChange::Replace(state(&[(0, 1, 60, "m3", "keep")])));

    let b = TestBatch::new().state("a", &state(&[(0, 0, 40, "m1", "L")])).timer("a", 51, b"");
    let withf = Interval(interval().0.with_expired(|r| format!("{} {} {}", r.id, r.stream, r.event_ts).into_bytes()));
    let k = process(withf, &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.emits, vec![emit("expired", "m1 l 40", 40, &[0])]);
    assert_eq!(k.state, StateChange::Delete);
}

#[test]
fn interval_refuses_bad_states_with_go_texts() {
    let p = "flowhost: the key's state is not a join state: ";
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "missing version at byte 0"),
        (vec![2, b'I', 0], "unknown version 2 at byte 0"),
        (vec![1, b'X', 0], "kind 'X', want 'I' at byte 1"),
        (vec![1, 0, 0], "kind '\\x00', want 'I' at byte 1"),
        (vec![1, b'E', 0], "kind 'E', want 'I' at byte 1"),
        (vec![1, b'I'], "bad record count at byte 2"),
        (vec![1, b'I', 5], "record count larger than the state at byte 3"),
        (vec![1, b'I', 1, 2, 0], "record 0: side 2, want 0 or 1 at byte 3"),
        (vec![1, b'I', 1, 0, 7], "record 0: matched 7, want 0 or 1 at byte 4"),
        (vec![1, b'I', 1, 0, 0, 0x80], "bad ts at byte 5"),
        (vec![1, b'I', 1, 0, 0, 0, 5, b'x'], "message_id length past the end at byte 6"),
        (vec![1, b'I', 1, 0, 0, 0, 1, 0xff, 0], "message_id not UTF-8 at byte 6"),
        (vec![1, b'I', 1, 0, 0, 0, 0], "bad payload length at byte 7"),
        (vec![1, b'I', 0, 9], "trailing bytes at byte 3"),
    ];
    for (st, want) in cases {
        let b = TestBatch::new().state("a", &st).message("a", "l", 1, b"x");
        let k = process(interval(), &init(), &b).unwrap().keys.remove(0);
        assert_eq!(k.error.as_deref(), Some(format!("{p}{want}").as_str()), "state {:?}", st);
        assert!(k.emits.is_empty());
    }
}

#[test]
fn joins_refuse_other_streams() {
    let b = TestBatch::new().message("a", "l", 1, b"x").message("a", "z", 2, b"y");
    let k = process(interval(), &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.error.as_deref(), Some(r#"message m2: stream "z" is neither the left stream "l" nor the right stream "r" of the join"#));
    let k = process(enrich(), &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.error.as_deref(), Some(r#"message m1: stream "l" is neither the table stream "t" nor the events stream "e" of the join"#));
}

#[test]
fn enrich_uses_the_latest_value_and_tombstones() {
    let b = TestBatch::new()
        .message("a", "e", 5, b"e0")
        .message("a", "t", 9, b"v1")
        .message("a", "e", 1, b"e1")
        .message("a", "t", 2, b"")
        .message("a", "e", 3, b"e2")
        .message("a", "t", 4, b"v2");
    let k = process(enrich(), &init(), &b).unwrap().keys.remove(0);
    let none = TestEmit { stream: "none".into(), key: String::new(), payload: b"e0".to_vec(), event_ts: None, parents: Some(vec![0]) };
    let none2 = TestEmit { payload: b"e2".to_vec(), parents: Some(vec![4]), ..none.clone() };
    assert_eq!(k.emits, vec![none, emit("out", "e1@v1", 1, &[1, 2]), none2]);
    assert_eq!(k.state, StateChange::Replace(vec![1, b'E', 8, 2, b'm', b'6', 2, b'v', b'2']));
    assert!(k.timers_set.is_empty());

    let b = TestBatch::new().state("a", &[1, b'E', 8, 2, b'm', b'6', 2, b'v', b'2']).message("a", "e", 7, b"x").message("a", "t", 8, b"");
    let k = process(enrich(), &init(), &b).unwrap().keys.remove(0);
    assert_eq!(k.emits, vec![emit("out", "x@v2", 7, &[0])]);
    assert_eq!(k.state, StateChange::Delete);
}

#[test]
fn enrich_refuses_bad_states_with_go_texts() {
    let p = "flowhost: the key's state is not a join state: ";
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![1, b'I', 0], "kind 'I', want 'E' at byte 1"),
        (vec![1, b'E'], "bad ts at byte 2"),
        (vec![1, b'E', 0, 0, 0], "empty payload (a tombstone is no state) at byte 4"),
        (vec![1, b'E', 0, 0, 2, b'x'], "payload length past the end at byte 4"),
        (vec![1, b'E', 0, 0, 1, b'x', 0], "trailing bytes at byte 6"),
    ];
    for (st, want) in cases {
        let b = TestBatch::new().state("a", &st).message("a", "e", 1, b"x");
        let k = process(enrich(), &init(), &b).unwrap().keys.remove(0);
        assert_eq!(k.error.as_deref(), Some(format!("{p}{want}").as_str()), "state {:?}", st);
    }
}

#[test]
#[should_panic(expected = "lower <= upper")]
fn interval_refuses_reversed_bounds() {
    IntervalJoin::new("l", "r", 1, 0, |_: &JoinPair| Vec::new(), "o", "x");
}
