//! Typed state: named cells (a value, a list or a map) layered on a key's
//! one state blob, in the same encoding as the Go SDK (sdk/go
//! typed_state.go): a canonical CBOR map from cell name to cell, whose
//! CBOR type says its kind (byte string: value; array of byte strings:
//! list; map text -> byte string: map). The same operations give the same
//! bytes in both SDKs (tests/typed_state.rs checks the Go SDK's golden
//! blobs). A cell exists only while it holds something.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_cbor::Value as CborValue;

use crate::batch::Key;
use crate::params::{ParamError, Params};

/// The ABI's bound on one key's state (abi/ABI.md): 16 MiB.
pub const ABI_MAX_STATE_BYTES: usize = 16 << 20;

/// The computation parameter that, set to the tenant's
/// `quotas.max_state_bytes_per_key`, gives [`TypedState::save`] the host's
/// limit (the guest is not told it otherwise).
pub const MAX_STATE_PARAM: &str = "max_state_bytes_per_key";

/// Encodes and decodes the elements of cells. [`Json`] and [`Cbor`] write
/// what the Go SDK's `flowhost.JSON` and `statecbor.Codec` write for
/// numbers, strings, booleans, sequences and string-keyed maps.
pub trait Codec {
    /// Encodes `value`.
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, String>;
    /// Decodes a `T` from `data`.
    fn decode<T: DeserializeOwned>(&self, data: &[u8]) -> Result<T, String>;
}

/// CBOR elements in canonical form (map keys sorted shorter first, then
/// bytewise; shortest integers), through serde_cbor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cbor;

impl Codec for Cbor {
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, String> {
        // Through a Value, whose maps are BTreeMaps in canonical order.
        let v = serde_cbor::value::to_value(value).map_err(|e| e.to_string())?;
        serde_cbor::to_vec(&v).map_err(|e| e.to_string())
    }
    fn decode<T: DeserializeOwned>(&self, data: &[u8]) -> Result<T, String> {
        serde_cbor::from_slice(data).map_err(|e| e.to_string())
    }
}

/// JSON elements written byte for byte as Go's `json.Marshal` writes the
/// corresponding Go value: struct fields in declaration order (Go's field
/// order), maps sorted by key text, `<`, `>`, `&`, U+2028 and U+2029
/// escaped as \uXXXX, floats in Go's shortest form at their own width
/// (f32 as float32), bytes (serialize_bytes) as base64. Field names are
/// serde's (mirror Go's `json:"name"` tags with `#[serde(rename)]`).
/// Decoding accepts any field order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Json;

impl Codec for Json {
    fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>, String> {
        crate::json::to_vec(value).map_err(|e| e.to_string())
    }
    fn decode<T: DeserializeOwned>(&self, data: &[u8]) -> Result<T, String> {
        let mut p = JsonParser { b: data, off: 0 };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.off != data.len() {
            return Err(format!("json: byte {}: data after the value", p.off));
        }
        serde_cbor::value::from_value(v).map_err(|e| e.to_string())
    }
}

