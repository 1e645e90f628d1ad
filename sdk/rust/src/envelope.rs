//! The envelopes of ABI v1 (abi/ABI.md section 4) as serde types.
//!
//! Decoding borrows every text and byte string from the envelope, so a
//! request is read without copying payloads. Encoding relies on
//! serde_cbor writing shortest heads, definite lengths, and struct fields
//! in declaration order: the fields of every encoded struct are declared in
//! the canonical order (shorter key first, then bytewise), and absent
//! optional fields are skipped, which makes the bytes identical to the Go
//! host's and the golden vectors'.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

/// A text string borrowed from the envelope. Unlike `&str`, it refuses a
/// byte string, as the ABI's strict decoding requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Text<'a>(pub &'a str);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a text string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// A byte string borrowed from the envelope; it refuses a text string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Blob<'a>(pub &'a [u8]);

impl<'de: 'a, 'a> Deserialize<'de> for Blob<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Blob<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(Blob(v))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Deserializes an optional field that is present: null is a wrong type,
/// never "absent" (absent fields get their default without calling this).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Request (host → guest, `flowhost_process`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request<'a> {
    pub abi: u64,
    #[serde(borrow)]
    pub computation: Text<'a>,
    #[serde(borrow)]
    pub kind: Text<'a>,
    pub partition: u64,
    pub epoch: u64,
    pub watermarks: WatermarksIn,
    #[serde(borrow)]
    pub keys: Vec<RequestKey<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WatermarksIn {
    pub event: i64,
    pub system: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestKey<'a> {
    #[serde(borrow)]
    pub key: Text<'a>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub state: Option<Blob<'a>>,
    #[serde(default, borrow)]
    pub timers: Vec<DueTimer<'a>>,
    #[serde(default, borrow)]
    pub messages: Vec<MessageIn<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DueTimer<'a> {
    #[serde(borrow)]
    pub id: Text<'a>,
    pub trigger_ts: i64,
    pub event_ts: i64,
    #[serde(default, borrow, deserialize_with = "present")]
    pub payload: Option<Blob<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageIn<'a> {
    #[serde(borrow)]
    pub id: Text<'a>,
    #[serde(borrow)]
    pub stream: Text<'a>,
    pub event_ts: i64,
    pub system_ts: i64,
    pub alignment_ts: i64,
    #[serde(borrow)]
    pub payload: Blob<'a>,
}

/// Init (host → guest, `flowhost_init`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Init<'a> {
    pub abi: u64,
    #[serde(borrow)]
    pub computation: Text<'a>,
    #[serde(borrow)]
    pub kind: Text<'a>,
    pub partition: u64,
    #[serde(default, borrow, deserialize_with = "present")]
    pub parameters: Option<BTreeMap<Text<'a>, serde_cbor::Value>>,
    #[serde(borrow)]
    pub output_streams: Vec<Text<'a>>,
}

/// Response (guest → host). Fields in canonical order.
#[derive(Serialize)]
pub(crate) struct Response<'a> {
    pub keys: Vec<ResponseKey<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// ResponseKey. Fields in canonical order: key, emits, error, state,
/// state_op, timers_set, timers_cancel.
#[derive(Serialize)]
pub(crate) struct ResponseKey<'a> {
    pub key: &'a str,
    #[serde(skip_serializing_if = "Emits::is_empty")]
    pub emits: Emits<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "some_bytes")]
    pub state: Option<&'a [u8]>,
    #[serde(skip_serializing_if = "is_zero")]
    pub state_op: u8,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub timers_set: &'a [TimerOut],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub timers_cancel: &'a [i64],
}

/// A key's emits as they are encoded: an emit names its stream by its
/// index in the computation's output streams, and a payload borrowed from
/// the request by its place in the request envelope, so that emitting
/// copies neither.
#[derive(Clone, Copy)]
pub(crate) struct Emits<'a> {
    pub emits: &'a [EmitOut],
    pub outputs: &'a [String],
    pub request: &'a [u8],
}

impl Emits<'_> {
    fn is_empty(&self) -> bool {
        self.emits.is_empty()
    }
}

impl Serialize for Emits<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.emits.len()))?;
        for e in self.emits {
            seq.serialize_element(&EmitView { e, emits: self })?;
        }
        seq.end()
    }
}

struct EmitView<'e, 'a> {
    e: &'e EmitOut,
    emits: &'e Emits<'a>,
}

/// One emit. Fields in canonical order: key, stream, parents, payload,
/// event_ts.
impl Serialize for EmitView<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.e;
        let fields = 2 + usize::from(!e.key.is_empty()) + usize::from(e.parents.is_some()) + usize::from(e.event_ts.is_some());
        let mut st = s.serialize_struct("EmitOut", fields)?;
        if !e.key.is_empty() {
            st.serialize_field("key", &e.key)?;
        }
        st.serialize_field("stream", &self.emits.outputs[e.stream])?;
        if let Some(p) = &e.parents {
            st.serialize_field("parents", p.as_slice())?;
        }
        let payload: &[u8] = match &e.payload {
            Payload::Owned(v) => v,
            Payload::Request(r) => &self.emits.request[r.clone()],
        };
        st.serialize_field("payload", &ByteString(payload))?;
        if let Some(ts) = &e.event_ts {
            st.serialize_field("event_ts", ts)?;
        }
        st.end()
    }
}

/// A byte string for serde, which writes `[u8]` as an array of numbers.
struct ByteString<'a>(&'a [u8]);

impl Serialize for ByteString<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// One emit of a key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmitOut {
    pub key: String,
    /// The index of its stream in the computation's output streams.
    pub stream: usize,
    pub parents: Option<Parents>,
    pub payload: Payload,
    pub event_ts: Option<i64>,
}

