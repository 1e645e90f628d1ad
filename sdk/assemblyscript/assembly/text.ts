// Text helpers that reproduce the Go SDK's wording: strconv.Quote and
// strconv.ParseInt, whose messages end up in error texts that conformance
// compares across languages.

import { encodeUTF8 } from "./cbor";

const HEX = "0123456789abcdef";

/**
 * Reports whether Go's unicode.IsPrint holds for the code point, for
 * everything strconv.Quote meets in practice: ASCII exactly; beyond it,
 * every assigned graphic character is printable and the format, control,
 * separator and private-use ranges listed here are not (unassigned code
 * points count as printable, where Go escapes them).
 */
function isPrint(c: u32): bool {
  if (c < 0x80) return c >= 0x20 && c < 0x7f;
  if (c <= 0xa0 || c == 0xad) return false; // C1 controls, no-break space, soft hyphen
  if (c == 0x61c || c == 0x1680 || c == 0x180e) return false;
  if (c >= 0x2000 && c <= 0x200f) return false; // spaces and zero-width formats
  if (c >= 0x2028 && c <= 0x202f) return false;
  if (c >= 0x205f && c <= 0x206f) return false;
  if (c == 0x3000 || c == 0xfeff) return false;
  if (c >= 0xd800 && c <= 0xf8ff) return false; // surrogates and private use
  if (c >= 0xfff9 && c <= 0xfffb) return false;
  if (c >= 0xf0000) return false; // private use planes
  return true;
}

function hexEscape(out: string, prefix: string, v: u32, digits: i32): string {
  out += prefix;
  for (let shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += HEX.charAt(<i32>((v >> <u32>shift) & 0xf));
  return out;
}

/**
 * Quotes raw bytes the way Go's strconv.Quote quotes a string holding
 * them: printable characters as they are, the usual backslash escapes,
 * \xNN for invalid UTF-8 bytes and control characters, \uNNNN and
 * \UNNNNNNNN for other non-printable code points.
 */
export function quoteBytes(b: Uint8Array): string {
  let out = "\"";
  const n = b.length;
  let i = 0;
  while (i < n) {
    const b0 = <u32>b[i];
    let cp: u32 = 0;
    let size = 0;
    if (b0 < 0x80) {
      cp = b0;
      size = 1;
    } else if (b0 >= 0xc2 && b0 <= 0xdf && i + 1 < n && (<u32>b[i + 1] & 0xc0) == 0x80) {
      cp = (b0 & 0x1f) << 6 | (<u32>b[i + 1] & 0x3f);
      size = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef && i + 2 < n) {
      const b1 = <u32>b[i + 1];
      const lo: u32 = b0 == 0xe0 ? 0xa0 : 0x80;
      const hi: u32 = b0 == 0xed ? 0x9f : 0xbf;
      if (b1 >= lo && b1 <= hi && (<u32>b[i + 2] & 0xc0) == 0x80) {
        cp = (b0 & 0x0f) << 12 | (b1 & 0x3f) << 6 | (<u32>b[i + 2] & 0x3f);
        size = 3;
      }
    } else if (b0 >= 0xf0 && b0 <= 0xf4 && i + 3 < n) {
      const b1 = <u32>b[i + 1];
      const lo: u32 = b0 == 0xf0 ? 0x90 : 0x80;
      const hi: u32 = b0 == 0xf4 ? 0x8f : 0xbf;
      if (b1 >= lo && b1 <= hi && (<u32>b[i + 2] & 0xc0) == 0x80 && (<u32>b[i + 3] & 0xc0) == 0x80) {
        cp = (b0 & 0x07) << 18 | (b1 & 0x3f) << 12 | (<u32>b[i + 2] & 0x3f) << 6 | (<u32>b[i + 3] & 0x3f);
        size = 4;
      }
    }
    if (size == 0) {
      out = hexEscape(out, "\\x", b0, 2);
      i++;
      continue;
    }
    if (cp == 0x22 || cp == 0x5c) {
      out += "\\" + String.fromCharCode(cp);
    } else if (isPrint(cp)) {
      out += String.fromCodePoint(cp);
    } else if (cp == 0x07) out += "\\a";
    else if (cp == 0x08) out += "\\b";
    else if (cp == 0x0c) out += "\\f";
    else if (cp == 0x0a) out += "\\n";
    else if (cp == 0x0d) out += "\\r";
    else if (cp == 0x09) out += "\\t";
    else if (cp == 0x0b) out += "\\v";
    else if (cp < 0x20 || cp == 0x7f) out = hexEscape(out, "\\x", cp, 2);
    else if (cp < 0x10000) out = hexEscape(out, "\\u", cp, 4);
    else out = hexEscape(out, "\\U", cp, 8);
    i += size;
  }
  return out + "\"";
}

/** Quotes s the way Go's strconv.Quote does (see quoteBytes). */
export function quote(s: string): string {
  return quoteBytes(encodeUTF8(s));
}

/** The result of parseInt: value, or an error in Go's words. */
export class ParsedInt {
  value: i64 = 0;
  error: string | null = null;
}

/**
 * Parses a decimal int64 the way Go's strconv.ParseInt(s, 10, 64) does: an
 * optional sign and at least one digit, nothing else. Its errors read
 * `strconv.ParseInt: parsing "x": invalid syntax` or `... value out of
 * range`.
 */
export function parseInt64(s: string): ParsedInt {
  const r = new ParsedInt();
  let i = 0;
  let neg = false;
  if (s.length > 0 && (s.charCodeAt(0) == 0x2b || s.charCodeAt(0) == 0x2d)) {
    neg = s.charCodeAt(0) == 0x2d;
    i = 1;
  }
  if (i == s.length) {
    r.error = "strconv.ParseInt: parsing " + quote(s) + ": invalid syntax";
    return r;
  }
  // As Go: the digits are read as a uint64, where an overflow is reported
  // at once; the int64 range is checked after the last digit.
  let v: u64 = 0;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) {
      r.error = "strconv.ParseInt: parsing " + quote(s) + ": invalid syntax";
      return r;
    }
    const d = <u64>(c - 0x30);
    if (v > (u64.MAX_VALUE - d) / 10) {
      r.error = "strconv.ParseInt: parsing " + quote(s) + ": value out of range";
      return r;
    }
    v = v * 10 + d;
  }
  if (v > (neg ? <u64>1 << 63 : <u64>i64.MAX_VALUE)) {
    r.error = "strconv.ParseInt: parsing " + quote(s) + ": value out of range";
    return r;
  }
  r.value = neg ? <i64>(0 - v) : <i64>v;
  return r;
}
