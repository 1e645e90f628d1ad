// The group_by key as typed fields: the port of the Go SDK's ParseKey
// (sdk/go/state_key.go, sdk/JOINS.md), with the same rules and error
// texts. The key is a string (UTF-16); every JSON structural character is
// ASCII, so scanning code units reads the same JSON as Go's bytes.

import { quote } from "./text";

/** Go's encoding/json maxNestingDepth. */
const MAX_DEPTH = 10000;

/**
 * The error of parseKey or a KeyFields accessor: its text is the Go SDK's
 * *KeyError text (`key ["x"]: field "id": expected an integer, got "x"`).
 */
export class KeyError {
  constructor(
    /** The key text (`""` for the unkeyed key). */
    public key: string,
    /** The group_by field concerned, or "" when the key as a whole is wrong. */
    public field: string,
    /** What is wrong. */
    public msg: string,
  ) {}

  /** The text Go's KeyError.Error returns. */
  toString(): string {
    if (this.field.length == 0) return "key " + this.key + ": " + this.msg;
    return "key " + this.key + ": field " + quote(this.field) + ": " + this.msg;
  }
}

function quoteList(names: string[]): string {
  let s = "[";
  for (let i = 0; i < names.length; i++) {
    if (i > 0) s += " ";
    s += quote(names[i]);
  }
  return s + "]";
}

function isWs(c: i32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

function ws(s: string, i: i32): i32 {
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  return i;
}

function isHex(c: i32): bool {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

function isDigit(c: i32): bool {
  return c >= 0x30 && c <= 0x39;
}

/** The end of the string literal at i, or -1. */
function stringEnd(s: string, i: i32): i32 {
  i++;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c == 0x22) return i + 1;
    if (c < 0x20) return -1;
    if (c != 0x5c) {
      i++;
      continue;
    }
    if (i + 1 >= s.length) return -1;
    const e = s.charCodeAt(i + 1);
    if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
      i += 2;
    } else if (e == 0x75) {
      if (i + 6 > s.length) return -1;
      for (let j = i + 2; j < i + 6; j++) if (!isHex(s.charCodeAt(j))) return -1;
      i += 6;
    } else {
      return -1;
    }
  }
  return -1;
}

function digits(s: string, i: i32): i32 {
  while (i < s.length && isDigit(s.charCodeAt(i))) i++;
  return i;
}

/** The end of the number at i, or -1. */
function numberEnd(s: string, i: i32): i32 {
  if (i < s.length && s.charCodeAt(i) == 0x2d) i++;
  if (i >= s.length) return -1;
  const c = s.charCodeAt(i);
  if (c == 0x30) i++;
  else if (c >= 0x31 && c <= 0x39) i = digits(s, i);
  else return -1;
  if (i < s.length && s.charCodeAt(i) == 0x2e) {
    const j = digits(s, i + 1);
    if (j == i + 1) return -1;
    i = j;
  }
  if (i < s.length && (s.charCodeAt(i) == 0x65 || s.charCodeAt(i) == 0x45)) {
    i++;
    if (i < s.length && (s.charCodeAt(i) == 0x2b || s.charCodeAt(i) == 0x2d)) i++;
    const j = digits(s, i);
    if (j == i) return -1;
    i = j;
  }
  return i;
}

function validNumber(s: string): bool {
  return s.length > 0 && numberEnd(s, 0) == s.length;
}

function lit(s: string, i: i32, w: string): i32 {
  return s.substr(i, w.length) == w ? i + w.length : -1;
}

function memberKey(s: string, i: i32): i32 {
  if (i >= s.length || s.charCodeAt(i) != 0x22) return -1;
  i = stringEnd(s, i);
  if (i < 0) return -1;
  i = ws(s, i);
  if (i >= s.length || s.charCodeAt(i) != 0x3a) return -1;
  return ws(s, i + 1);
}

/** The end of the value at i, or -1; iterative, so that deep nesting
 * cannot exhaust the stack. depth counts the containers already open. */