struct JsonParser<'a> {
    b: &'a [u8],
    off: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.off < self.b.len() && matches!(self.b[self.off], b' ' | b'\t' | b'\n' | b'\r') {
            self.off += 1;
        }
    }
    fn err<T>(&self, msg: &str) -> Result<T, String> {
        Err(format!("json: byte {}: {msg}", self.off))
    }
    fn lit(&mut self, word: &[u8], v: CborValue) -> Result<CborValue, String> {
        if self.b[self.off..].starts_with(word) {
            self.off += word.len();
            Ok(v)
        } else {
            self.err("invalid literal")
        }
    }
    fn value(&mut self, depth: usize) -> Result<CborValue, String> {
        if depth > 128 {
            return self.err("nested too deeply");
        }
        match self.b.get(self.off) {
            None => self.err("unexpected end"),
            Some(b'n') => self.lit(b"null", CborValue::Null),
            Some(b't') => self.lit(b"true", CborValue::Bool(true)),
            Some(b'f') => self.lit(b"false", CborValue::Bool(false)),
            Some(b'"') => self.string().map(CborValue::Text),
            Some(b'[') => {
                self.off += 1;
                let mut a = Vec::new();
                self.ws();
                if self.b.get(self.off) == Some(&b']') {
                    self.off += 1;
                    return Ok(CborValue::Array(a));
                }
                loop {
                    self.ws();
                    a.push(self.value(depth + 1)?);
                    self.ws();
                    match self.b.get(self.off) {
                        Some(b',') => self.off += 1,
                        Some(b']') => {
                            self.off += 1;
                            return Ok(CborValue::Array(a));
                        }
                        _ => return self.err("expected , or ]"),
                    }
                }
            }
            Some(b'{') => {
                self.off += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.b.get(self.off) == Some(&b'}') {
                    self.off += 1;
                    return Ok(CborValue::Map(m));
                }
                loop {
                    self.ws();
                    if self.b.get(self.off) != Some(&b'"') {
                        return self.err("expected a key");
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.b.get(self.off) != Some(&b':') {
                        return self.err("expected :");
                    }
                    self.off += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    m.insert(CborValue::Text(k), v);
                    self.ws();
                    match self.b.get(self.off) {
                        Some(b',') => self.off += 1,
                        Some(b'}') => {
                            self.off += 1;
                            return Ok(CborValue::Map(m));
                        }
                        _ => return self.err("expected , or }"),
                    }
                }
            }
            Some(_) => self.number(),
        }
    }
    fn number(&mut self) -> Result<CborValue, String> {
        let start = self.off;
        let mut float = false;
        while let Some(&c) = self.b.get(self.off) {
            match c {
                b'0'..=b'9' | b'-' | b'+' => {}
                b'.' | b'e' | b'E' => float = true,
                _ => break,
            }
            self.off += 1;
        }
        let s = std::str::from_utf8(&self.b[start..self.off]).unwrap_or("");
        if s.is_empty() {
            return self.err("invalid character");
        }
        if !json_number(s.as_bytes()) {
            return Err(format!("json: byte {start}: invalid number {s}"));
        }
        if !float {
            // Only what CBOR can hold is an integer; a longer integer
            // text (Go writes 1e20 as 100000000000000000000) is a float.
            match s.parse::<i128>() {
                Ok(i) if i >= -(1i128 << 64) && i <= u64::MAX as i128 => return Ok(CborValue::Integer(i)),
                _ => {}
            }
        }
        match s.parse::<f64>() {
            Ok(f) => Ok(CborValue::Float(f)),
            Err(_) => Err(format!("json: byte {start}: invalid number {s}")),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.off += 1; // the opening quote
        let mut s = Vec::new();
        loop {
            let c = match self.b.get(self.off) {
                Some(&c) => c,
                None => return self.err("unterminated string"),
            };
            self.off += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = match self.b.get(self.off) {
                        Some(&e) => e,
                        None => return self.err("unterminated escape"),
                    };
                    self.off += 1;
                    match e {
                        b'"' | b'\\' | b'/' => s.push(e),
                        b'n' => s.push(b'\n'),
                        b'r' => s.push(b'\r'),
                        b't' => s.push(b'\t'),
                        b'b' => s.push(8),
                        b'f' => s.push(12),
                        b'u' => {
                            let mut n = self.hex4()?;
                            if (0xd800..0xdc00).contains(&n) && self.b[self.off..].starts_with(b"\\u") {
                                self.off += 2;
                                let lo = self.hex4()?;
                                n = 0x10000 + ((n - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            let ch = char::from_u32(n).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            s.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                c => s.push(c),
            }
        }
        String::from_utf8(s).or_else(|_| self.err("string is not UTF-8"))
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.off..self.off + 4).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(n) => {
                self.off += 4;
                Ok(n)
            }
            None => self.err("invalid \\u escape"),
        }
    }
}

/// Whether s follows JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
fn json_number(s: &[u8]) -> bool {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if s.first() == Some(&b'-') {
        i += 1;
    }
    if s.get(i) == Some(&b'0') {
        i += 1;
    } else if !digits(&mut i) {
        return false;
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(s.get(i), Some(b'e') | Some(b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+') | Some(b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == s.len()
}

/// Why typed state cannot be used as asked. Converts into [`crate::Error`]
/// with `?`, failing the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    /// A cell is another kind, or an element does not encode or decode.
    /// `element` is "" for the cell, `element 3` or `entry "k"` otherwise.
    Cell { cell: String, element: String, msg: String },
    /// The key's state is not typed state: decoding stopped at byte
    /// `offset`, in cell `cell` ("" outside any cell).
    Decode { offset: usize, cell: String, msg: String },
    /// The encoded state (`size` bytes) is over `limit`: nothing was
    /// saved, the key's state stays as it was.
    Quota { key: String, size: usize, limit: usize },
}

impl fmt::Display for StateError {
    /// The same text as the Go SDK's CellError, StateError and QuotaError.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Cell { cell, element, msg } => {
                write!(f, "state cell {}: ", quote(cell))?;
                if !element.is_empty() {
                    write!(f, "{element}: ")?;
                }
                f.write_str(msg)
            }
            StateError::Decode { offset, cell, msg } => {
                write!(f, "typed state: byte {offset}: ")?;
                if !cell.is_empty() {
                    write!(f, "cell {}: ", quote(cell))?;
                }
                f.write_str(msg)
            }
            StateError::Quota { key, size, limit } => write!(
                f,
                "key {}: typed state of {size} bytes exceeds the limit of {limit} bytes; its state stays as it was",
                quote(key)
            ),
        }
    }
}

impl std::error::Error for StateError {}

fn quote(s: &str) -> String {
    format!("{s:?}")
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Cell {
    Value(Vec<u8>),
    List(Vec<Vec<u8>>),
    Map(BTreeMap<String, Vec<u8>>),
}

impl Cell {
    fn kind(&self) -> &'static str {
        match self {
            Cell::Value(_) => "a value",
            Cell::List(_) => "a list",
            Cell::Map(_) => "a map",
        }
    }
}

/// One cell of decoded typed state, as the codec's raw bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawCell {
    /// A value cell's element.
    Value(Vec<u8>),
    /// A list cell's elements in append order.
    List(Vec<Vec<u8>>),
    /// A map cell's entries.
    Map(BTreeMap<String, Vec<u8>>),
}

/// Decodes a typed state blob into its cells. An empty blob has none; a
/// blob that is not typed state fails with [`StateError::Decode`].
pub fn decode_typed_state(blob: &[u8]) -> Result<BTreeMap<String, RawCell>, StateError> {
    Ok(decode(blob)?
        .into_iter()
        .map(|(k, c)| {
            let r = match c {
                Cell::Value(v) => RawCell::Value(v),
                Cell::List(l) => RawCell::List(l),
                Cell::Map(m) => RawCell::Map(m),
            };
            (k, r)
        })
        .collect())
}

const MAJOR_NAMES: [&str; 8] = [
    "an unsigned integer",
    "a negative integer",
    "a byte string",
    "a text string",
    "an array",
    "a map",
    "a tag",
    "a simple value or float",
];

struct Decoder<'a> {
    b: &'a [u8],
    off: usize,
    cell: String,
}

