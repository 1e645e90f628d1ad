//! The Rust SDK's join conformance guest (sdk/conformance, "The join
//! guest"; the behaviour is the same in every SDK): the parameter `join`
//! chooses the interval join (streams `left` and `right`, bounds
//! `lower_ns` and `upper_ns`, matches on `joined` as
//! `<left payload>|<right payload>`, never-matched records on `expired`
//! unchanged) or the enrichment join (streams `table` and `events`,
//! enriched events on `enriched` as `<event payload>|<table payload>`,
//! events without a value on `unmatched` unchanged). Every key of a batch
//! goes to the helper; nothing else is done.

use flowhost::{Batch, Computation, EnrichJoin, Error, IntervalJoin, JoinPair, Params};

fn pipe(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b"|", b].concat()
}

/// The join the parameters chose.
pub enum Join {
    Interval(IntervalJoin),
    Enrich(EnrichJoin),
}

/// The guest: its join, made by init.
#[derive(Default)]
pub struct JoinGuest {
    join: Option<Join>,
}

flowhost::export!(JoinGuest::default());

/// The join the parameters describe, or the error naming the bad one.
pub fn join_from(p: &Params) -> Result<Join, Error> {
    match p.str("join")? {
        "interval" => {
            let lower = p.int("lower_ns")?;
            let upper = p.int("upper_ns")?;
            // IntervalJoin::new panics on these; a guest must refuse them instead.
            if lower == i64::MIN {
                return Err(Error::new("parameter \"lower_ns\": must be above the smallest int64"));
            }
            if lower > upper {
                return Err(Error::new("parameter \"lower_ns\": must not exceed upper_ns"));
            }
            Ok(Join::Interval(IntervalJoin::new(
                "left",
                "right",
                lower,
                upper,
                |p: &JoinPair<'_>| pipe(&p.left.payload, &p.right.payload),
                "joined",
                "expired",
            )))
        }
        "enrich" => Ok(Join::Enrich(EnrichJoin::new(
            "table",
            "events",
            |ev, v| pipe(ev.payload, &v.payload),
            "enriched",
            "unmatched",
        ))),
        other => Err(Error::new(format!("parameter \"join\": must be interval or enrich, got {:?}", other))),
    }
}

impl Computation for JoinGuest {
    fn init(&mut self, p: &Params) -> Result<(), Error> {
        self.join = Some(join_from(p)?);
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let join = self.join.as_ref().ok_or_else(|| Error::batch("process before init"))?;
        // A bad state or another stream fails its key alone; the helper has already failed it.
        batch.for_each_key(|key| {
            let _ = match join {
                Join::Interval(j) => j.process(key),
                Join::Enrich(e) => e.process(key),
            };
            Ok(())
        })
    }
}