function valueEnd(s: string, i: i32, depth: i32): i32 {
  const stack: bool[] = []; // true for an object
  while (true) {
    if (i >= s.length) return -1;
    const c = s.charCodeAt(i);
    if (c == 0x7b || c == 0x5b) {
      const obj = c == 0x7b;
      if (depth + stack.length > MAX_DEPTH) return -1;
      stack.push(obj);
      i = ws(s, i + 1);
      if (i < s.length && s.charCodeAt(i) == (obj ? 0x7d : 0x5d)) {
        stack.pop();
        i++;
      } else {
        if (obj && (i = memberKey(s, i)) < 0) return -1;
        continue;
      }
    } else if (c == 0x22) {
      i = stringEnd(s, i);
    } else if (c == 0x74) {
      i = lit(s, i, "true");
    } else if (c == 0x66) {
      i = lit(s, i, "false");
    } else if (c == 0x6e) {
      i = lit(s, i, "null");
    } else {
      i = numberEnd(s, i);
    }
    if (i < 0) return -1;
    while (true) {
      if (stack.length == 0) return i;
      const obj = stack[stack.length - 1];
      i = ws(s, i);
      if (i >= s.length) return -1;
      const d = s.charCodeAt(i);
      if (d == 0x2c) {
        i = ws(s, i + 1);
        if (obj && (i = memberKey(s, i)) < 0) return -1;
        break;
      }
      if (d == (obj ? 0x7d : 0x5d)) {
        stack.pop();
        i++;
        continue;
      }
      return -1;
    }
  }
  return -1;
}

function hex4(s: string, i: i32): i32 {
  if (i + 6 > s.length || s.charCodeAt(i) != 0x5c || s.charCodeAt(i + 1) != 0x75) return -1;
  let r = 0;
  for (let j = i + 2; j < i + 6; j++) {
    const c = s.charCodeAt(j);
    const h = c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x61 + 10;
    r = r * 16 + h;
  }
  return r;
}

/** The text of the valid string literal raw, as Go decodes it: lone or
 * mismatched surrogate escapes become U+FFFD. */
function unquote(raw: string): string {
  const end = raw.length - 1;
  const parts: string[] = [];
  let i = 1;
  let start = 1;
  while (i < end) {
    if (raw.charCodeAt(i) != 0x5c) {
      i++;
      continue;
    }
    parts.push(raw.substring(start, i));
    const e = raw.charCodeAt(i + 1);
    if (e == 0x75) {
      let r = hex4(raw, i);
      i += 6;
      if (r >= 0xd800 && r < 0xe000) {
        const r2 = r < 0xdc00 ? hex4(raw, i) : -1;
        if (r2 >= 0xdc00 && r2 < 0xe000) {
          parts.push(String.fromCharCode(r, r2));
          i += 6;
        } else {
          parts.push("\uFFFD");
        }
      } else {
        parts.push(String.fromCharCode(r));
      }
    } else {
      i += 2;
      if (e == 0x62) parts.push("\b");
      else if (e == 0x66) parts.push("\f");
      else if (e == 0x6e) parts.push("\n");
      else if (e == 0x72) parts.push("\r");
      else if (e == 0x74) parts.push("\t");
      else parts.push(String.fromCharCode(e));
    }
    start = i;
  }
  parts.push(raw.substring(start, end));
  return parts.join("");
}

/** The result of parseKey: the fields, or the error. */
export class ParsedKey {
  fields: KeyFields | null = null;
  error: KeyError | null = null;
}

/** A KeyFields accessor's result: the value, or the error. */
export class KeyValue<T> {
  constructor(public value: T, public error: KeyError | null) {}
}

/**
 * The values of a computation's group_by fields, decoded from the key text
 * the host renders (a compact JSON array in group_by order); made by
 * parseKey. Every accessor answers a KeyError naming the key and the
 * field rather than guessing a value.
 */
export class KeyFields {
  constructor(private key: string, private names: string[], private values: string[]) {}

  private fail<T>(field: string, msg: string, zero: T): KeyValue<T> {
    return new KeyValue<T>(zero, new KeyError(this.key, field, msg));
  }

  /** The field's value as JSON text, as the key holds it. */
  raw(name: string): KeyValue<string> {
    for (let i = 0; i < this.names.length; i++) {
      if (this.names[i] == name) return new KeyValue<string>(this.values[i], null);
    }
    return this.fail<string>(name, "not a group_by field (fields: " + quoteList(this.names) + ")", "");
  }

  /** A text field; null is an error. */
  string(name: string): KeyValue<string> {
    const r = this.raw(name);
    if (r.error) return r;
    if (r.value.charCodeAt(0) != 0x22) return this.fail<string>(name, "expected a string, got " + r.value, "");
    return new KeyValue<string>(unquote(r.value), null);
  }

