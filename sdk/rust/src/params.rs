use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::batch::Kind;

/// A parameter value from the pipeline spec, as the init envelope carries
/// it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer (int64).
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A text string.
    Text(String),
    /// A byte string.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A map with text keys, sorted.
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The value's type as error messages name it: `null`, `integer`,
    /// `float`, `string`, `bytes`, `bool`, `list` or `map` (the Go SDK's
    /// words).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Text(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
        }
    }

    /// The text of a [`Value::Text`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// An integer, or a float with an integral value within int64.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            // -2^63 is exact as a float; 2^63 is the first value above.
            Value::Float(f) if f.trunc() == f && f >= -9.223_372_036_854_775_808e18 && f < 9.223_372_036_854_775_808e18 => {
                Some(f as i64)
            }
            _ => None,
        }
    }

    /// A number: a float, or an integer converted to one.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            Value::Float(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            _ => None,
        }
    }

    /// The value of a [`Value::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The bytes of a [`Value::Bytes`].
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The elements of a [`Value::List`].
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// The entries of a [`Value::Map`].
    pub fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a decoded CBOR value, refusing what the ABI's parameters
    /// cannot hold: integers outside int64, maps with non-text keys, tags.
    pub(crate) fn from_cbor(v: serde_cbor::Value, path: &str) -> Result<Value, String> {
        use serde_cbor::Value as C;
        Ok(match v {
            C::Null => Value::Null,
            C::Bool(b) => Value::Bool(b),
            C::Integer(i) => Value::Int(i64::try_from(i).map_err(|_| format!("{path}: integer {i} outside int64"))?),
            C::Float(f) => Value::Float(f),
            C::Text(s) => Value::Text(s),
            C::Bytes(b) => Value::Bytes(b),
            C::Array(items) => Value::List(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| Value::from_cbor(x, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            C::Map(m) => {
                let mut out = BTreeMap::new();
                for (k, x) in m {
                    let name = match k {
                        C::Text(s) => s,
                        other => return Err(format!("{path}: map key {other:?} is not a text string")),
                    };
                    let x = Value::from_cbor(x, &format!("{path}.{name}"))?;
                    out.insert(name, x);
                }
                Value::Map(out)
            }
            other => return Err(format!("{path}: unsupported value {other:?}")),
        })
    }
}

/// The error of a typed getter of [`Params`]: the parameter is missing or
/// has another type. Its text is the Go SDK's: `parameter "name" is
/// missing` or `parameter "name": expected integer, got string`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    name: String,
    problem: Option<String>,
}

impl ParamError {
    fn missing(name: &str) -> Self {
        ParamError { name: name.to_string(), problem: None }
    }

    pub(crate) fn new(name: &str, problem: impl Into<String>) -> Self {
        ParamError { name: name.to_string(), problem: Some(problem.into()) }
    }

    fn wrong_type(name: &str, want: &str, got: &Value) -> Self {
        ParamError::new(name, format!("expected {want}, got {}", got.type_name()))
    }

    /// The parameter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the parameter is missing (rather than of the wrong type).
    pub fn is_missing(&self) -> bool {
        self.problem.is_none()
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            None => write!(f, "parameter {} is missing", go_quote(&self.name)),
            Some(p) => write!(f, "parameter {}: {}", go_quote(&self.name), p),
        }
    }
}

impl std::error::Error for ParamError {}

/// The computation's parameters from the pipeline spec, and what the host
/// says about the instance: passed to
/// [`Computation::init`](crate::Computation::init).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub(crate) computation: String,
    pub(crate) kind: Kind,
    pub(crate) partition: u64,
    pub(crate) output_streams: Vec<String>,
    pub(crate) values: BTreeMap<String, Value>,
}

impl Params {
    /// The computation's name in the pipeline spec.
    pub fn computation(&self) -> &str {
        &self.computation
    }

    /// The computation's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The computation partition the instance is started for.
    pub fn partition(&self) -> u64 {
        self.partition
    }

    /// The computation's declared output streams, in the spec's order.
    pub fn output_streams(&self) -> &[String] {
        &self.output_streams
    }

