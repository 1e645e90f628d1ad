//! The golden-vector guest: for each case of abi/testdata/vectors, a
//! computation written against the Rust SDK that implements the case's
//! description and must answer the golden request with exactly the golden
//! response bytes, as sdk/go/golden_test.go's scripts do for the Go SDK.
//!
//! The init parameter `script` names the case; an init envelope without it
//! is one of the init cases, which read the parameters of
//! `init_parameters` and fail on the first missing or mistyped one.

use flowhost::{Batch, Computation, Error, Key, Params};

const SECOND: i64 = 1_000_000_000;

/// The scripted computation; `script` is the golden vector's name.
#[derive(Default)]
pub struct Golden {
    script: String,
}

flowhost::export!(Golden::default());

impl Computation for Golden {
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        if params.has("script") {
            self.script = params.str("script")?.to_string();
            return Ok(());
        }
        self.script = "init_parameters".to_string();
        require_parameters(params)
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let now = batch.watermarks().event;
        match self.script.as_str() {
            // Not a golden vector: parse_key's answers (keyfields_test.go).
            "keyfields" => batch.for_each_key(|k| {
                let key = k.key();
                for m in k.messages() {
                    let line = keyfields_line(key, std::str::from_utf8(m.payload)?);
                    k.emit("out", line).parent(&m);
                }
                Ok(())
            }),
            "empty_batch" => batch.for_each_key(|k| {
                k.emit("out", "");
                Ok(())
            }),
            "one_key_one_message" => batch.for_each_key(|k| {
                for m in k.messages() {
                    k.emit("out", m.payload.to_ascii_uppercase()).parent(&m);
                }
                Ok(())
            }),
            "many_keys" => batch.for_each_key(|k| {
                let n = k.messages().count();
                if n > 1 {
                    k.emit("counts", n.to_string());
                }
                Ok(())
            }),
            "unicode" => batch.for_each_key(|k| {
                let name = k.key();
                for m in k.messages() {
                    k.emit("echo", m.payload).key(name).parent(&m);
                }
                Ok(())
            }),
            "state_create" | "state_replace" | "state_delete" | "init_parameters" => batch.for_each_key(counter),
            "timers" => batch.for_each_key(|k| {
                for t in k.timers() {
                    k.emit("fired", [&b"timer:"[..], t.payload].concat()).parent(&t);
                }
                for m in k.messages() {
                    k.emit("fired", [&b"message:"[..], m.payload].concat()).parent(&m);
                }
                k.set_timer(now + 30 * SECOND);
                k.set_timer(now + 60 * SECOND);
                k.set_timer(now + 120 * SECOND).event_ts(now + 100 * SECOND).payload("late");
                k.cancel_timer(now + 30 * SECOND); // also drops the first set_timer
                Ok(())
            }),
            "explicit_parents" => batch.for_each_key(|k| {
                let (mut orders, mut payments) = (Vec::new(), Vec::new());
                let mut order_payloads = Vec::new();
                let (mut payment, mut last): (&[u8], i64) = (&[], 0);
                for m in k.messages() {
                    match m.stream {
                        "orders" => {
                            orders.push(m.input);
                            order_payloads.push(m.payload);
                        }
                        "payments" => {
                            payments.push(m.input);
                            payment = m.payload;
                        }
                        _ => {}
                    }
                    last = m.alignment_ts;
                }
                k.emit("joined", order_payloads.join(&b'+')).parents(orders);
                k.emit("joined", payment).key("customer-1").event_ts(-1000).parents(payments);
                let inputs = k.inputs();
                k.emit("audit", format!("{inputs} inputs")).event_ts(last + SECOND);
                Ok(())
            }),
            "map_kind" => batch.for_each_key(|k| {
                for m in k.messages() {
                    k.emit("lengths", m.payload.len().to_string()).parent(&m);
                }
                Ok(())
            }),
            "key_error" => batch.for_each_key(|k| {
                for m in k.messages() {
                    let text = String::from_utf8_lossy(m.payload);
                    match text.parse::<i64>() {
                        Ok(n) => {
                            k.emit("doubled", (2 * n).to_string()).parent(&m);
                        }
                        // The words of Go's strconv.Atoi, which the vector pins.
                        Err(_) => return Err(Error::new(format!("strconv.Atoi: parsing {text:?}: invalid syntax"))),
                    }
                }
                Ok(())
            }),
            "batch_error" => {
                batch.for_each_key(|k| {
                    k.emit("out", "dropped with the batch");
                    Ok(())
                })?;
                Err(Error::new("lookup table not loaded"))
            }
            other => Err(Error::new(format!("no script for golden vector {other:?}"))),
        }
    }
}

