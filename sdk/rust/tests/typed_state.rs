//! Typed state cells: the Go SDK's golden blobs (testdata/typed_state.golden,
//! written by sdk/go TestTypedStateGolden) are reproduced byte for byte, and
//! the cells behave as in Go. The decoder table is the same as sdk/go
//! TestDecodeTypedStateErrors.

use std::collections::BTreeMap;

use flowhost::testing::{process, StateChange, TestBatch, TestInit};
use flowhost::{decode_typed_state, Batch, Cbor, Computation, Error, Json, Key, RawCell, StateError, TypedState};

/// Runs `f` over the key "k" of a one-message batch holding `state`.
struct With<F>(F);

impl<F: FnMut(&mut Key) -> Result<(), Error>> Computation for With<F> {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let f = &mut self.0;
        batch.for_each_key(|key| f(key))
    }
}

fn run<F: FnMut(&mut Key) -> Result<(), Error> + 'static>(state: Option<&[u8]>, f: F) -> flowhost::testing::TestKey {
    let mut b = TestBatch::new();
    if let Some(s) = state {
        b = b.state("k", s);
    }
    b = b.message("k", "in", 1, b"x");
    let resp = process(With(f), &TestInit::new().output("out"), &b).unwrap();
    resp.key("k").cloned().unwrap_or(flowhost::testing::TestKey {
        key: "k".into(),
        emits: vec![],
        error: None,
        state: StateChange::Keep,
        timers_set: vec![],
        timers_cancel: vec![],
    })
}

fn replaced(k: &flowhost::testing::TestKey) -> Vec<u8> {
    match &k.state {
        StateChange::Replace(s) => s.clone(),
        other => panic!("expected a replaced state, got {other:?} (error {:?})", k.error),
    }
}

fn golden() -> BTreeMap<String, Vec<u8>> {
    let text = include_str!("testdata/typed_state.golden");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (name.to_string(), bytes)
        })
        .collect()
}

#[test]
fn golden_blobs_match_the_go_sdk() {
    let want = golden();
    let cases: Vec<(&str, fn(&mut Key) -> Result<(), Error>)> = vec![
        ("value_json", |k| Ok(TypedState::load(k)?.value("total", Json).set(&42i64)?)),
        ("value_cbor", |k| Ok(TypedState::load(k)?.value("name", Cbor).set(&"ada".to_string())?)),
        ("list_json", |k| {
            let mut st = TypedState::load(k)?;
            let mut l = st.list::<String, _>("items", Json);
            for s in ["a", "b", ""] {
                l.append(&s.to_string())?;
            }
            Ok(())
        }),
        ("map_cbor", |k| {
            let mut st = TypedState::load(k)?;
            let mut m = st.map::<i64, _>("seen", Cbor);
            m.put("zz", &1)?;
            m.put("b", &-2)?;
            m.put("aa", &300)?;
            m.put("", &0)?;
            m.delete("b")?;
            Ok(())
        }),
        ("mixed", |k| {
            let mut st = TypedState::load(k)?;
            st.value("total", Json).set(&7i64)?;
            st.list("ts", Cbor).append(&1_700_000_000_000_000_000i64)?;
            st.map("tags", Json).put("env", &"prod".to_string())?;
            st.value("a", Json).set(&true)?;
            st.value("gone", Json).set(&1i64)?;
            st.value::<i64, _>("gone", Json).clear();
            Ok(())
        }),
    ];
    assert_eq!(cases.len(), want.len(), "every golden case is reproduced");
    for (name, f) in cases {
        let got = replaced(&run(None, f));
        assert_eq!(&got, want.get(name).unwrap_or_else(|| panic!("no golden blob {name}")), "case {name}");
    }
}

#[test]
fn cells_round_trip_across_batches() {
    let first = run(None, |k| {
        let mut st = TypedState::load(k)?;
        st.value("total", Json).set(&42i64)?;
        st.list("items", Cbor).append(&"a".to_string())?;
        let mut m = st.map("m", Json);
        m.put("z", &1.5f64)?;
        m.put("a", &2.0f64)?;
        st.save()?;
        st.key().emit("out", "saved");
        Ok(())
    });
    let blob = replaced(&first);
    let cells = decode_typed_state(&blob).unwrap();
    assert_eq!(cells["total"], RawCell::Value(b"42".to_vec()));
    run(Some(&blob), |k| {
        let mut st = TypedState::load(k)?;
        assert_eq!(st.value::<i64, _>("total", Json).get()?, Some(42));
        assert_eq!(st.list::<String, _>("items", Cbor).all()?, vec!["a".to_string()]);
        let m = st.map::<f64, _>("m", Json);
        assert_eq!(m.keys()?, vec!["a".to_string(), "z".to_string()]);
        assert_eq!(m.get("z")?, Some(1.5));
        assert_eq!(m.get("nope")?, None);
        Ok(())
    });
}