    /// The names of all parameters, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Whether the parameter is set (even to null).
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The parameter's raw value.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    fn require(&self, name: &str) -> Result<&Value, ParamError> {
        self.values.get(name).ok_or_else(|| ParamError::missing(name))
    }

    /// A text parameter.
    pub fn str(&self, name: &str) -> Result<&str, ParamError> {
        let v = self.require(name)?;
        v.as_str().ok_or_else(|| ParamError::wrong_type(name, "string", v))
    }

    /// An integer parameter; a float with an integral value counts.
    pub fn int(&self, name: &str) -> Result<i64, ParamError> {
        let v = self.require(name)?;
        v.as_int().ok_or_else(|| ParamError::wrong_type(name, "integer", v))
    }

    /// A number parameter; an integer counts.
    pub fn float(&self, name: &str) -> Result<f64, ParamError> {
        let v = self.require(name)?;
        v.as_float().ok_or_else(|| ParamError::wrong_type(name, "number", v))
    }

    /// A boolean parameter.
    pub fn bool(&self, name: &str) -> Result<bool, ParamError> {
        let v = self.require(name)?;
        v.as_bool().ok_or_else(|| ParamError::wrong_type(name, "bool", v))
    }

    /// A byte-string parameter.
    pub fn bytes(&self, name: &str) -> Result<&[u8], ParamError> {
        let v = self.require(name)?;
        v.as_bytes().ok_or_else(|| ParamError::wrong_type(name, "bytes", v))
    }

    /// A duration parameter, written as a Go duration string (`"250ms"`,
    /// `"1h30m"`, `"1.5s"`) or as an integer number of nanoseconds, as the
    /// Go SDK reads it. A negative duration is an error.
    pub fn duration(&self, name: &str) -> Result<Duration, ParamError> {
        let v = self.require(name)?;
        let nanos = match v {
            Value::Text(s) => parse_go_duration(s).map_err(|e| ParamError::new(name, e))?,
            Value::Int(n) => *n,
            _ => return Err(ParamError::wrong_type(name, "duration", v)),
        };
        u64::try_from(nanos)
            .map(Duration::from_nanos)
            .map_err(|_| ParamError::new(name, format!("negative duration {}", display_value(v))))
    }

    /// A parameter that is a list of text.
    pub fn strings(&self, name: &str) -> Result<Vec<&str>, ParamError> {
        let v = self.require(name)?;
        let list = v.as_list().ok_or_else(|| ParamError::wrong_type(name, "list of strings", v))?;
        list.iter()
            .enumerate()
            .map(|(i, e)| {
                e.as_str().ok_or_else(|| {
                    ParamError::new(name, format!("element {i}: expected string, got {}", e.type_name()))
                })
            })
            .collect()
    }

    /// A parameter that is a list.
    pub fn list(&self, name: &str) -> Result<&[Value], ParamError> {
        let v = self.require(name)?;
        v.as_list().ok_or_else(|| ParamError::wrong_type(name, "list", v))
    }

    /// A parameter that is a map.
    pub fn map(&self, name: &str) -> Result<&BTreeMap<String, Value>, ParamError> {
        let v = self.require(name)?;
        v.as_map().ok_or_else(|| ParamError::wrong_type(name, "map", v))
    }
}

fn display_value(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        other => other.type_name().to_string(),
    }
}

/// Parses a duration the way Go's `time.ParseDuration` does, into
/// nanoseconds: a signed sequence of decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), such
/// as `"300ms"`, `"-1.5h"` or `"2h45m"`; `"0"` alone needs no unit. The
/// error texts are Go's.
pub(crate) fn parse_go_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(text));
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        // The integer part.
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, rest) = s.split_at(int_len);
        s = rest;
        let mut value: u64 = 0;
        for d in int_digits.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
                .filter(|&v| v <= 1 << 63)
                .ok_or_else(invalid)?;
        }
        // The fraction.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut frac_len = 0;
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for d in s[..frac_len].bytes() {
                if overflow {
                    continue;
                }
                match frac.checked_mul(10).and_then(|v| v.checked_add(u64::from(d - b'0'))) {
                    Some(v) if v <= 1 << 63 => {
                        frac = v;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            s = &s[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }
        // The unit.
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", time_quote(text)));
        }
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let per: u64 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {} in duration {}", time_quote(unit), time_quote(text))),
        };
        if value > (1 << 63) / per {
            return Err(invalid());
        }
        value *= per;
        if frac > 0 {
            value += (frac as f64 * (per as f64 / scale)) as u64;
            if value > 1 << 63 {
                return Err(invalid());
            }
        }
        total = total.checked_add(value).filter(|&v| v <= 1 << 63).ok_or_else(invalid)?;
    }
    if negative {
        Ok((total as i64).wrapping_neg())
    } else if total > i64::MAX as u64 {
        Err(invalid())
    } else {
        Ok(total as i64)
    }
}

/// Quotes text the way Go's time package does in its errors: every byte
/// of a control or non-ASCII character as `\x..`.
fn time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out.push('"');
    out
}

