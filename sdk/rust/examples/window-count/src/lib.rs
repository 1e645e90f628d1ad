//! window-count, written with the Rust SDK: the twin of the Go example
//! examples/plugins/window-count, with the same parameters, outputs, state
//! and timers, byte for byte. It counts each key's messages in tumbling
//! windows of event time and, once the watermark says a window is
//! complete, emits
//!
//! ```text
//! {"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":42}
//! ```
//!
//! on its one output stream (timestamps in nanoseconds since the Unix
//! epoch; key is the value of the group_by field, or the list of values
//! when there are several). The parameter `window` (a duration, default
//! 1m) sets the window length; windows are aligned to the Unix epoch.
//!
//! - A message with EventTimestamp t belongs to the window
//!   [floor(t/window)*window, +window). The key's state holds the open
//!   windows and their counts, as the JSON the Go example writes
//!   (`{"windows":[{"start":...,"count":...}]}`), so either build can take
//!   over the other's state.
//! - Opening a window sets a timer at its end, with the window's last
//!   instant as its EventTimestamp. The host fires it when the watermark of
//!   the timer stream reaches the end: the host decides when a window is
//!   complete, not this code.
//! - A fired timer emits the windows that ended, removes them from the
//!   state and deletes the state when no window is left open.
//!
//! Late data: a message that arrives after its window's timer fired opens
//! the window again, which is then emitted a second time, counting only
//! the late messages.

use flowhost::{Batch, Computation, Error, Key, Params};

const MINUTE: u64 = 60_000_000_000;

/// The computation: its configuration, read once per instance.
pub struct WindowCount {
    /// The window length in nanoseconds.
    window: i64,
    output: String,
}

impl WindowCount {
    /// A window-count with the defaults, configured by init.
    pub fn new() -> Self {
        WindowCount { window: MINUTE as i64, output: String::new() }
    }
}

impl Default for WindowCount {
    fn default() -> Self {
        Self::new()
    }
}

flowhost::export!(WindowCount::new());

/// One open window of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    start: i64,
    count: i64,
}

impl Computation for WindowCount {
    fn init(&mut self, p: &Params) -> Result<(), Error> {
        self.window = MINUTE as i64;
        if p.has("window") {
            let d = p.duration("window")?;
            if d.is_zero() {
                return Err(Error::new("parameter \"window\": must be positive, got 0s"));
            }
            self.window = i64::try_from(d.as_nanos()).map_err(|_| Error::new("parameter \"window\": too long"))?;
        }
        match p.output_streams() {
            [one] => self.output = one.clone(),
            outs => {
                return Err(Error::new(format!(
                    "window-count writes exactly one output stream; the pipeline declares {}",
                    outs.len()
                )))
            }
        }
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        batch.for_each_key(|k| self.count(k))
    }
}

impl WindowCount {
    fn count(&self, k: &mut Key) -> Result<(), Error> {
        let size = self.window;
        let mut windows = match k.state() {
            Some(raw) => parse_state(raw).map_err(|e| Error::new(format!("state of key {}: {e}", k.key())))?,
            None => Vec::new(),
        };
        let key = key_value(k.key())?;
        for t in k.timers() {
            // Every window that ended by the trigger is complete; normally
            // exactly the one the timer was set for.
            let done = windows.iter().take_while(|w| w.start.wrapping_add(size) <= t.trigger_ts).count();
            for w in windows.drain(..done) {
                let end = w.start.wrapping_add(size);
                let out = format!(
                    "{{\"key\":{key},\"window_start\":{},\"window_end\":{end},\"count\":{}}}",
                    w.start, w.count
                );
                k.emit(&self.output, out).parent(&t);
            }
        }
        for m in k.messages() {
            let start = floor_div(m.event_ts, size).wrapping_mul(size);
            match windows.binary_search_by_key(&start, |w| w.start) {
                Ok(i) => windows[i].count += 1,
                Err(i) => {
                    windows.insert(i, Window { start, count: 1 });
                    let end = start.wrapping_add(size);
                    k.set_timer(end).event_ts(end.wrapping_sub(1));
                }
            }
        }
        if windows.is_empty() {
            if k.state().is_some() {
                k.delete_state();
            }
            return Ok(());
        }
        k.set_state(write_state(&windows));
        Ok(())
    }
}