impl Decoder<'_> {
    fn fail<T>(&self, off: usize, msg: impl Into<String>) -> Result<T, StateError> {
        Err(StateError::Decode { offset: off, cell: self.cell.clone(), msg: msg.into() })
    }
    fn peek(&self) -> Result<u8, StateError> {
        match self.b.get(self.off) {
            Some(&c) => Ok(c >> 5),
            None => self.fail(self.off, "unexpected end of the state"),
        }
    }
    fn head(&mut self, major: u8, want: &str) -> Result<usize, StateError> {
        let start = self.off;
        let m = self.peek()?;
        if m != major {
            return self.fail(start, format!("expected {want}, got {}", MAJOR_NAMES[m as usize]));
        }
        let info = self.b[self.off] & 0x1f;
        self.off += 1;
        let arg: u64 = match info {
            0..=23 => info as u64,
            24..=27 => {
                let n = 1usize << (info - 24);
                if self.b.len() - self.off < n {
                    return self.fail(start, "unexpected end of the state in an item's head");
                }
                let mut a = 0u64;
                for &c in &self.b[self.off..self.off + n] {
                    a = a << 8 | c as u64;
                }
                self.off += n;
                a
            }
            31 => return self.fail(start, "indefinite lengths are not canonical"),
            _ => return self.fail(start, format!("reserved additional information {info}")),
        };
        let left = self.b.len() - self.off;
        if arg > left as u64 {
            return self.fail(start, format!("a length of {arg} exceeds the {left} bytes left"));
        }
        Ok(arg as usize)
    }
    fn bytes(&mut self, want: &str) -> Result<Vec<u8>, StateError> {
        let n = self.head(2, want)?;
        let p = self.b[self.off..self.off + n].to_vec();
        self.off += n;
        Ok(p)
    }
    fn text(&mut self, want: &str) -> Result<String, StateError> {
        let start = self.off;
        let n = self.head(3, want)?;
        match std::str::from_utf8(&self.b[self.off..self.off + n]) {
            Ok(s) => {
                self.off += n;
                Ok(s.to_string())
            }
            Err(_) => self.fail(start, "text is not valid UTF-8"),
        }
    }
    fn cell(&mut self) -> Result<Cell, StateError> {
        let start = self.off;
        match self.peek()? {
            2 => Ok(Cell::Value(self.bytes("")?)),
            4 => {
                let n = self.head(4, "")?;
                if n == 0 {
                    return self.fail(start, "an empty list is not stored (a cell exists only while it holds something)");
                }
                let mut l = Vec::with_capacity(n);
                for i in 0..n {
                    l.push(self.bytes(&format!("list element {i} to be a byte string"))?);
                }
                Ok(Cell::List(l))
            }
            5 => {
                let n = self.head(5, "")?;
                if n == 0 {
                    return self.fail(start, "an empty map is not stored (a cell exists only while it holds something)");
                }
                let mut m = BTreeMap::new();
                for _ in 0..n {
                    let kstart = self.off;
                    let k = self.text("a map entry's key (text)")?;
                    if m.contains_key(&k) {
                        return self.fail(kstart, format!("map key {} appears twice", quote(&k)));
                    }
                    let e = self.bytes(&format!("map entry {} to be a byte string", quote(&k)))?;
                    m.insert(k, e);
                }
                Ok(Cell::Map(m))
            }
            m => self.fail(start, format!("expected a cell (a byte string, an array or a map), got {}", MAJOR_NAMES[m as usize])),
        }
    }
}

