//! The join helpers as a guest, for sdk/rust/join_test.go, which runs it
//! beside the Go helpers with the same payload functions and requires the
//! same response bytes. Parameters: `mode` ("interval" or "enrich"); for
//! an interval join `lower` and `upper` (ns) and `with_expired` (bool).
//! Streams: L and R (interval), T and E (enrich); outputs out, expired,
//! unmatched.

use flowhost::{Batch, Computation, EnrichJoin, Error, IntervalJoin, JoinPair, JoinRecord, Message, Params};

enum Join {
    None,
    Interval(IntervalJoin),
    Enrich(EnrichJoin),
}

struct Guest(Join);

fn input(i: Option<usize>) -> i64 {
    i.map(|i| i as i64).unwrap_or(-1)
}

/// A record as text, every field, so that the Go side can build the same
/// bytes.
fn record(out: &mut Vec<u8>, r: &JoinRecord) {
    out.extend(format!("{}|{}|{}|", r.id, r.stream, r.event_ts).as_bytes());
    out.extend(&r.payload);
    out.extend(format!("|{}", input(r.input)).as_bytes());
}

fn pair(p: &JoinPair) -> Vec<u8> {
    let mut out = format!("{}|", p.key).into_bytes();
    record(&mut out, p.left);
    out.push(b'/');
    record(&mut out, p.right);
    out
}

fn expired(r: &JoinRecord) -> Vec<u8> {
    let mut out = b"x|".to_vec();
    record(&mut out, r);
    out
}

fn enrich(m: &Message, v: &JoinRecord) -> Vec<u8> {
    let mut out = format!("{}|{}|{}|", m.id, m.stream, m.event_ts).into_bytes();
    out.extend(m.payload);
    out.extend(format!("|{}/", m.input).as_bytes());
    record(&mut out, v);
    out
}

impl Computation for Guest {
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        self.0 = match params.str("mode")? {
            "interval" => {
                let j = IntervalJoin::new("L", "R", params.int("lower")?, params.int("upper")?, pair, "out", "expired");
                let with = params.get("with_expired").and_then(|v| v.as_bool()).unwrap_or(false);
                Join::Interval(if with { j.with_expired(expired) } else { j })
            }
            "enrich" => Join::Enrich(EnrichJoin::new("T", "E", enrich, "out", "unmatched")),
            other => return Err(Error::new(format!("mode {:?}", other))),
        };
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let j = &self.0;
        batch.for_each_key(|k| match j {
            Join::Interval(j) => j.process(k),
            Join::Enrich(e) => e.process(k),
            Join::None => Err(Error::batch("not initialised")),
        })
    }
}

flowhost::export!(Guest(Join::None));
