//! The Rust SDK's conformance guest: a computation that interprets each
//! input message as the script of sdk/conformance/SCRIPT.md, so that the
//! conformance suite can drive every corner of ABI v1 through it and
//! compare its responses with the Go guest's (sdk/conformance/goguest),
//! which is the reference where SCRIPT.md leaves a choice open. Error
//! texts of malformed commands are the Go guest's, word for word.

use flowhost::{Computation, Error, Key, Message, Params, Value};

/// The stream every echo, timer, showstate, param and meta goes to.
const OUT: &str = "out";

/// The script interpreter; it keeps the parameters for `param:`.
#[derive(Default)]
pub struct Conformance {
    params: Option<Params>,
}

flowhost::export!(Conformance::default());

impl Computation for Conformance {
    /// Keeps the parameters and refuses to start when fail_init is a text
    /// parameter; a fail_init of another type is ignored, as SCRIPT.md
    /// names only a text string.
    fn init(&mut self, params: &Params) -> Result<(), Error> {
        self.params = Some(params.clone());
        match params.get("fail_init") {
            Some(Value::Text(s)) => Err(Error::new(s.as_str())),
            _ => Ok(()),
        }
    }

    /// Runs every key's due timers, then its messages, in order. A
    /// failbatch command ends the batch at once.
    fn process(&mut self, batch: &mut flowhost::Batch) -> Result<(), Error> {
        let params = self.params.as_ref();
        batch.for_each_key(|k| {
            for t in k.timers() {
                let text = [format!("timer:{}:", t.trigger_ts).as_bytes(), t.payload].concat();
                k.emit(OUT, text).parent(&t);
            }
            for m in k.messages() {
                let script = match m.payload.strip_prefix(b"!") {
                    Some(s) => s,
                    None => {
                        k.emit(OUT, m.payload).parent(&m);
                        continue;
                    }
                };
                for cmd in script.split(|&b| b == b';') {
                    run(k, &m, cmd, params)?;
                }
            }
            Ok(())
        })
    }
}

/// The number of arguments of each verb; the last one takes the rest of
/// the command, colons included.
fn arity(verb: &[u8]) -> Option<usize> {
    Some(match verb {
        b"emit" | b"emitall" | b"emitnone" => 2,
        b"emitk" | b"emite" | b"timerp" => 3,
        b"state" | b"timer" | b"cancel" | b"param" | b"failkey" | b"failbatch" => 1,
        b"append" | b"delstate" | b"showstate" | b"meta" => 0,
        _ => return None,
    })
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Executes one command of message `m` on key `k`. It returns an error
/// only for failbatch; every other failure fails the key and lets the
/// script go on (the key's first failure is the one reported).
fn run(k: &mut Key, m: &Message, cmd: &[u8], params: Option<&Params>) -> Result<(), Error> {
    let (verb, rest) = match cmd.iter().position(|&b| b == b':') {
        Some(i) => (&cmd[..i], Some(&cmd[i + 1..])),
        None => (cmd, None),
    };
    let n = match arity(verb) {
        Some(n) => n,
        None => {
            k.fail(Error::new(format!("unknown command {}", text(verb))));
            return Ok(());
        }
    };
    let mut args: Vec<&[u8]> = Vec::new();
    if n > 0 {
        if let Some(rest) = rest {
            args = rest.splitn(n, |&b| b == b':').collect();
        }
        if args.len() != n {
            let msg = format!("bad command {}: {} takes {n} arguments", go_quote(cmd), text(verb));
            k.fail(Error::new(msg));
            return Ok(());
        }
    }
    // Numeric arguments are parsed up front so that a bad one fails the
    // key before the command has any effect.
    let number = |k: &mut Key, s: &[u8]| match parse_int(s) {
        Ok(v) => Some(v),
        Err(e) => {
            k.fail(Error::new(format!("bad command {}: {e}", go_quote(cmd))));
            None
        }
    };
    match verb {
        b"emit" => {
            k.emit(&text(args[0]), args[1]).parent(m);
        }
        b"emitk" => {
            k.emit(&text(args[0]), args[2]).parent(m).key(text(args[1]));
        }
        b"emite" => {
            if let Some(e) = number(k, args[1]) {
                k.emit(&text(args[0]), args[2]).parent(m).event_ts(e);
            }
        }
        b"emitall" => {
            let every = 0..k.inputs();
            k.emit(&text(args[0]), args[1]).parents(every);
        }
        b"emitnone" => {
            k.emit(&text(args[0]), args[1]).all_parents();
        }
        b"state" => k.set_state(args[0]),
        b"append" => {
            let state = [k.state().unwrap_or_default(), m.id.as_bytes(), b","].concat();
            k.set_state(state);
        }
        b"delstate" => k.delete_state(),
        b"showstate" => {
            let shown = match k.state() {
                Some(s) => [&b"state:"[..], s].concat(),
                None => b"state:none".to_vec(),
            };
            k.emit(OUT, shown).parent(m);
        }
        b"timer" => {
            if let Some(tr) = number(k, args[0]) {
                k.set_timer(tr);
            }
        }
        b"timerp" => {
            if let Some(tr) = number(k, args[0]) {
                if let Some(e) = number(k, args[1]) {
                    k.set_timer(tr).event_ts(e).payload(args[2]);
                }
            }
        }
        b"cancel" => {
            if let Some(tr) = number(k, args[0]) {
                k.cancel_timer(tr);
            }
        }
        b"param" => {
            let name = text(args[0]);
            let shown = format!("param:{name}={}", param_text(params, &name));
            k.emit(OUT, shown).parent(m);
        }
        b"meta" => {
            let b = k.batch();
            let wm = b.watermarks();
            let shown = format!(
                "meta:key={},stream={},id={},event={},system={},alignment={},wm={}/{},partition={},epoch={},computation={},kind={}",
                k.key(),
                m.stream,
                m.id,
                m.event_ts,
                m.system_ts,
                m.alignment_ts,
                wm.event,
                wm.system,
                b.partition(),
                b.epoch(),
                b.computation(),
                b.kind()
            );
            k.emit(OUT, shown).parent(m);
        }
        b"failkey" => k.fail(Error::new(text(args[0]))),
        b"failbatch" => return Err(Error::batch(text(args[0]))),
        _ => unreachable!("arity lists every verb"),
    }
    Ok(())
}

/// Renders a parameter the way `param:` reports it.
fn param_text(params: Option<&Params>, name: &str) -> String {
    match params.and_then(|p| p.get(name)) {
        None => "missing".to_string(),
        Some(Value::Text(s)) => s.clone(),
        Some(Value::Int(i)) => i.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(_) => "?".to_string(),
    }
}

/// Parses a decimal int64 exactly as Go's `strconv.ParseInt(s, 10, 64)`
/// does, with its error text: the first bad digit or overflow, scanning
/// left to right, decides between "invalid syntax" and "value out of
/// range".
fn parse_int(s: &[u8]) -> Result<i64, String> {
    let fail = |why: &str| format!("strconv.ParseInt: parsing {}: {why}", go_quote(s));
    let (neg, digits) = match s.first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(fail("invalid syntax"));
    }
    let mut n: u64 = 0;
    let mut overflow = false;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(fail("invalid syntax"));
        }
        match n.checked_mul(10).and_then(|v| v.checked_add(u64::from(c - b'0'))) {
            Some(v) => n = v,
            None => {
                // Go's ParseUint stops at the first overflow.
                overflow = true;
                break;
            }
        }
    }
    const CUTOFF: u64 = 1 << 63;
    if overflow || (!neg && n >= CUTOFF) || (neg && n > CUTOFF) {
        return Err(fail("value out of range"));
    }
    Ok(if neg { (n as i64).wrapping_neg() } else { n as i64 })
}

