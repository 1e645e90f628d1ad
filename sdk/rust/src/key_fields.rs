//! The group_by key as typed fields: the port of the Go SDK's `ParseKey`
//! (sdk/go/state_key.go, sdk/JOINS.md), with the same results and the same
//! error texts, so that a guest behaves alike in every language.

use std::fmt;

/// Why a key text cannot be read as the group_by fields asked for; its
/// text is the Go SDK's `*KeyError` text byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    /// The key text (`""` for the unkeyed key).
    pub key: String,
    /// The group_by field concerned, or "" when the key as a whole is wrong.
    pub field: String,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for KeyError {
    /// `key ["o-17",3]: field "n": msg` or `key ...: msg`, as Go.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "key {}: {}", self.key, self.msg)
        } else {
            write!(
                f,
                "key {}: field {}: {}",
                self.key,
                go_quote(&self.field),
                self.msg
            )
        }
    }
}

impl std::error::Error for KeyError {}

/// The values of a computation's group_by fields decoded from the key
/// text the host renders (a compact JSON array in group_by order); made by
/// [`parse_key`]. Every accessor fails with a [`KeyError`] naming the key
/// and the field rather than guessing a value.
#[derive(Debug, Clone)]
pub struct KeyFields<'k> {
    key: &'k str,
    names: Vec<String>,
    values: Vec<&'k str>,
}

/// Decodes `key` ([`crate::Key::key`]) as the values of the group_by fields
/// `names`, in the pipeline's group_by order. It fails when the key is not
/// a JSON array of exactly `names.len()` values; the unkeyed key "" is
/// accepted only with no names. Same rules and texts as Go's `ParseKey`.
pub fn parse_key<'k>(key: &'k str, names: &[&str]) -> Result<KeyFields<'k>, KeyError> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    if key.is_empty() {
        if !names.is_empty() {
            return Err(KeyError {
                key: "\"\"".into(),
                field: String::new(),
                msg: format!(
                    "the key is empty (an unkeyed computation), expected {} group_by fields",
                    names.len()
                ),
            });
        }
        return Ok(KeyFields {
            key,
            names,
            values: Vec::new(),
        });
    }
    let values = match split_array(key.as_bytes()) {
        Some(v) => v,
        None => {
            return Err(KeyError {
                key: key.into(),
                field: String::new(),
                msg: "not a JSON array of group_by values".into(),
            })
        }
    };
    if values.len() != names.len() {
        return Err(KeyError {
            key: key.into(),
            field: String::new(),
            msg: format!(
                "has {} values, expected {} (group_by {})",
                values.len(),
                names.len(),
                go_quote_list(&names)
            ),
        });
    }
    let values = values.into_iter().map(|(a, b)| &key[a..b]).collect();
    Ok(KeyFields { key, names, values })
}

impl<'k> KeyFields<'k> {
    fn err(&self, field: &str, msg: String) -> KeyError {
        KeyError {
            key: self.key.into(),
            field: field.into(),
            msg,
        }
    }