#[test]
fn wrong_kind_names_the_cell() {
    let blob = replaced(&run(None, |k| Ok(TypedState::load(k)?.list("l", Json).append(&1i64)?)));
    run(Some(&blob), |k| {
        let mut st = TypedState::load(k)?;
        let err = st.value::<i64, _>("l", Json).get().unwrap_err();
        assert_eq!(err.to_string(), r#"state cell "l": is a list, used as a value"#);
        let err = st.list::<String, _>("l", Json).all().unwrap_err();
        assert!(err.to_string().starts_with(r#"state cell "l": element 0: cannot decode"#), "{err}");
        Ok(())
    });
    let k = run(Some(b"17"), |k| {
        let err = TypedState::load(k).err().unwrap();
        assert_eq!(err.to_string(), "typed state: byte 0: expected the state to be a map of cells, got a negative integer");
        Err(err.into())
    });
    assert!(k.error.is_some());
}

#[test]
fn quota_keeps_the_state_and_unsaved_changes_fail_the_key() {
    let small = replaced(&run(None, |k| Ok(TypedState::load(k)?.value("s", Json).set(&"small".to_string())?)));
    let big = "x".repeat(100);
    let b2 = big.clone();
    let k = run(Some(&small.clone()), move |k| {
        let mut st = TypedState::load(k)?.with_limit(50);
        st.value("s", Json).set(&b2)?;
        let err = st.save().unwrap_err();
        assert_eq!(err, StateError::Quota { key: "k".into(), size: 107, limit: 50 });
        assert_eq!(err.to_string(), r#"key "k": typed state of 107 bytes exceeds the limit of 50 bytes; its state stays as it was"#);
        st.discard()?;
        assert_eq!(st.value::<String, _>("s", Json).get()?, Some("small".to_string()));
        Ok(())
    });
    assert_eq!(k.state, StateChange::Keep);
    let k = run(Some(&small), move |k| {
        let mut st = TypedState::load(k)?.with_limit(50);
        st.value("s", Json).set(&big)?;
        Ok(()) // dropped unsaved: the save fails, and so does the key
    });
    assert!(k.error.unwrap().contains("exceeds the limit of 50 bytes"));
}

#[test]
fn clearing_every_cell_deletes_the_state() {
    let blob = replaced(&run(None, |k| Ok(TypedState::load(k)?.value("a", Json).set(&1i64)?)));
    let k = run(Some(&blob), |k| {
        TypedState::load(k)?.clear("a");
        Ok(())
    });
    assert_eq!(k.state, StateChange::Delete);
}

#[test]
fn json_matches_go_text() {
    use flowhost::Codec;
    let mut m = BTreeMap::new();
    m.insert("b".to_string(), 1.5f64);
    m.insert("a<&>".to_string(), 1e21);
    m.insert("c".to_string(), 1e-7);
    assert_eq!(String::from_utf8(Json.encode(&m).unwrap()).unwrap(), r#"{"a\u003c\u0026\u003e":1e+21,"b":1.5,"c":1e-7}"#);
    let back: BTreeMap<String, f64> = Json.decode(br#" {"a\u003c\u0026\u003e":1e+21, "b":1.5,"c":1e-7} "#).unwrap();
    assert_eq!(back, m);
    assert!(Json.decode::<i64>(b"1 2").is_err());
}

#[test]
fn decoder_refuses_bad_blobs_naming_the_byte() {
    for (blob, want) in [
        (&b"\xa1\x61\x61\x80"[..], "typed state: byte 3: cell \"a\": an empty list is not stored (a cell exists only while it holds something)"),
        (b"\xa2\x61\x61\x40\x61\x61\x40", "typed state: byte 4: cell \"a\": the cell appears twice"),
        (b"\xbf", "typed state: byte 0: indefinite lengths are not canonical"),
        (b"\xa1\x61\x61\x01", "typed state: byte 3: cell \"a\": expected a cell (a byte string, an array or a map), got an unsigned integer"),
        (b"\xa0\x00", "typed state: byte 1: 1 bytes after the map of cells"),
        (b"\xa1\x61\x61\xa1\x61\x6b\x01", "typed state: byte 6: cell \"a\": expected map entry \"k\" to be a byte string, got an unsigned integer"),
        (b"\xa1\x61\x61\x5a\xff\xff\xff\xff", "typed state: byte 3: cell \"a\": a length of 4294967295 exceeds the 0 bytes left"),
    ] {
        assert_eq!(decode_typed_state(blob).unwrap_err().to_string(), want);
    }
}

#[test]
fn json_numbers_follow_the_grammar() {
    use flowhost::Codec;
    for bad in ["+1", "01", "1.", ".5", "1e", "--1", "1e+"] {
        assert!(Json.decode::<f64>(bad.as_bytes()).is_err(), "{bad}");
    }
    for (good, want) in [("0", 0.0), ("-0.5", -0.5), ("1E+2", 100.0), ("12", 12.0)] {
        assert_eq!(Json.decode::<f64>(good.as_bytes()).unwrap(), want, "{good}");
    }
}

/// The decoders never panic: every prefix and every one-byte change of the
/// golden blobs, and of some JSON texts, decodes or fails with an error.
/// (The Go decoder has the fuzz target FuzzDecodeTypedState; the offline
/// crate set has no fuzzing or property crate.)
#[test]
fn decoders_never_panic_on_damaged_input() {
    use flowhost::Codec;
    let mut inputs: Vec<Vec<u8>> = golden().into_values().collect();
    for j in [r#"{"a":[1,2.5,"x\u00e9\ud83d\ude00"],"b":null}"#, r#"[true,false,-1e-7]"#] {
        inputs.push(j.as_bytes().to_vec());
    }
    for blob in &inputs {
        for n in 0..=blob.len() {
            let _ = decode_typed_state(&blob[..n]);
            let _ = Json.decode::<serde_cbor::Value>(&blob[..n]);
        }
        for i in 0..blob.len() {
            for x in [0x00u8, 0x1f, 0x20, 0x5f, 0x80, 0xbf, 0xff] {
                let mut b = blob.clone();
                b[i] ^= x;
                if let Ok(cells) = decode_typed_state(&b) {
                    assert!(cells.values().all(|c| match c {
                        RawCell::List(l) => !l.is_empty(),
                        RawCell::Map(m) => !m.is_empty(),
                        RawCell::Value(_) => true,
                    }));
                }
                let _ = Json.decode::<serde_cbor::Value>(&b);
            }
        }
    }
}

/// A computation that takes its typed state limit from the parameter
/// max_state_bytes_per_key, as a guest should to match the tenant quota.
struct Limited {
    limit: usize,
}

impl Computation for Limited {
    fn init(&mut self, params: &flowhost::Params) -> Result<(), Error> {
        self.limit = TypedState::limit_param(params)?.unwrap_or(flowhost::ABI_MAX_STATE_BYTES);
        Ok(())
    }
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let limit = self.limit;
        batch.for_each_key(|key| {
            let mut st = TypedState::load(key)?.with_limit(limit);
            st.value("s", Json).set(&"x".repeat(100))?;
            Ok(st.save()?)
        })
    }
}

#[test]
fn limit_from_the_parameter() {
    use flowhost::testing::Value;
    let b = TestBatch::new().message("k", "in", 1, b"x");
    let init = TestInit::new().output("out").param(flowhost::MAX_STATE_PARAM, Value::Integer(50));
    let resp = process(Limited { limit: 0 }, &init, &b).unwrap();
    let err = resp.key("k").unwrap().error.clone().unwrap();
    assert_eq!(err, r#"key "k": typed state of 107 bytes exceeds the limit of 50 bytes; its state stays as it was"#);
    let resp = process(Limited { limit: 0 }, &TestInit::new().output("out"), &b).unwrap();
    assert!(matches!(resp.key("k").unwrap().state, StateChange::Replace(_)));
    let bad = TestInit::new().param(flowhost::MAX_STATE_PARAM, Value::Integer(0));
    let err = process(Limited { limit: 0 }, &bad, &b).err().unwrap();
    assert!(err.to_string().contains("expected a positive number of bytes, got 0"), "{err}");
}