/// Rounds toward negative infinity, so that windows before 1970 are aligned
/// the same way as those after.
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// The state as Go's encoding/json writes the Go example's state.
fn write_state(windows: &[Window]) -> String {
    let mut s = String::from("{\"windows\":[");
    for (i, w) in windows.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{{\"start\":{},\"count\":{}}}", w.start, w.count));
    }
    s.push_str("]}");
    s
}

/// Reads the state write_state (or the Go example) wrote.
fn parse_state(raw: &[u8]) -> Result<Vec<Window>, String> {
    let bad = || format!("not a window-count state: {}", String::from_utf8_lossy(raw));
    let text = std::str::from_utf8(raw).map_err(|_| bad())?;
    let body = text.strip_prefix("{\"windows\":[").and_then(|s| s.strip_suffix("]}")).ok_or_else(bad)?;
    let mut windows: Vec<Window> = Vec::new();
    if body.is_empty() {
        return Ok(windows);
    }
    for entry in body.split("},") {
        let entry = entry.strip_suffix('}').unwrap_or(entry);
        let (start, count) = entry
            .strip_prefix("{\"start\":")
            .and_then(|s| s.split_once(",\"count\":"))
            .ok_or_else(bad)?;
        let w = Window { start: start.parse().map_err(|_| bad())?, count: count.parse().map_err(|_| bad())? };
        if windows.last().map_or(false, |last| last.start >= w.start) {
            return Err(bad());
        }
        windows.push(w);
    }
    Ok(windows)
}

/// Turns the host's canonical key text (a compact JSON array of the
/// group_by values) into what the output's "key" holds: the value itself
/// for one group_by field, the list for several, null for none. The text is
/// already JSON; like Go's encoding/json, the output escapes <, > and &
/// (and U+2028, U+2029) inside strings.
fn key_value(text: &str) -> Result<String, Error> {
    if text.is_empty() {
        return Ok("null".to_string());
    }
    let elements = top_level_elements(text).ok_or_else(|| Error::new(format!("key {text} is not a JSON array")))?;
    let value = if elements.len() == 1 { elements[0] } else { text };
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The texts of the elements of a compact JSON array, or None when `text`
/// is not one array.
fn top_level_elements(text: &str) -> Option<Vec<&str>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let mut elements = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0usize, false, false, 0usize);
    for (i, b) in inner.bytes().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.checked_sub(1)?,
            b',' if depth == 0 => {
                elements.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if in_string || depth != 0 {
        return None;
    }
    if !inner.is_empty() {
        elements.push(&inner[start..]);
    }
    if elements.iter().any(|e| e.is_empty()) {
        return None;
    }
    Some(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_div_rounds_down() {
        assert_eq!(floor_div(7, 2), 3);
        assert_eq!(floor_div(-7, 2), -4);
        assert_eq!(floor_div(-6, 2), -3);
        assert_eq!(floor_div(0, 5), 0);
    }

    #[test]
    fn state_round_trips_in_the_go_format() {
        let w = vec![Window { start: -60, count: 2 }, Window { start: 0, count: 1 }];
        let text = write_state(&w);
        assert_eq!(text, r#"{"windows":[{"start":-60,"count":2},{"start":0,"count":1}]}"#);
        assert_eq!(parse_state(text.as_bytes()), Ok(w));
        for bad in ["", "{}", r#"{"windows":[{"start":1}]}"#, r#"{"windows":[{"start":2,"count":1},{"start":1,"count":1}]}"#] {
            assert!(parse_state(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn key_values_are_what_go_marshals() {
        let cases = [
            ("", "null"),
            (r#"["ann"]"#, r#""ann""#),
            (r#"[3]"#, "3"),
            (r#"["o-17",3]"#, r#"["o-17",3]"#),
            (r#"["a,b]"]"#, r#""a,b]""#),
            (r#"["q\"<&>"]"#, r#""q\"\u003c\u0026\u003e""#),
            (r#"[{"a":[1,2]}]"#, r#"{"a":[1,2]}"#),
            ("[]", "[]"),
        ];
        for (text, want) in cases {
            assert_eq!(key_value(text), Ok(want.to_string()), "{text}");
        }
        for bad in ["x", "[", r#"["a"#, "[1,]", "[,1]"] {
            assert!(key_value(bad).is_err(), "{bad}");
        }
    }
}