    /// The field's value as JSON text, as the key holds it.
    pub fn raw(&self, name: &str) -> Result<&'k str, KeyError> {
        match self.names.iter().position(|n| n == name) {
            Some(i) => Ok(self.values[i]),
            None => Err(self.err(
                name,
                format!(
                    "not a group_by field (fields: {})",
                    go_quote_list(&self.names)
                ),
            )),
        }
    }

    /// A text field; null is an error.
    pub fn string(&self, name: &str) -> Result<String, KeyError> {
        let raw = self.raw(name)?;
        if raw == "null" {
            return Err(self.err(name, "expected a string, got null".into()));
        }
        match raw.as_bytes()[0] {
            b'"' => Ok(unquote(raw)),
            _ => Err(self.err(name, format!("expected a string, got {}", raw))),
        }
    }

    /// The text of a number as Go's json.Number holds it: a number
    /// literal, a string holding a valid number, or "" for null.
    fn number(&self, name: &str, want: &str) -> Result<String, KeyError> {
        let raw = self.raw(name)?;
        let b = raw.as_bytes()[0];
        if raw == "null" {
            Ok(String::new())
        } else if b == b'-' || b.is_ascii_digit() {
            Ok(raw.to_string())
        } else if b == b'"' {
            let s = unquote(raw);
            if valid_number(s.as_bytes()) {
                Ok(s)
            } else {
                Err(self.err(name, format!("expected {}, got {}", want, raw)))
            }
        } else {
            Err(self.err(name, format!("expected {}, got {}", want, raw)))
        }
    }

    /// An integer field that fits an i64 (the host writes integral numbers
    /// exactly); a string holding an integer is accepted, as in Go.
    pub fn int(&self, name: &str) -> Result<i64, KeyError> {
        let n = self.number(name, "an integer")?;
        let ok = !n.is_empty() && !n.starts_with('+');
        match n.parse::<i64>() {
            Ok(i) if ok => Ok(i),
            _ => Err(self.err(name, format!("expected an int64 integer, got {}", n))),
        }
    }

    /// A number field that fits an f64 (beyond its range is an error).
    pub fn float(&self, name: &str) -> Result<f64, KeyError> {
        let n = self.number(name, "a number")?;
        match n.parse::<f64>() {
            Ok(f) if !n.is_empty() && f.is_finite() => Ok(f),
            _ => Err(self.err(name, format!("expected a float64 number, got {}", n))),
        }
    }

    /// A boolean field; null is an error.
    pub fn bool(&self, name: &str) -> Result<bool, KeyError> {
        match self.raw(name)? {
            "true" => Ok(true),
            "false" => Ok(false),
            "null" => Err(self.err(name, "expected a boolean, got null".into())),
            raw => Err(self.err(name, format!("expected a boolean, got {}", raw))),
        }
    }
}

/// Go's `maxNestingDepth` of encoding/json.
const MAX_DEPTH: usize = 10000;