/// An emit's payload: its own bytes, or bytes of the request envelope (a
/// message's payload emitted as it came), named by their place.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    Owned(Vec<u8>),
    Request(std::ops::Range<usize>),
}

/// An emit's parents, in the order named; the first two need no
/// allocation.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Parents {
    inline: [u32; 2],
    len: usize,
    spilled: Vec<u32>,
}

impl Parents {
    pub fn as_slice(&self) -> &[u32] {
        if self.spilled.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spilled
        }
    }

    pub fn push(&mut self, v: u32) {
        if !self.spilled.is_empty() {
            self.spilled.push(v);
        } else if self.len < self.inline.len() {
            self.inline[self.len] = v;
            self.len += 1;
        } else {
            self.spilled.extend_from_slice(&self.inline);
            self.spilled.push(v);
        }
    }

    pub fn contains(&self, v: u32) -> bool {
        self.as_slice().contains(&v)
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

/// One `timers_set` entry. Fields in canonical order: payload, event_ts,
/// trigger_ts.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub(crate) struct TimerOut {
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "bytes")]
    pub payload: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_ts: Option<i64>,
    pub trigger_ts: i64,
}

/// InitResult (guest → host) of a computation that refuses to start.
#[derive(Serialize)]
pub(crate) struct InitResult<'a> {
    pub error: &'a str,
}

/// Writes a CBOR byte string; serde writes `[u8]` as an array of numbers.
fn bytes<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(v)
}

fn some_bytes<S: Serializer>(v: &Option<&[u8]>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(v.unwrap_or_default())
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode<T: Serialize>(v: &T) -> Vec<u8> {
        serde_cbor::to_vec(v).unwrap()
    }

    #[test]
    fn a_payload_borrowed_from_the_request_encodes_as_its_copy() {
        let request = b"..payload..";
        let outputs = ["out".to_string()];
        let one = |payload| {
            let emits = [EmitOut { key: String::new(), stream: 0, parents: None, payload, event_ts: None }];
            encode(&Emits { emits: &emits, outputs: &outputs, request })
        };
        let borrowed = one(Payload::Request(2..9));
        assert_eq!(borrowed, one(Payload::Owned(b"payload".to_vec())));
        assert_eq!(borrowed, b"\x81\xa2\x66stream\x63out\x67payload\x47payload".to_vec());
    }

    #[test]
    fn parents_keep_their_order_past_the_inline_ones() {
        let mut p = Parents::default();
        assert!(p.is_empty());
        for v in [7, 3, 9, 1] {
            assert!(!p.contains(v));
            p.push(v);
            assert!(p.contains(v));
        }
        assert_eq!(p.as_slice(), &[7, 3, 9, 1]);
        let mut two = Parents::default();
        two.push(5);
        two.push(4);
        assert_eq!(two.as_slice(), &[5, 4]);
    }

    #[test]
    fn encodes_canonically() {
        let mut parents = Parents::default();
        parents.push(0);
        parents.push(300);
        let emits = [EmitOut {
            key: "k".into(),
            stream: 1,
            parents: Some(parents),
            payload: Payload::Owned(b"p".to_vec()),
            event_ts: Some(-1000),
        }];
        let outputs = ["r".to_string(), "s".to_string()];
        let timers = [TimerOut { payload: vec![], event_ts: None, trigger_ts: 24 }];
        let resp = Response {
            keys: vec![ResponseKey {
                key: "a",
                emits: Emits { emits: &emits, outputs: &outputs, request: &[] },
                error: None,
                state: Some(b""),
                state_op: 1,
                timers_set: &timers,
                timers_cancel: &[-1],
            }],
            error: None,
        };
        let mut want = b"\xa1\x64keys\x81\xa6\x63key\x61a\x65emits\x81".to_vec();
        want.extend_from_slice(b"\xa5\x63key\x61k\x66stream\x61s\x67parents\x82\x00\x19\x01\x2c");
        want.extend_from_slice(b"\x67payload\x41p\x68event_ts\x39\x03\xe7");
        want.extend_from_slice(b"\x65state\x40\x68state_op\x01");
        want.extend_from_slice(b"\x6atimers_set\x81\xa1\x6atrigger_ts\x18\x18");
        want.extend_from_slice(b"\x6dtimers_cancel\x81\x20");
        assert_eq!(encode(&resp), want);
    }

    #[test]
    fn absent_is_not_null() {
        // {"key": "k", "state": null}
        let with_null = b"\xa2\x63key\x61k\x65state\xf6";
        assert!(serde_cbor::from_slice::<RequestKey>(with_null).is_err());
        let absent = b"\xa1\x63key\x61k";
        let k: RequestKey = serde_cbor::from_slice(absent).unwrap();
        assert!(k.state.is_none() && k.timers.is_empty() && k.messages.is_empty());
        let empty = b"\xa2\x63key\x61k\x65state\x40";
        let k: RequestKey = serde_cbor::from_slice(empty).unwrap();
        assert_eq!(k.state, Some(Blob(b"")));
    }

    #[test]
    fn text_and_bytes_are_not_interchangeable() {
        let bytes_key = b"\xa1\x63key\x41k";
        assert!(serde_cbor::from_slice::<RequestKey>(bytes_key).is_err());
        let text_state = b"\xa2\x63key\x61k\x65state\x61s";
        assert!(serde_cbor::from_slice::<RequestKey>(text_state).is_err());
    }

    #[test]
    fn rejects_unknown_fields() {
        let extra = b"\xa2\x63key\x61k\x62id\x61x";
        let err = serde_cbor::from_slice::<RequestKey>(extra).err().unwrap();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}
