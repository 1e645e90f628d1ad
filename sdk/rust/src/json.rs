//! The JSON element encoder of [`crate::Json`]: a serde Serializer that
//! writes Go's encoding/json bytes directly. It does not go through
//! serde_cbor's Value because that Value keeps maps (and so structs) in a
//! BTreeMap, which reorders struct fields by name; Go keeps declaration
//! order, and the typed state must be byte-identical across SDKs.

use std::fmt;

use serde::ser::{self, Serialize};

/// The encoder's error: says which value cannot be written.
#[derive(Debug)]
pub(crate) struct Error(pub(crate) String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Encodes `v` as Go's `json.Marshal` does for the corresponding Go value:
/// structs in declaration order, maps sorted by key, HTML-safe strings.
pub(crate) fn to_vec<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    v.serialize(Ser { out: &mut out })?;
    Ok(out)
}

struct Ser<'a> {
    out: &'a mut Vec<u8>,
}

/// Go's floatEncoder: shortest text that round-trips at the value's own
/// width, exponent form outside [1e-6, 1e21) written as Go cleans it up
/// ("1e+21", "1e-7").
fn float(out: &mut Vec<u8>, finite: bool, small_or_big: bool, plain: String, exp: String) -> Result<(), Error> {
    if !finite {
        return Err(Error(format!("json: unsupported value: {plain}")));
    }
    let s = if small_or_big {
        match exp.find('e') {
            Some(i) if !exp[i + 1..].starts_with('-') => format!("{}e+{}", &exp[..i], &exp[i + 1..]),
            _ => exp,
        }
    } else {
        plain
    };
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// A JSON string as Go's encoding/json writes it with HTML escaping (the
/// default of json.Marshal): `<`, `>`, `&`, U+2028 and U+2029 as \uXXXX,
/// \b \f \n \r \t short, other control characters as \u00XX.
pub(crate) fn string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 || c == '<' || c == '>' || c == '&' || c == '\u{2028}' || c == '\u{2029}' => {
                let n = c as u32;
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((n >> shift) & 0xf) as usize]);
                }
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity((b.len() + 2) / 3 * 4);
    for ch in b.chunks(3) {
        let n = (ch[0] as u32) << 16 | (*ch.get(1).unwrap_or(&0) as u32) << 8 | *ch.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= ch.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

impl<'a> ser::Serializer for Ser<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Struct<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(v as i64)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_u64(v as u64)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.out.extend_from_slice(v.to_string().as_bytes());
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // Go's float32 encoder formats at 32 bits: 0.1f32 is "0.1", not
        // the "0.10000000149011612" of its float64 widening.
        let a = v.abs();
        float(self.out, v.is_finite(), a != 0.0 && (a < 1e-6 || a >= 1e21), format!("{v}"), format!("{v:e}"))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        let a = v.abs();
        float(self.out, v.is_finite(), a != 0.0 && (a < 1e-6 || a >= 1e21), format!("{v}"), format!("{v:e}"))
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        let mut buf = [0u8; 4];
        string(self.out, v.encode_utf8(&mut buf));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        string(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // Go writes []byte as standard base64 text.
        string(self.out, &base64(v));
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        string(self.out, variant);
        self.out.push(b':');
        v.serialize(Ser { out: &mut *self.out })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, Error> {
        self.out.push(b'[');
        Ok(Seq { out: self.out, first: true, variant: false })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, variant: &'static str, _: usize) -> Result<Seq<'a>, Error> {
        self.out.push(b'{');
        string(self.out, variant);
        self.out.extend_from_slice(b":[");
        Ok(Seq { out: self.out, first: true, variant: true })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, Error> {
        Ok(Map { out: self.out, entries: Vec::new(), key: None })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Struct<'a>, Error> {
        self.out.push(b'{');
        Ok(Struct { out: self.out, first: true, variant: false })
    }
    fn serialize_struct_variant(self, _: &'static str, _: u32, variant: &'static str, _: usize) -> Result<Struct<'a>, Error> {
        self.out.push(b'{');
        string(self.out, variant);
        self.out.extend_from_slice(b":{");
        Ok(Struct { out: self.out, first: true, variant: true })
    }
}

/// A sequence in progress; `variant` closes the `{"Variant":` around it.
pub(crate) struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    variant: bool,
}

impl Seq<'_> {
    fn elem<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        v.serialize(Ser { out: &mut *self.out })
    }
    fn close(self) -> Result<(), Error> {
        self.out.push(b']');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.elem(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTuple for Seq<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.elem(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Seq<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.elem(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Seq<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        self.elem(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// A struct in progress: fields are written as they come, which is
/// declaration order for derived Serialize (Go's order too).
pub(crate) struct Struct<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    variant: bool,
}

impl Struct<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, name: &str, v: &T) -> Result<(), Error> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        string(self.out, name);
        self.out.push(b':');
        v.serialize(Ser { out: &mut *self.out })
    }
    fn close(self) -> Result<(), Error> {
        self.out.push(b'}');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<(), Error> {
        self.field(name, v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Struct<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<(), Error> {
        self.field(name, v)
    }
    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// A map in progress: entries are buffered and written sorted by the
/// bytes of their key text, as Go sorts map keys (integer keys by their
/// decimal text, so 10 sorts before 9).
pub(crate) struct Map<'a> {
    out: &'a mut Vec<u8>,
    entries: Vec<(String, Vec<u8>)>,
    key: Option<String>,
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), Error> {
        self.key = Some(k.serialize(KeySer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Error> {
        let k = self.key.take().ok_or_else(|| Error("json: map value without a key".into()))?;
        let mut buf = Vec::new();
        v.serialize(Ser { out: &mut buf }).map_err(|e| Error(format!("json: map key {k:?}: {e}")))?;
        self.entries.push((k, buf));
        Ok(())
    }
    fn end(mut self) -> Result<(), Error> {
        self.entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(w) = self.entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error(format!("json: map key {:?} appears twice", w[0].0)));
        }
        self.out.push(b'{');
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            string(self.out, k);
            self.out.push(b':');
            self.out.extend_from_slice(v);
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// Map keys: text, or integers written in decimal (Go's map key rules);
/// anything else is an error naming the key's kind.
struct KeySer;

fn key_err(kind: &str) -> Error {
    Error(format!("json: a map key must be text or an integer, not {kind}"))
}

impl ser::Serializer for KeySer {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    fn serialize_bool(self, _: bool) -> Result<String, Error> {
        Err(key_err("a bool"))
    }
    fn serialize_i8(self, v: i8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_i128(self, v: i128) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_u128(self, v: u128) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, _: f32) -> Result<String, Error> {
        Err(key_err("a float"))
    }
    fn serialize_f64(self, _: f64) -> Result<String, Error> {
        Err(key_err("a float"))
    }
    fn serialize_char(self, v: char) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_string())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Error> {
        Err(key_err("bytes"))
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_err("null"))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Error> {
        Err(key_err("an option"))
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_err("null"))
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Error> {
        Err(key_err("a unit struct"))
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<String, Error> {
        Ok(variant.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<String, Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Error> {
        Err(key_err("an enum variant with data"))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_err("a sequence"))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_err("a tuple"))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_err("a tuple struct"))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_err("an enum variant with data"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_err("a map"))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_err("a struct"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_err("an enum variant with data"))
    }
}