fn ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The byte ranges of the elements of the JSON array `s` (trimmed of
/// white space), or None when `s` is not valid JSON or not an array
/// (null included, as Go leaves the slice nil).
fn split_array(s: &[u8]) -> Option<Vec<(usize, usize)>> {
    let i = ws(s, 0);
    if i >= s.len() || s[i] != b'[' {
        // Validity does not matter: either way it is not an array.
        return None;
    }
    let mut out = Vec::new();
    let mut j = ws(s, i + 1);
    if j < s.len() && s[j] == b']' {
        j += 1;
    } else {
        loop {
            let end = value(s, j, 2)?;
            out.push((j, end));
            j = ws(s, end);
            match s.get(j) {
                Some(b',') => j = ws(s, j + 1),
                Some(b']') => {
                    j += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if ws(s, j) != s.len() {
        return None;
    }
    Some(out)
}

/// The end of the JSON value starting at `i`, iteratively (no recursion,
/// so that deep nesting cannot exhaust a guest's stack); `depth` counts the
/// containers already open.
fn value(s: &[u8], i: usize, depth: usize) -> Option<usize> {
    // Each open container: true for an object.
    let mut stack: Vec<bool> = Vec::new();
    let mut i = i;
    loop {
        // A value at i.
        match *s.get(i)? {
            b'{' | b'[' => {
                let obj = s[i] == b'{';
                if depth + stack.len() > MAX_DEPTH {
                    return None;
                }
                stack.push(obj);
                i = ws(s, i + 1);
                let close = if obj { b'}' } else { b']' };
                if s.get(i) == Some(&close) {
                    stack.pop();
                    i += 1;
                } else {
                    if obj {
                        i = member_key(s, i)?;
                    }
                    continue;
                }
            }
            b'"' => i = string_end(s, i)?,
            b't' => i = lit(s, i, b"true")?,
            b'f' => i = lit(s, i, b"false")?,
            b'n' => i = lit(s, i, b"null")?,
            _ => i = number_end(s, i)?,
        }
        // After a value: close containers or go to the next element.
        loop {
            let obj = match stack.last() {
                None => return Some(i),
                Some(&o) => o,
            };
            i = ws(s, i);
            match *s.get(i)? {
                b',' => {
                    i = ws(s, i + 1);
                    if obj {
                        i = member_key(s, i)?;
                    }
                    break;
                }
                b'}' if obj => {
                    stack.pop();
                    i += 1;
                }
                b']' if !obj => {
                    stack.pop();
                    i += 1;
                }
                _ => return None,
            }
        }
    }
}

/// Reads `"name" :` at i and returns where the value starts.
fn member_key(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let i = ws(s, string_end(s, i)?);
    if s.get(i) != Some(&b':') {
        return None;
    }
    Some(ws(s, i + 1))
}

fn lit(s: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    if s.len() >= i + word.len() && &s[i..i + word.len()] == word {
        Some(i + word.len())
    } else {
        None
    }
}

fn string_end(s: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *s.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *s.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let h = s.get(i + 2..i + 6)?;
                    if !h.iter().all(|c| c.is_ascii_hexdigit()) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
}

fn digits(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The end of the JSON number at i, or None.
fn number_end(s: &[u8], mut i: usize) -> Option<usize> {
    if s.get(i) == Some(&b'-') {
        i += 1;
    }
    match *s.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(s, i),
        _ => return None,
    }
    if s.get(i) == Some(&b'.') {
        let j = digits(s, i + 1);
        if j == i + 1 {
            return None;
        }
        i = j;
    }
    if matches!(s.get(i), Some(b'e') | Some(b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        let j = digits(s, i);
        if j == i {
            return None;
        }
        i = j;
    }
    Some(i)
}

/// Whether s is exactly one JSON number (Go's isValidNumber).
fn valid_number(s: &[u8]) -> bool {
    !s.is_empty() && number_end(s, 0) == Some(s.len())
}

fn hex4(s: &[u8]) -> Option<u32> {
    if s.len() < 6 || s[0] != b'\\' || s[1] != b'u' {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(&s[2..6]).ok()?, 16).ok()
}

/// The text of a valid JSON string literal, as Go's encoding/json decodes
/// it: a lone or mismatched surrogate escape becomes U+FFFD.
fn unquote(raw: &str) -> String {
    let s = &raw.as_bytes()[1..raw.len() - 1];
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut start = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(&raw[1 + start..1 + i]);
        let c = s[i + 1];
        i += 2;
        match c {
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let r = hex4(&s[i - 2..]).unwrap_or(0xfffd);
                i += 4;
                let mut ch = char::from_u32(r);
                if (0xd800..0xe000).contains(&r) {
                    ch = None;
                    if r < 0xdc00 {
                        if let Some(r2) = hex4(&s[i..]) {
                            if (0xdc00..0xe000).contains(&r2) {
                                ch = char::from_u32(0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00));
                                i += 6;
                            }
                        }
                    }
                }
                out.push(ch.unwrap_or('\u{fffd}'));
            }
            other => out.push(other as char),
        }
        start = i;
    }
    out.push_str(&raw[1 + start..1 + s.len()]);
    out
}

/// Go's strconv.Quote for the texts a group_by field name can hold:
/// printable characters as they are, the rest escaped as Go does for ASCII
/// (`\n`, `\x00`) and as `\u`/`\U` for other non-printable characters that
/// Rust can recognise (controls; Go's wider Unicode print table is not
/// reproduced).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a []string: `["a" "b"]`.
fn go_quote_list(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| go_quote(n)).collect();
    format!("[{}]", q.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_fields() {
        let kf = parse_key(
            r#"["o-17",3,-2.5,true,null,{"a":[1]}]"#,
            &["id", "n", "f", "b", "z", "o"],
        )
        .unwrap();
        assert_eq!(kf.string("id").unwrap(), "o-17");
        assert_eq!(kf.int("n").unwrap(), 3);
        assert_eq!(kf.float("f").unwrap(), -2.5);
        assert!(kf.bool("b").unwrap());
        assert_eq!(kf.raw("o").unwrap(), r#"{"a":[1]}"#);
        assert_eq!(
            kf.int("id").unwrap_err().to_string(),
            r#"key ["o-17",3,-2.5,true,null,{"a":[1]}]: field "id": expected an integer, got "o-17""#
        );
        assert_eq!(
            parse_key("[1]", &["a", "b"]).unwrap_err().to_string(),
            r#"key [1]: has 1 values, expected 2 (group_by ["a" "b"])"#
        );
        assert_eq!(
            parse_key("", &["a"]).unwrap_err().to_string(),
            r#"key "": the key is empty (an unkeyed computation), expected 1 group_by fields"#
        );
        assert_eq!(
            unquote(r#""\ud83d\ude00\ud800x\u00e9""#),
            "\u{1f600}\u{fffd}x\u{e9}"
        );
    }
}