/// Quotes text the way Go's `strconv.Quote` does for the texts errors
/// carry: printable ASCII as itself, the usual backslash escapes, other
/// control characters as `\x..`, and non-ASCII characters as themselves
/// unless they are controls or spaces.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_ascii() => out.push(c),
            c if c.is_control() || c.is_whitespace() || c == '\u{feff}' || c == '\u{ad}' => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(values: &[(&str, Value)]) -> Params {
        Params {
            computation: "c".into(),
            kind: Kind::Transform,
            partition: 0,
            output_streams: vec![],
            values: values.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        }
    }

    #[test]
    fn typed_getters_follow_the_go_sdk() {
        let p = params(&[
            ("n", Value::Int(-3)),
            ("f", Value::Float(2.0)),
            ("half", Value::Float(2.5)),
            ("s", Value::Text("x".into())),
            ("b", Value::Bool(true)),
            ("tags", Value::List(vec![Value::Text("a".into()), Value::Int(1)])),
        ]);
        assert_eq!(p.int("n"), Ok(-3));
        assert_eq!(p.int("f"), Ok(2), "an integral float counts as an integer");
        assert_eq!(p.int("half").unwrap_err().to_string(), "parameter \"half\": expected integer, got float");
        assert_eq!(p.float("n"), Ok(-3.0));
        assert_eq!(p.str("s"), Ok("x"));
        assert_eq!(p.bool("b"), Ok(true));
        assert_eq!(p.str("nope").unwrap_err().to_string(), "parameter \"nope\" is missing");
        assert!(p.str("nope").unwrap_err().is_missing());
        assert_eq!(p.str("n").unwrap_err().to_string(), "parameter \"n\": expected string, got integer");
        assert_eq!(
            p.strings("tags").unwrap_err().to_string(),
            "parameter \"tags\": element 1: expected string, got integer"
        );
        assert_eq!(p.names().collect::<Vec<_>>(), ["b", "f", "half", "n", "s", "tags"]);
    }

    #[test]
    fn durations_read_like_go() {
        let cases: &[(&str, Result<i64, &str>)] = &[
            ("0", Ok(0)),
            ("5m", Ok(300_000_000_000)),
            ("1h30m", Ok(5_400_000_000_000)),
            ("1.5s", Ok(1_500_000_000)),
            (".5ms", Ok(500_000)),
            ("250us", Ok(250_000)),
            ("250µs", Ok(250_000)),
            ("-2ns", Ok(-2)),
            ("+3s", Ok(3_000_000_000)),
            ("2562047h47m16.854775807s", Ok(i64::MAX)),
            ("-2562047h47m16.854775808s", Ok(i64::MIN)),
            ("2562047h47m16.854775808s", Err("time: invalid duration \"2562047h47m16.854775808s\"")),
            ("", Err("time: invalid duration \"\"")),
            ("-", Err("time: invalid duration \"-\"")),
            (".s", Err("time: invalid duration \".s\"")),
            ("5", Err("time: missing unit in duration \"5\"")),
            ("5d", Err("time: unknown unit \"d\" in duration \"5d\"")),
            ("1é", Err("time: unknown unit \"\\xc3\\xa9\" in duration \"1\\xc3\\xa9\"")),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), want.map_err(String::from), "{text:?}");
        }
    }

    #[test]
    fn duration_getter_takes_text_or_nanoseconds() {
        let p = params(&[("a", Value::Text("1m".into())), ("b", Value::Int(7)), ("c", Value::Text("-1s".into()))]);
        assert_eq!(p.duration("a"), Ok(Duration::from_secs(60)));
        assert_eq!(p.duration("b"), Ok(Duration::from_nanos(7)));
        assert_eq!(p.duration("c").unwrap_err().to_string(), "parameter \"c\": negative duration -1s");
    }

    #[test]
    fn converts_cbor_values() {
        use serde_cbor::Value as C;
        let mut m = BTreeMap::new();
        m.insert(C::Text("k".into()), C::Array(vec![C::Integer(1), C::Null]));
        assert_eq!(
            Value::from_cbor(C::Map(m), "p"),
            Ok(Value::Map([("k".to_string(), Value::List(vec![Value::Int(1), Value::Null]))].into_iter().collect()))
        );
        assert!(Value::from_cbor(C::Integer(1 << 63), "p").unwrap_err().contains("outside int64"));
        let mut bad = BTreeMap::new();
        bad.insert(C::Integer(1), C::Null);
        assert!(Value::from_cbor(C::Map(bad), "p").unwrap_err().contains("not a text string"));
    }

    #[test]
    fn quotes_like_strconv_quote() {
        assert_eq!(go_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("日本\u{a0}"), "\"日本\\u00a0\"");
    }
}