fn decode(blob: &[u8]) -> Result<BTreeMap<String, Cell>, StateError> {
    let mut cells = BTreeMap::new();
    if blob.is_empty() {
        return Ok(cells);
    }
    let mut d = Decoder { b: blob, off: 0, cell: String::new() };
    let n = d.head(5, "the state to be a map of cells")?;
    for _ in 0..n {
        d.cell.clear();
        let start = d.off;
        let name = d.text("a cell name (text)")?;
        if cells.contains_key(&name) {
            return Err(StateError::Decode { offset: start, cell: name, msg: "the cell appears twice".into() });
        }
        d.cell = name.clone();
        let c = d.cell()?;
        cells.insert(name, c);
    }
    if d.off != blob.len() {
        d.cell.clear();
        return d.fail(d.off, format!("{} bytes after the map of cells", blob.len() - d.off));
    }
    Ok(cells)
}

fn head(b: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        b.push(m | n as u8);
    } else if n <= 0xff {
        b.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        b.push(m | 25);
        b.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        b.push(m | 26);
        b.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        b.push(m | 27);
        b.extend_from_slice(&n.to_be_bytes());
    }
}

/// Canonical CBOR order of text keys: shorter first, then bytewise.
fn canonical<'a, V>(m: &'a BTreeMap<String, V>) -> Vec<(&'a String, &'a V)> {
    let mut v: Vec<_> = m.iter().collect();
    v.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes())));
    v
}

