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
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub emits: &'a [EmitOut],
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

/// One emit. Fields in canonical order: key, stream, parents, payload,
/// event_ts.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub(crate) struct EmitOut {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    pub stream: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parents: Option<Vec<u32>>,
    #[serde(serialize_with = "bytes")]
    pub payload: Vec<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_ts: Option<i64>,
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
    fn encodes_canonically() {
        let emits = [EmitOut {
            key: "k".into(),
            stream: "s".into(),
            parents: Some(vec![0, 300]),
            payload: b"p".to_vec(),
            event_ts: Some(-1000),
        }];
        let timers = [TimerOut { payload: vec![], event_ts: None, trigger_ts: 24 }];
        let resp = Response {
            keys: vec![ResponseKey {
                key: "a",
                emits: &emits,
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