  /** The text of a number as Go's json.Number holds it ("" for null). */
  private number(name: string, want: string): KeyValue<string> {
    const r = this.raw(name);
    if (r.error) return r;
    const raw = r.value;
    const c = raw.charCodeAt(0);
    if (raw == "null") return new KeyValue<string>("", null);
    if (c == 0x2d || isDigit(c)) return r;
    if (c == 0x22) {
      const s = unquote(raw);
      if (validNumber(s)) return new KeyValue<string>(s, null);
    }
    return this.fail<string>(name, "expected " + want + ", got " + raw, "");
  }

  /** An integer field that fits an i64; a string holding an integer is
   * accepted, as in Go. */
  int(name: string): KeyValue<i64> {
    const n = this.number(name, "an integer");
    if (n.error) return new KeyValue<i64>(0, n.error);
    const s = n.value;
    let ok = s.length > 0;
    let neg = false;
    let v: i64 = 0;
    for (let i = 0; ok && i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (i == 0 && c == 0x2d && s.length > 1) {
        neg = true;
        continue;
      }
      if (!isDigit(c)) {
        ok = false;
        break;
      }
      // Accumulate negatively: -2^63 has no positive twin.
      const d = <i64>(c - 0x30);
      if (v < (i64.MIN_VALUE + d) / 10) ok = false;
      else v = v * 10 - d;
    }
    if (ok && !neg && v == i64.MIN_VALUE) ok = false;
    if (!ok) return this.fail<i64>(name, "expected an int64 integer, got " + s, 0);
    return new KeyValue<i64>(neg ? v : -v, null);
  }

  /** A number field that fits an f64 (beyond its range is an error). */
  float(name: string): KeyValue<f64> {
    const n = this.number(name, "a number");
    if (n.error) return new KeyValue<f64>(0, n.error);
    const f = n.value.length > 0 ? parseFloat(n.value) : Infinity;
    if (!isFinite(f)) return this.fail<f64>(name, "expected a float64 number, got " + n.value, 0);
    return new KeyValue<f64>(f, null);
  }

  /** A boolean field; null is an error. */
  bool(name: string): KeyValue<bool> {
    const r = this.raw(name);
    if (r.error) return new KeyValue<bool>(false, r.error);
    if (r.value == "true") return new KeyValue<bool>(true, null);
    if (r.value == "false") return new KeyValue<bool>(false, null);
    return this.fail<bool>(name, "expected a boolean, got " + r.value, false);
  }
}

/**
 * Decodes key (Key.key) as the values of the group_by fields names, in the
 * pipeline's group_by order. It fails when the key is not a JSON array of
 * exactly names.length values; the unkeyed key "" is accepted only with no
 * names. Same rules and texts as Go's ParseKey.
 */
export function parseKey(key: string, names: string[]): ParsedKey {
  const r = new ParsedKey();
  if (key.length == 0) {
    if (names.length != 0) {
      r.error = new KeyError("\"\"", "", "the key is empty (an unkeyed computation), expected " + names.length.toString() + " group_by fields");
    } else {
      r.fields = new KeyFields(key, names, []);
    }
    return r;
  }
  const values: string[] = [];
  let ok = false;
  const i = ws(key, 0);
  if (i < key.length && key.charCodeAt(i) == 0x5b) {
    let j = ws(key, i + 1);
    if (j < key.length && key.charCodeAt(j) == 0x5d) {
      j++;
      ok = true;
    } else {
      while (true) {
        const end = valueEnd(key, j, 2);
        if (end < 0) break;
        values.push(key.substring(j, end));
        j = ws(key, end);
        if (j < key.length && key.charCodeAt(j) == 0x2c) {
          j = ws(key, j + 1);
          continue;
        }
        if (j < key.length && key.charCodeAt(j) == 0x5d) {
          j++;
          ok = true;
        }
        break;
      }
    }
    if (ok && ws(key, j) != key.length) ok = false;
  }
  if (!ok) {
    r.error = new KeyError(key, "", "not a JSON array of group_by values");
  } else if (values.length != names.length) {
    r.error = new KeyError(key, "", "has " + values.length.toString() + " values, expected " + names.length.toString() + " (group_by " + quoteList(names) + ")");
  } else {
    r.fields = new KeyFields(key, names, values);
  }
  return r;
}
