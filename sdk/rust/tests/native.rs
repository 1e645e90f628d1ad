//! A computation tested natively through `flowhost::testing`, as a user's
//! crate would test its own: `cargo test`, no WebAssembly.

use flowhost::testing::{process, StateChange, TestBatch, TestError, TestInit, TestTimer, Value};
use flowhost::{Batch, Computation, Error, Params};

/// Counts each key's messages in its state, emits the count to the stream
/// named by the parameter `output`, sets a timer at the parameter `flush`;
/// a firing timer emits "flush" and deletes the state.
struct Counter {
    output: String,
    flush: i64,
}

impl Computation for Counter {
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        self.output = params.str("output").unwrap_or("out").to_string();
        self.flush = params.int("flush").unwrap_or(100);
        if self.flush < 0 {
            return Err(Error::new("flush must not be negative"));
        }
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let (output, flush) = (self.output.clone(), self.flush);
        batch.for_each_key(|key| {
            let mut n: u64 = match key.state() {
                Some(s) => std::str::from_utf8(s)?.parse()?,
                None => 0,
            };
            let timers: Vec<_> = key.timers().collect();
            for t in timers {
                key.emit(&output, format!("flush {}", n)).parent(&t);
                n = 0;
            }
            let messages: Vec<_> = key.messages().collect();
            for m in messages {
                n += 1;
                key.emit(&output, format!("{}={}", key.key(), n)).parent(&m);
                key.set_timer(flush);
            }
            if n == 0 {
                key.delete_state();
            } else {
                key.set_state(n.to_string());
            }
            Ok(())
        })
    }
}

fn counter() -> Counter {
    Counter { output: String::new(), flush: 0 }
}

#[test]
fn counts_from_the_state_and_sets_a_timer() {
    let init = TestInit::new().param("output", Value::Text("counts".into())).param("flush", Value::Integer(500)).output("counts");
    let batch = TestBatch::new().state("a", b"4").message("a", "in", 10, b"x").message("b", "in", 11, b"y");
    let resp = process(counter(), &init, &batch).unwrap();
    assert_eq!(resp.emitted("counts"), vec!["a=5", "b=1"]);
    let a = resp.key("a").unwrap();
    assert_eq!(a.state, StateChange::Replace(b"5".to_vec()));
    assert_eq!(a.timers_set, vec![TestTimer { trigger_ts: 500, event_ts: None, payload: Vec::new() }]);
    assert_eq!(a.emits[0].parents, Some(vec![0]));
}

#[test]
fn a_due_timer_flushes_and_deletes_the_state() {
    let batch = TestBatch::new().watermarks(100, 100).state("a", b"3").timer("a", 100, b"");
    let resp = process(counter(), &TestInit::new(), &batch).unwrap();
    assert_eq!(resp.emitted("out"), vec!["flush 3"]);
    assert_eq!(resp.key("a").unwrap().state, StateChange::Delete);
}

#[test]
fn a_bad_state_fails_only_its_key() {
    let batch = TestBatch::new().state("a", b"not a number").message("a", "in", 1, b"").message("b", "in", 1, b"");
    let resp = process(counter(), &TestInit::new(), &batch).unwrap();
    assert!(resp.key("a").unwrap().error.is_some());
    assert_eq!(resp.emitted("out"), vec!["b=1"]);
}

#[test]
fn init_refusal_comes_back_with_its_message() {
    let init = TestInit::new().param("flush", Value::Integer(-1));
    let err = process(counter(), &init, &TestBatch::new()).unwrap_err();
    assert_eq!(err, TestError::InitRefused("flush must not be negative".to_string()));
}
