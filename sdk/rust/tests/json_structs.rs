//! The Json codec writes structs byte for byte as Go's encoding/json:
//! ../testdata/json_structs.golden is the Go SDK's output for the same
//! values (sdk/rust json_structs_test.go, TestJSONStructsMatchGo).

use std::collections::BTreeMap;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use flowhost::{Codec, Json};

#[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
struct Empty {}

// Not in name order on purpose: Go keeps declaration order.
#[derive(Serialize, Deserialize, Debug, PartialEq, Default)]
struct Flat {
    zeta: String,
    alpha: i64,
    mid: bool,
    #[serde(rename = "a&b")]
    amp: String,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Numbers {
    i: i64,
    min: i64,
    u: u64,
    f: f64,
    small: f64,
    tiny: f64,
    big: f64,
    plain: f64,
    neg: f64,
    zero: f64,
    neg_zero: f64,
    f32: f32,
    f32_big: f32,
    third: f64,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Inner {
    b: i64,
    a: Option<Vec<String>>,
}

/// Bytes that serialize with serialize_bytes, as Go's []byte is written.
#[derive(Debug, PartialEq)]
struct Bytes(Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

#[derive(Serialize, Debug, PartialEq)]
struct Nested {
    name: String,
    inner: Inner,
    empty: Empty,
    tags: HashMap<String, i64>,
    no_map: Option<BTreeMap<String, i64>>,
    nums: HashMap<i64, String>,
    opt: Option<i64>,
    some: Option<i64>,
    list: Vec<Inner>,
    none: Option<Vec<i64>>,
    zero: Vec<i64>,
    bytes: Bytes,
    deep: BTreeMap<String, Flat>,
}

fn golden() -> Vec<(String, String)> {
    include_str!("../testdata/json_structs.golden")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, json) = l.split_once('\t').expect("name TAB json");
            (name.to_string(), json.to_string())
        })
        .collect()
}

fn enc<T: Serialize>(v: &T) -> String {
    String::from_utf8(Json.encode(v).unwrap()).unwrap()
}

fn numbers() -> Numbers {
    Numbers {
        i: 42,
        min: i64::MIN,
        u: u64::MAX,
        f: 1.5,
        small: 1e-7,
        tiny: 5e-324,
        big: 1e21,
        plain: 1e20,
        neg: -2.5e-6,
        zero: 0.0,
        neg_zero: -0.0,
        f32: 0.1,
        f32_big: 3e38,
        third: 1.0 / 3.0,
    }
}

#[test]
fn structs_match_go_byte_for_byte() {
    let got = vec![
        ("empty", enc(&Empty {})),
        ("flat", enc(&Flat { zeta: "z".into(), alpha: -3, mid: true, amp: "&".into() })),
        (
            "escapes",
            enc(&Flat {
                zeta: "<a href=\"x\">&amp;</a>\u{2028}\u{2029}\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f} é 😀 \\ /".into(),
                ..Flat::default()
            }),
        ),
        ("numbers", enc(&numbers())),
        (
            "nested",
            enc(&Nested {
                name: "n".into(),
                inner: Inner { b: 2, a: Some(vec!["y".into(), "x".into()]) },
                empty: Empty {},
                tags: [("b".to_string(), 2), ("a".to_string(), 1), ("<".to_string(), 0)].into_iter().collect(),
                no_map: None,
                nums: [(10, "ten".to_string()), (9, "nine".to_string()), (-1, "minus".to_string())].into_iter().collect(),
                opt: None,
                some: Some(7),
                list: vec![Inner { b: 1, a: Some(vec![]) }, Inner { b: 0, a: None }],
                none: None,
                zero: vec![],
                bytes: Bytes(b"hi>\0".to_vec()),
                deep: [("k".to_string(), Flat { zeta: "deep".into(), ..Flat::default() })].into_iter().collect(),
            }),
        ),
    ];
    let want = golden();
    assert_eq!(got.len(), want.len(), "every golden case is reproduced");
    for ((name, got), (wname, want)) in got.iter().zip(&want) {
        assert_eq!(name, wname);
        assert_eq!(got, want, "case {name}");
    }
}

#[test]
fn go_structs_decode_in_any_field_order() {
    let back: Flat = Json.decode(br#"{"mid":true,"a\u0026b":"&","alpha":-3,"zeta":"z"}"#).unwrap();
    assert_eq!(back, Flat { zeta: "z".into(), alpha: -3, mid: true, amp: "&".into() });
    let n = numbers();
    let back: Numbers = Json.decode(&Json.encode(&n).unwrap()).unwrap();
    assert_eq!(back, n);
    // Integer text beyond CBOR's integers decodes as the float it is.
    assert_eq!(Json.decode::<f64>(b"100000000000000000000").unwrap(), 1e20);
    assert_eq!(Json.decode::<f64>(b"-100000000000000000000").unwrap(), -1e20);
    assert!(Json.decode::<i64>(b"100000000000000000000").is_err());
}

#[derive(Serialize)]
enum Shape {
    Dot,
    Circle(f64),
    Rect { w: i64, h: i64 },
    Pair(i64, i64),
}

#[test]
fn enums_are_written_as_serde_externally_tagged() {
    assert_eq!(enc(&Shape::Dot), r#""Dot""#);
    assert_eq!(enc(&Shape::Circle(0.5)), r#"{"Circle":0.5}"#);
    assert_eq!(enc(&Shape::Rect { w: 2, h: 1 }), r#"{"Rect":{"w":2,"h":1}}"#);
    assert_eq!(enc(&Shape::Pair(1, 2)), r#"{"Pair":[1,2]}"#);
}

#[test]
fn unencodable_values_are_errors_that_say_why() {
    assert_eq!(Json.encode(&f64::NAN).unwrap_err(), "json: unsupported value: NaN");
    assert_eq!(Json.encode(&f32::INFINITY).unwrap_err(), "json: unsupported value: inf");
    let m: BTreeMap<bool, i64> = [(true, 1)].into_iter().collect();
    assert_eq!(Json.encode(&m).unwrap_err(), "json: a map key must be text or an integer, not a bool");
    let m: BTreeMap<String, f64> = [("x".to_string(), f64::NAN)].into_iter().collect();
    assert_eq!(Json.encode(&m).unwrap_err(), r#"json: map key "x": json: unsupported value: NaN"#);
    // Two keys with the same text (an integer and a string) would be
    // ambiguous JSON; Go cannot build such a map, Rust can.
    #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
    #[serde(untagged)]
    enum K {
        I(i64),
        S(String),
    }
    let m: BTreeMap<K, i64> = [(K::I(1), 1), (K::S("1".into()), 2)].into_iter().collect();
    assert_eq!(Json.encode(&m).unwrap_err(), r#"json: map key "1" appears twice"#);
}
