//! The structural rules of ABI v1 envelopes that serde cannot see (ABI.md
//! section 3): serde_cbor decodes types and fields, this module rejects
//! what it would let through — tags, indefinite lengths, `undefined` and
//! other simple values, maps with keys that are not text or that repeat,
//! and nesting deeper than the envelope limit — before serde runs.

/// The deepest nesting of arrays and maps an envelope may have; the
/// envelope's own map is level 1.
pub(crate) const MAX_DEPTH: usize = 32;

/// Checks that `data` is one CBOR map, with nothing after it, that obeys
/// the envelope rules. The error says what is wrong and at which byte.
pub(crate) fn check_envelope(data: &[u8]) -> Result<(), String> {
    let mut r = Reader { data, pos: 0, lenient: false };
    match data.first() {
        Some(b) if b >> 5 == 5 => {}
        Some(_) => return Err("the envelope is not a CBOR map".to_string()),
        None => return Err("the envelope is empty".to_string()),
    }
    r.item(1)?;
    if r.pos != data.len() {
        return Err(format!("{} bytes after the envelope", data.len() - r.pos));
    }
    Ok(())
}

/// Reads the `abi` field of an envelope leniently, as `abi.PeekVersion`
/// does, so that an envelope of another ABI version can be told from a
/// malformed one.
pub(crate) fn peek_version(data: &[u8]) -> Option<u64> {
    let mut r = Reader { data, pos: 0, lenient: true };
    let (major, ai, n) = r.head().ok()?;
    if major != 5 || ai == 31 {
        return None;
    }
    for _ in 0..n {
        let key_start = r.pos;
        r.item(1).ok()?;
        let key = &data[key_start..r.pos];
        if key == b"\x63abi" {
            let (major, _, v) = r.head().ok()?;
            return if major == 0 { Some(v) } else { None };
        }
        r.item(1).ok()?;
    }
    None
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Accept tags, indefinite lengths and every simple value (for
    /// peek_version).
    lenient: bool,
}

const INDEFINITE: u8 = 31;

/// The number of keys up to which a map's keys are checked for repeats
/// without allocating.
const SMALL_MAP: usize = 16;

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.data.get(self.pos).ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    fn truncated(&self) -> String {
        format!("unexpected end of the envelope at byte {}", self.pos)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let left = (self.data.len() - self.pos) as u64;
        if n > left {
            return Err(self.truncated());
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Reads an item's head: its major type, additional information and
    /// argument (0 for an indefinite length).
    fn head(&mut self) -> Result<(u8, u8, u64), String> {
        let at = self.pos;
        let b = self.byte()?;
        let (major, ai) = (b >> 5, b & 0x1f);
        let arg = match ai {
            0..=23 => u64::from(ai),
            24..=27 => {
                let bytes = self.take(1 << (ai - 24))?;
                bytes.iter().fold(0u64, |v, &b| v << 8 | u64::from(b))
            }
            INDEFINITE if (2..=5).contains(&major) => {
                if !self.lenient {
                    return Err(format!("indefinite-length item at byte {at}"));
                }
                0
            }
            _ => return Err(format!("malformed item head 0x{b:02x} at byte {at}")),
        };
        Ok((major, ai, arg))
    }

    /// Skips one item at nesting `depth` (the depth a container found here
    /// would have).
    fn item(&mut self, depth: usize) -> Result<(), String> {
        let at = self.pos;
        let (major, ai, n) = self.head()?;
        match major {
            0 | 1 => Ok(()),
            2 | 3 if ai == INDEFINITE => self.chunks(major),
            2 | 3 => self.take(n).map(|_| ()),
            4 | 5 => {
                if depth > MAX_DEPTH {
                    return Err(format!("nesting deeper than {MAX_DEPTH} levels at byte {at}"));
                }
                if ai == INDEFINITE {
                    return self.indefinite_container(major, depth);
                }
                if major == 4 {
                    for _ in 0..n {
                        self.item(depth + 1)?;
                    }
                    return Ok(());
                }
                self.map(n, depth, at)
            }
            6 if self.lenient => self.item(depth),
            6 => Err(format!("tag {n} at byte {at}: envelopes carry no tags")),
            _ => match ai {
                20 | 21 | 22 | 25 | 26 | 27 => Ok(()), // false, true, null, floats
                _ if self.lenient => Ok(()),
                23 => Err(format!("undefined at byte {at}: envelopes carry no undefined")),
                _ => Err(format!("simple value at byte {at}: envelopes carry none")),
            },
        }
    }

    fn map(&mut self, n: u64, depth: usize, at: usize) -> Result<(), String> {
        // The envelope's maps are small: their keys are compared on the
        // stack, pair by pair, and only a large map's are sorted in a Vec.
        let mut few: [&'a [u8]; SMALL_MAP] = [&[]; SMALL_MAP];
        let mut many: Vec<&'a [u8]> = Vec::new();
        for i in 0..n {
            let key_at = self.pos;
            if !self.lenient && self.data.get(key_at).map(|b| b >> 5) != Some(3) {
                return Err(format!("map key at byte {key_at} is not a text string"));
            }
            self.item(depth + 1)?;
            let key = &self.data[key_at..self.pos];
            if i < SMALL_MAP as u64 {
                few[i as usize] = key;
            } else {
                if many.is_empty() {
                    many.extend_from_slice(&few);
                }
                many.push(key);
            }
            self.item(depth + 1)?;
        }
        if self.lenient {
            return Ok(());
        }
        let repeated = if many.is_empty() {
            let keys = &few[..n as usize];
            keys.iter().enumerate().find_map(|(i, k)| keys[..i].contains(k).then_some(*k))
        } else {
            many.sort_unstable();
            many.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
        };
        if let Some(k) = repeated {
            let name = String::from_utf8_lossy(k.get(1..).unwrap_or_default());
            return Err(format!("map at byte {at} repeats the key {name:?}"));
        }
        Ok(())
    }

    /// Skips the chunks of an indefinite-length string (lenient mode only).
    fn chunks(&mut self, major: u8) -> Result<(), String> {
        loop {
            if self.data.get(self.pos) == Some(&0xff) {
                self.pos += 1;
                return Ok(());
            }
            let (m, ai, n) = self.head()?;
            if m != major || ai == INDEFINITE {
                return Err(format!("bad chunk of an indefinite string before byte {}", self.pos));
            }
            self.take(n)?;
        }
    }

    /// Skips an indefinite-length array or map (lenient mode only).
    fn indefinite_container(&mut self, major: u8, depth: usize) -> Result<(), String> {
        let per_entry = if major == 5 { 2 } else { 1 };
        loop {
            if self.data.get(self.pos) == Some(&0xff) {
                self.pos += 1;
                return Ok(());
            }
            for _ in 0..per_entry {
                self.item(depth + 1)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed_envelopes() {
        // {"abi": 1, "x": [1.5 (f16), null, true, h'00', -2]}
        let ok = b"\xa2\x63abi\x01\x61x\x85\xf9\x3e\x00\xf6\xf5\x41\x00\x21";
        assert_eq!(check_envelope(ok), Ok(()));
    }

    #[test]
    fn rejects_what_the_abi_forbids() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "empty"),
            (b"\x80", "not a CBOR map"),
            (b"\xa1\x61a\x01\x00", "1 bytes after the envelope"),
            (b"\xa1\x61a\xc1\x01", "tag 1"),
            (b"\xa1\x61a\x9f\xff", "indefinite-length"),
            (b"\xbf\xff", "indefinite-length"),
            (b"\xa1\x61a\x7f\xff", "indefinite-length"),
            (b"\xa1\x61a\xf7", "undefined"),
            (b"\xa1\x61a\xf0", "simple value"),
            (b"\xa1\x61a\xf8\x20", "simple value"),
            (b"\xa1\x61a\x1c", "malformed item head 0x1c"),
            (b"\xa2\x61a\x01\x61a\x02", "repeats the key \"a\""),
            (b"\xa1\x01\x01", "is not a text string"),
            (b"\xa1\x61a\x5a\x00\x00\x00\x10", "unexpected end"),
            (b"\xa1\x61a", "unexpected end"),
        ];
        for (data, want) in cases {
            let err = check_envelope(data).expect_err(want);
            assert!(err.contains(want), "{data:x?}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn finds_repeated_keys_in_small_and_large_maps() {
        // A map of n one-letter keys a, b, c, ..., the last replaced by `last`.
        let map = |n: u8, last: u8| {
            let mut v = vec![0xb8, n];
            for i in 0..n {
                v.extend_from_slice(&[0x61, if i == n - 1 { last } else { b'a' + i }, 0x01]);
            }
            v
        };
        for n in [2, 16, 17, 40] {
            assert_eq!(check_envelope(&map(n, b'a' + n - 1)), Ok(()), "{n} distinct keys");
            let err = check_envelope(&map(n, b'a')).unwrap_err();
            assert!(err.contains("repeats the key \"a\""), "{n} keys: {err}");
        }
    }

    #[test]
    fn limits_nesting_to_the_envelope_depth() {
        // A map holding arrays nested `levels` deep in all.
        let nested = |levels: usize| {
            let mut v = b"\xa1\x61a".to_vec();
            v.extend(std::iter::repeat(0x81).take(levels - 2));
            v.push(0x80);
            v
        };
        assert_eq!(check_envelope(&nested(MAX_DEPTH)), Ok(()));
        let err = check_envelope(&nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(err.contains("nesting deeper than 32"), "{err}");
    }

    #[test]
    fn peeks_the_version_of_envelopes_it_cannot_decode() {
        // {"new": tag 1 (indefinite array), "abi": 2}
        let v2 = b"\xa2\x63new\xc1\x9f\x01\xff\x63abi\x02";
        assert_eq!(peek_version(v2), Some(2));
        assert_eq!(peek_version(b"\xa1\x63abi\x01"), Some(1));
        assert_eq!(peek_version(b"\xa1\x63abi\x61x"), None);
        assert_eq!(peek_version(b"\xa1\x63abx\x01"), None);
        assert_eq!(peek_version(b"\x81\x01"), None);
        assert_eq!(peek_version(b""), None);
    }
}