fn encode(cells: &BTreeMap<String, Cell>) -> Vec<u8> {
    let mut b = Vec::new();
    head(&mut b, 5, cells.len() as u64);
    let text = |b: &mut Vec<u8>, s: &str| {
        head(b, 3, s.len() as u64);
        b.extend_from_slice(s.as_bytes());
    };
    let bytes = |b: &mut Vec<u8>, p: &[u8]| {
        head(b, 2, p.len() as u64);
        b.extend_from_slice(p);
    };
    for (name, c) in canonical(cells) {
        text(&mut b, name);
        match c {
            Cell::Value(v) => bytes(&mut b, v),
            Cell::List(l) => {
                head(&mut b, 4, l.len() as u64);
                for e in l {
                    bytes(&mut b, e);
                }
            }
            Cell::Map(m) => {
                head(&mut b, 5, m.len() as u64);
                for (k, e) in canonical(m) {
                    text(&mut b, k);
                    bytes(&mut b, e);
                }
            }
        }
    }
    b
}

/// A key's typed cells, read from its state by [`TypedState::load`].
/// Writes are kept here and written into the key's state once, by
/// [`save`](Self::save); when a `TypedState` with unsaved changes is
/// dropped it saves them, and a failure then fails the key
/// ([`Key::fail`]): typed writes are never lost silently. It borrows the
/// key; [`key`](Self::key) gives it back for emits and timers.
pub struct TypedState<'k, 'b> {
    key: &'k mut Key<'b>,
    cells: BTreeMap<String, Cell>,
    dirty: bool,
    limit: usize,
    /// The error the last save returned: when the drop fails the same
    /// way, the key fails with it as the user saw it.
    refused: Option<StateError>,
}

impl<'k, 'b> TypedState<'k, 'b> {
    /// Reads the key's state as typed cells (none when it has no state),
    /// with the ABI's limit of 16 MiB. It fails with
    /// [`StateError::Decode`] when the state is not typed state.
    pub fn load(key: &'k mut Key<'b>) -> Result<Self, StateError> {
        let cells = decode(key.state().unwrap_or(&[]))?;
        Ok(TypedState { key, cells, dirty: false, limit: ABI_MAX_STATE_BYTES, refused: None })
    }

    /// Sets the limit [`save`](Self::save) applies; above 16 MiB it is
    /// 16 MiB. Set it to the tenant's `quotas.max_state_bytes_per_key`.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.min(ABI_MAX_STATE_BYTES);
        self
    }

    /// The limit from the parameter [`MAX_STATE_PARAM`]: None when it is
    /// not set, an error when it is not a positive integer.
    pub fn limit_param(params: &Params) -> Result<Option<usize>, ParamError> {
        if !params.has(MAX_STATE_PARAM) {
            return Ok(None);
        }
        let n = params.int(MAX_STATE_PARAM)?;
        if n <= 0 {
            return Err(ParamError::new(MAX_STATE_PARAM, format!("expected a positive number of bytes, got {n}")));
        }
        Ok(Some((n as u64).min(ABI_MAX_STATE_BYTES as u64) as usize))
    }

    /// The key, for emits and timers while the state is in use.
    pub fn key(&mut self) -> &mut Key<'b> {
        self.key
    }

    fn cell(&self, name: &str, want: &'static str) -> Result<Option<&Cell>, StateError> {
        match self.cells.get(name) {
            Some(c) if c.kind() != want => Err(StateError::Cell {
                cell: name.to_string(),
                element: String::new(),
                msg: format!("is {}, used as {want}", c.kind()),
            }),
            c => Ok(c),
        }
    }

    /// The value cell `name`, its element encoded with `codec`.
    pub fn value<T, C: Codec>(&mut self, name: &str, codec: C) -> ValueCell<'_, 'k, 'b, T, C> {
        ValueCell { st: self, name: name.to_string(), codec, t: PhantomData }
    }

    /// The list cell `name`, its elements encoded with `codec`.
    pub fn list<T, C: Codec>(&mut self, name: &str, codec: C) -> ListCell<'_, 'k, 'b, T, C> {
        ListCell { st: self, name: name.to_string(), codec, t: PhantomData }
    }

    /// The map cell `name`, its values encoded with `codec`.
    pub fn map<T, C: Codec>(&mut self, name: &str, codec: C) -> MapCell<'_, 'k, 'b, T, C> {
        MapCell { st: self, name: name.to_string(), codec, t: PhantomData }
    }

    /// Removes the cell `name`, whatever its kind.
    pub fn clear(&mut self, name: &str) {
        if self.cells.remove(name).is_some() {
            self.dirty = true;
        }
    }

    /// Writes the cells into the key's state, once however many changed:
    /// the canonical blob, or no state when no cell is left. Over the
    /// limit it returns [`StateError::Quota`] and the key's state stays as
    /// it was; the changes stay pending. With nothing pending it does
    /// nothing.
    pub fn save(&mut self) -> Result<(), StateError> {
        if !self.dirty {
            return Ok(());
        }
        if self.cells.is_empty() {
            if self.key.state().is_some() {
                self.key.delete_state();
            }
            self.dirty = false;
            return Ok(());
        }
        let blob = encode(&self.cells);
        if blob.len() > self.limit {
            let err = StateError::Quota { key: self.key.key().to_string(), size: blob.len(), limit: self.limit };
            self.refused = Some(err.clone());
            return Err(err);
        }
        self.key.set_state(blob);
        self.dirty = false;
        Ok(())
    }

    /// Drops the unsaved changes: the cells are read again from the key's
    /// state.
    pub fn discard(&mut self) -> Result<(), StateError> {
        self.cells = decode(self.key.state().unwrap_or(&[]))?;
        self.dirty = false;
        Ok(())
    }
}

