//! The Rust SDK's window conformance guest (the behaviour every SDK's
//! window guest shares): a transform that counts each key's records per
//! event-time window with [`flowhost::Windows`], so that the real-host
//! conformance test can compare every language's windows with one model.
//!
//! - Parameters: `kind` (`tumbling`, `hopping` or `session`), `size_ns`
//!   (tumbling, hopping), `advance_ns` (hopping), `gap_ns` (session),
//!   `lateness_ns` (default 0). A missing or bad one refuses init with an
//!   error naming it.
//! - Results go to `windows` as `{"start":S,"end":E,"count":N}`; late
//!   records go to `late` unchanged.
//! - The accumulator is the count as an unsigned LEB128 varint (Go's
//!   `binary.AppendUvarint`), empty for 0, so the key's state is the Go
//!   window guest's byte for byte.

use flowhost::{Aggregator, Batch, Computation, Error, Message, Params, Window, WindowSpec, Windows};

/// The output stream of window results.
pub const OUTPUT: &str = "windows";
/// The stream of late records.
pub const LATE: &str = "late";

/// Counts records; the accumulator is the count as a uvarint.
pub struct Count;

/// The count an accumulator holds: empty (or unreadable) is 0.
pub fn count_of(acc: &[u8]) -> u64 {
    let (mut x, mut s) = (0u64, 0u32);
    for &b in acc.iter().take(10) {
        if b < 0x80 {
            return x | (b as u64) << s;
        }
        x |= ((b & 0x7f) as u64) << s;
        s += 7;
    }
    0
}

/// The uvarint encoding of `n`, as Go's `binary.AppendUvarint`.
pub fn encode_count(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}

impl Aggregator for Count {
    fn add(&self, acc: Vec<u8>, _m: &Message<'_>) -> Vec<u8> {
        encode_count(count_of(&acc) + 1)
    }

    fn merge(&self, a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
        encode_count(count_of(&a) + count_of(&b))
    }

    fn result(&self, w: &Window<'_>, acc: Vec<u8>) -> Vec<u8> {
        format!("{{\"start\":{},\"end\":{},\"count\":{}}}", w.start, w.end, count_of(&acc)).into_bytes()
    }
}

/// The guest: its windows, made by init.
#[derive(Default)]
pub struct WindowGuest {
    windows: Option<Windows<Count>>,
}

flowhost::export!(WindowGuest::default());

/// A positive integer parameter.
fn positive(p: &Params, name: &str) -> Result<i64, Error> {
    let v = p.int(name)?;
    if v <= 0 {
        return Err(Error::new(format!("parameter {:?}: must be positive, got {}", name, v)));
    }
    Ok(v)
}

/// The windows the parameters describe, or the error naming the bad one.
pub fn windows_from(p: &Params) -> Result<Windows<Count>, Error> {
    let spec = match p.str("kind")? {
        "tumbling" => WindowSpec::tumbling(positive(p, "size_ns")?),
        "hopping" => {
            let size = positive(p, "size_ns")?;
            let advance = positive(p, "advance_ns")?;
            if advance > size {
                return Err(Error::new(format!(
                    "parameter \"advance_ns\": must not exceed size_ns ({}), got {}",
                    size, advance
                )));
            }
            WindowSpec::hopping(size, advance)
        }
        "session" => WindowSpec::session(positive(p, "gap_ns")?),
        other => {
            return Err(Error::new(format!(
                "parameter \"kind\": must be tumbling, hopping or session, got {:?}",
                other
            )))
        }
    };
    let lateness = if p.has("lateness_ns") { p.int("lateness_ns")? } else { 0 };
    if lateness < 0 {
        return Err(Error::new(format!("parameter \"lateness_ns\": must not be negative, got {}", lateness)));
    }
    Ok(Windows::new(spec, Count, OUTPUT, LATE).allowed_lateness(lateness))
}

impl Computation for WindowGuest {
    fn init(&mut self, p: &Params) -> Result<(), Error> {
        self.windows = Some(windows_from(p)?);
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let w = self.windows.as_ref().ok_or_else(|| Error::batch("process before init"))?;
        // A bad state fails its key alone; the helper has already failed it.
        batch.for_each_key(|key| Ok(w.process(key)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost::testing::{process, StateChange, TestBatch, TestError, TestInit, Value};

    fn init(params: &[(&str, Value)]) -> TestInit {
        let mut i = TestInit::new().output(OUTPUT).output(LATE);
        for (k, v) in params {
            i = i.param(k, v.clone());
        }
        i
    }

    #[test]
    fn counts_encode_as_uvarints() {
        assert_eq!(encode_count(0), vec![0]);
        assert_eq!(encode_count(300), vec![0xac, 0x02]);
        assert_eq!(count_of(&[0xac, 0x02]), 300);
        assert_eq!(count_of(&[]), 0);
    }

    #[test]
    fn bad_parameters_refuse_init_naming_them() {
        let text = |s: &str| Value::Text(s.to_string());
        for (params, want) in vec![
            (vec![], "parameter \"kind\" is missing"),
            (vec![("kind", text("sliding"))], "parameter \"kind\": must be tumbling, hopping or session, got \"sliding\""),
            (vec![("kind", text("tumbling"))], "parameter \"size_ns\" is missing"),
            (vec![("kind", text("tumbling")), ("size_ns", Value::Integer(0))], "parameter \"size_ns\": must be positive, got 0"),
            (vec![("kind", text("hopping")), ("size_ns", Value::Integer(10))], "parameter \"advance_ns\" is missing"),
            (
                vec![("kind", text("hopping")), ("size_ns", Value::Integer(10)), ("advance_ns", Value::Integer(11))],
                "parameter \"advance_ns\": must not exceed size_ns (10), got 11",
            ),
            (vec![("kind", text("session")), ("gap_ns", text("5"))], "parameter \"gap_ns\": expected integer, got string"),
            (
                vec![("kind", text("session")), ("gap_ns", Value::Integer(5)), ("lateness_ns", Value::Integer(-1))],
                "parameter \"lateness_ns\": must not be negative, got -1",
            ),
        ] {
            let got = process(WindowGuest::default(), &init(&params), &TestBatch::new().message("k", "in", 1, b""));
            assert_eq!(got, Err(TestError::InitRefused(want.to_string())), "{:?}", params);
        }
    }

    #[test]
    fn a_tumbling_window_counts_and_late_records_go_unchanged() {
        let p = init(&[("kind", Value::Text("tumbling".into())), ("size_ns", Value::Integer(10))]);
        let resp = process(WindowGuest::default(), &p, &TestBatch::new().message("k", "in", -3, b"x").message("k", "in", -1, b"y")).unwrap();
        let k = resp.key("k").unwrap();
        assert_eq!(k.timers_set.iter().map(|t| t.trigger_ts).collect::<Vec<_>>(), vec![0]);
        let state = match &k.state {
            StateChange::Replace(s) => s.clone(),
            other => panic!("state {:?}", other),
        };
        let b = TestBatch::new().state("k", &state).timer("k", 0, b"").message("k", "in", -5, b"late!");
        let resp = process(WindowGuest::default(), &p, &b).unwrap();
        assert_eq!(resp.emitted(OUTPUT), vec!["{\"start\":-10,\"end\":0,\"count\":2}"]);
        assert_eq!(resp.emitted(LATE), vec!["late!"]);
    }
}