/// Quotes bytes the way Go's `strconv.Quote` does: printable characters as
/// themselves, the usual backslash escapes, invalid UTF-8 as `\x..`, other
/// non-printable characters as `\u....`. Go's table of printable
/// characters is approximated by treating controls, spaces and format
/// characters outside ASCII as non-printable.
fn go_quote(s: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut rest = s;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(v) => (v, &[][..]),
            Err(e) => {
                let (v, b) = rest.split_at(e.valid_up_to());
                (std::str::from_utf8(v).unwrap_or_default(), b)
            }
        };
        for c in valid.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\x0c' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x0b' => out.push_str("\\v"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
                c if !c.is_ascii() && (c.is_control() || c.is_whitespace() || is_format(c)) => {
                    if (c as u32) < 0x10000 {
                        out.push_str(&format!("\\u{:04x}", c as u32));
                    } else {
                        out.push_str(&format!("\\U{:08x}", c as u32));
                    }
                }
                c => out.push(c),
            }
        }
        if let Some(&b) = bad.first() {
            out.push_str(&format!("\\x{b:02x}"));
            rest = &bad[1..];
        } else {
            rest = &[];
        }
    }
    out.push('"');
    out
}

/// Common Unicode format characters (category Cf), which Go does not print.
fn is_format(c: char) -> bool {
    matches!(c as u32, 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x180e | 0x200b..=0x200f | 0x202a..=0x202e
        | 0x2060..=0x2064 | 0x2066..=0x206f | 0xfeff | 0xfff9..=0xfffb | 0xe0001 | 0xe0020..=0xe007f)
        || (0xe000..=0xf8ff).contains(&(c as u32))
        || c as u32 >= 0xf0000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_matches_go() {
        let cases: &[(&[u8], Result<i64, &str>)] = &[
            (b"0", Ok(0)),
            (b"-12", Ok(-12)),
            (b"+7", Ok(7)),
            (b"9223372036854775807", Ok(i64::MAX)),
            (b"-9223372036854775808", Ok(i64::MIN)),
            (b"9223372036854775808", Err("strconv.ParseInt: parsing \"9223372036854775808\": value out of range")),
            (b"-9223372036854775809", Err("strconv.ParseInt: parsing \"-9223372036854775809\": value out of range")),
            // Go's ParseUint gives up at the overflow before it sees the x.
            (b"99999999999999999999x", Err("strconv.ParseInt: parsing \"99999999999999999999x\": value out of range")),
            // No uint64 overflow, so the x is a syntax error.
            (b"9223372036854775808x", Err("strconv.ParseInt: parsing \"9223372036854775808x\": invalid syntax")),
            (b"", Err("strconv.ParseInt: parsing \"\": invalid syntax")),
            (b"-", Err("strconv.ParseInt: parsing \"-\": invalid syntax")),
            (b"1_000", Err("strconv.ParseInt: parsing \"1_000\": invalid syntax")),
            (b" 1", Err("strconv.ParseInt: parsing \" 1\": invalid syntax")),
        ];
        for (s, want) in cases {
            assert_eq!(parse_int(s), want.map_err(String::from), "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote(b"emit:out"), "\"emit:out\"");
        assert_eq!(go_quote(b"a\"\\\n\x00\x7f"), "\"a\\\"\\\\\\n\\x00\\x7f\"");
        assert_eq!(go_quote("é\u{a0}\u{200b}".as_bytes()), "\"é\\u00a0\\u200b\"");
        assert_eq!(go_quote(b"\xff\xfeok"), "\"\\xff\\xfeok\"");
    }
}