impl Drop for TypedState<'_, '_> {
    fn drop(&mut self) {
        let told = self.refused.take();
        if let Err(e) = self.save() {
            if told.as_ref() == Some(&e) {
                // The user was told; a `?` returns it after this drop.
                self.key.fail(e);
            } else {
                self.key.fail(crate::Error::new(format!("saving typed state when it was dropped: {e}")));
            }
        }
    }
}

fn enc<C: Codec, T: Serialize + ?Sized>(codec: &C, cell: &str, element: &str, v: &T) -> Result<Vec<u8>, StateError> {
    codec.encode(v).map_err(|e| StateError::Cell { cell: cell.to_string(), element: element.to_string(), msg: format!("cannot encode: {e}") })
}

fn dec<C: Codec, T: DeserializeOwned>(codec: &C, cell: &str, element: &str, p: &[u8]) -> Result<T, StateError> {
    codec.decode(p).map_err(|e| StateError::Cell { cell: cell.to_string(), element: element.to_string(), msg: format!("cannot decode: {e}") })
}

/// A value cell; see [`TypedState::value`].
pub struct ValueCell<'s, 'k, 'b, T, C> {
    st: &'s mut TypedState<'k, 'b>,
    name: String,
    codec: C,
    t: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, C: Codec> ValueCell<'_, '_, '_, T, C> {
    /// The value; None when the cell does not exist. Fails when the cell
    /// is another kind or does not decode.
    pub fn get(&self) -> Result<Option<T>, StateError> {
        match self.st.cell(&self.name, "a value")? {
            Some(Cell::Value(p)) => dec(&self.codec, &self.name, "", p).map(Some),
            _ => Ok(None),
        }
    }

    /// Replaces the value, creating the cell; fails (changing nothing)
    /// when the cell is another kind or `v` does not encode.
    pub fn set(&mut self, v: &T) -> Result<(), StateError> {
        self.st.cell(&self.name, "a value")?;
        let p = enc(&self.codec, &self.name, "", v)?;
        self.st.cells.insert(self.name.clone(), Cell::Value(p));
        self.st.dirty = true;
        Ok(())
    }

    /// Removes the cell, whatever its kind.
    pub fn clear(&mut self) {
        self.st.clear(&self.name)
    }
}