include!("keyfields_line.rs");

/// Keeps a decimal count of messages in the key's state: "clear" empties
/// the state, "reset" emits the final count and deletes it, "peek" changes
/// nothing.
fn counter(k: &mut Key) -> Result<(), Error> {
    // Like Go's strconv.Atoi with its error ignored: anything else is 0.
    let mut n: i64 = k.state().and_then(|s| std::str::from_utf8(s).ok()?.parse().ok()).unwrap_or(0);
    for m in k.messages() {
        match m.payload {
            b"clear" => k.set_state(""),
            b"reset" => {
                k.emit("final", n.to_string()).parent(&m);
                k.delete_state();
            }
            b"peek" => {}
            _ => {
                n += 1;
                k.set_state(n.to_string());
            }
        }
    }
    Ok(())
}

/// Reads every parameter of the init_parameters vector and fails on the
/// first missing or mistyped one.
fn require_parameters(p: &Params) -> Result<(), Error> {
    let window = p.duration("window")?;
    let threshold = p.int("threshold")?;
    let offset = p.int("offset")?;
    let ratio = p.float("ratio")?;
    let enabled = p.bool("enabled")?;
    let tags = p.strings("tags")?;
    let sink = p.map("sink")?;
    if !p.get("fallback").map_or(false, |v| v.is_null()) {
        return Err(Error::new("fallback: want a null parameter"));
    }
    let sink_ok = sink.get("name").and_then(|v| v.as_str()) == Some("alerts")
        && sink.get("retries").and_then(|v| v.as_int()) == Some(3);
    if window.as_secs() != 300 || threshold != 10 || offset != -3 || ratio != 0.25 || !enabled || tags != ["a", "b"] || !sink_ok {
        return Err(Error::new("parameters read back wrong"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The golden vectors natively, through the SDK's dispatch: the Go
    //! tests of sdk/rust run the same scripts compiled to WebAssembly
    //! through the host's engine.

    use super::*;
    use flowhost::Guest;
    use serde_cbor::Value;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    fn vectors() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../abi/testdata/vectors")
    }

    fn read(name: &str, suffix: &str) -> Option<Vec<u8>> {
        std::fs::read(vectors().join(format!("{name}.{suffix}.cbor"))).ok()
    }

    /// The case's declared output streams, from the vector's JSON: the
    /// list of plain names after "output_streams" (serde_json is not a
    /// dependency, and the names need no unescaping).
    fn output_streams(name: &str) -> Vec<Value> {
        let doc = std::fs::read_to_string(vectors().join(format!("{name}.json"))).unwrap();
        let at = doc.find("\"output_streams\"").unwrap_or_else(|| panic!("{name}.json has no output_streams"));
        let list = &doc[at..];
        let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
        list.split(',')
            .map(|s| Value::Text(s.trim().trim_matches('"').to_string()))
            .filter(|v| v != &Value::Text(String::new()))
            .collect()
    }

    fn init_envelope(script: &str, streams: Vec<Value>) -> Vec<u8> {
        let mut m = BTreeMap::new();
        let t = |s: &str| Value::Text(s.to_string());
        m.insert(t("abi"), Value::Integer(1));
        m.insert(t("computation"), t("golden"));
        m.insert(t("kind"), t("transform"));
        m.insert(t("partition"), Value::Integer(0));
        m.insert(t("parameters"), Value::Map([(t("script"), t(script))].into_iter().collect()));
        m.insert(t("output_streams"), Value::Array(streams));
        serde_cbor::to_vec(&Value::Map(m)).unwrap()
    }

    #[test]
    fn golden_vectors() {
        let mut names: Vec<String> = std::fs::read_dir(vectors())
            .expect("abi/testdata/vectors")
            .filter_map(|e| e.ok()?.file_name().into_string().ok()?.strip_suffix(".json").map(String::from))
            .collect();
        names.sort();
        assert!(names.len() >= 14, "found only {names:?}");
        for name in &names {
            let mut guest = Guest::new(Golden::default());
            if let Some(init) = read(name, "init") {
                let got = guest.init(&init).map(|r| r.map(<[u8]>::to_vec));
                assert_eq!(got, Ok(read(name, "init_result")), "{name}: init result");
            }
            let request = match read(name, "request") {
                Some(r) => r,
                None => continue,
            };
            let want = read(name, "response").expect("a request vector needs a response");
            assert_eq!(guest.init(&init_envelope(name, output_streams(name))), Ok(None), "{name}: init");
            assert_eq!(guest.process(&request).map(<[u8]>::to_vec), Ok(want), "{name}: response");
        }
    }
}