/// A list cell; see [`TypedState::list`].
pub struct ListCell<'s, 'k, 'b, T, C> {
    st: &'s mut TypedState<'k, 'b>,
    name: String,
    codec: C,
    t: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, C: Codec> ListCell<'_, '_, '_, T, C> {
    /// Appends `v`, creating the cell; fails (changing nothing) when the
    /// cell is another kind or `v` does not encode.
    pub fn append(&mut self, v: &T) -> Result<(), StateError> {
        let n = match self.st.cell(&self.name, "a list")? {
            Some(Cell::List(l)) => l.len(),
            _ => 0,
        };
        let p = enc(&self.codec, &self.name, &format!("element {n}"), v)?;
        match self.st.cells.entry(self.name.clone()).or_insert_with(|| Cell::List(Vec::new())) {
            Cell::List(l) => l.push(p),
            _ => unreachable!("checked above"),
        }
        self.st.dirty = true;
        Ok(())
    }

    /// The elements in append order (none when the cell does not exist);
    /// fails naming the element that does not decode.
    pub fn all(&self) -> Result<Vec<T>, StateError> {
        match self.st.cell(&self.name, "a list")? {
            Some(Cell::List(l)) => l.iter().enumerate().map(|(i, p)| dec(&self.codec, &self.name, &format!("element {i}"), p)).collect(),
            _ => Ok(Vec::new()),
        }
    }

    /// The number of elements, without decoding them.
    pub fn len(&self) -> Result<usize, StateError> {
        match self.st.cell(&self.name, "a list")? {
            Some(Cell::List(l)) => Ok(l.len()),
            _ => Ok(0),
        }
    }

    /// Whether the list has no elements (the cell does not exist).
    pub fn is_empty(&self) -> Result<bool, StateError> {
        self.len().map(|n| n == 0)
    }

    /// Removes the cell, whatever its kind.
    pub fn clear(&mut self) {
        self.st.clear(&self.name)
    }
}

/// A map cell; see [`TypedState::map`].
pub struct MapCell<'s, 'k, 'b, T, C> {
    st: &'s mut TypedState<'k, 'b>,
    name: String,
    codec: C,
    t: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, C: Codec> MapCell<'_, '_, '_, T, C> {
    /// The entry's value; None when there is none.
    pub fn get(&self, key: &str) -> Result<Option<T>, StateError> {
        match self.st.cell(&self.name, "a map")? {
            Some(Cell::Map(m)) => match m.get(key) {
                Some(p) => dec(&self.codec, &self.name, &format!("entry {}", quote(key)), p).map(Some),
                None => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// Sets the entry, creating the cell; fails (changing nothing) when
    /// the cell is another kind or `v` does not encode.
    pub fn put(&mut self, key: &str, v: &T) -> Result<(), StateError> {
        self.st.cell(&self.name, "a map")?;
        let p = enc(&self.codec, &self.name, &format!("entry {}", quote(key)), v)?;
        match self.st.cells.entry(self.name.clone()).or_insert_with(|| Cell::Map(BTreeMap::new())) {
            Cell::Map(m) => {
                m.insert(key.to_string(), p);
            }
            _ => unreachable!("checked above"),
        }
        self.st.dirty = true;
        Ok(())
    }

    /// Removes the entry; removing the last one removes the cell.
    pub fn delete(&mut self, key: &str) -> Result<(), StateError> {
        self.st.cell(&self.name, "a map")?;
        let empty = match self.st.cells.get_mut(&self.name) {
            Some(Cell::Map(m)) => {
                if m.remove(key).is_none() {
                    return Ok(());
                }
                m.is_empty()
            }
            _ => return Ok(()),
        };
        if empty {
            self.st.cells.remove(&self.name);
        }
        self.st.dirty = true;
        Ok(())
    }

    /// The entries' keys in sorted (bytewise) order.
    pub fn keys(&self) -> Result<Vec<String>, StateError> {
        match self.st.cell(&self.name, "a map")? {
            Some(Cell::Map(m)) => Ok(m.keys().cloned().collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// The number of entries.
    pub fn len(&self) -> Result<usize, StateError> {
        match self.st.cell(&self.name, "a map")? {
            Some(Cell::Map(m)) => Ok(m.len()),
            _ => Ok(0),
        }
    }

    /// Whether the map has no entries (the cell does not exist).
    pub fn is_empty(&self) -> Result<bool, StateError> {
        self.len().map(|n| n == 0)
    }

    /// Removes the cell, whatever its kind.
    pub fn clear(&mut self) {
        self.st.clear(&self.name)
    }
}
