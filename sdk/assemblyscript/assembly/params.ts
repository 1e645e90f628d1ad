// The computation's parameters from the pipeline spec, as the init
// envelope carries them, with typed getters whose errors read like the Go
// SDK's.

import { EMPTY, Reader, MAJOR_UINT, MAJOR_NEGINT, MAJOR_BYTES, MAJOR_TEXT, MAJOR_ARRAY, MAJOR_MAP, MAJOR_TAG, describeHead } from "./cbor";
import { quote } from "./text";

/** The type of a parameter value. */
export enum ValueKind {
  Null,
  Bool,
  Int,
  Float,
  Text,
  Bytes,
  List,
  Map,
}

/**
 * Value is one parameter value: a null, bool, 64-bit integer, float,
 * text, byte string, list or map with text keys. The field matching kind
 * holds it; the others keep their zero values.
 */
export class Value {
  kind: ValueKind = ValueKind.Null;
  boolValue: bool = false;
  intValue: i64 = 0;
  floatValue: f64 = 0;
  text: string = "";
  bytes: Uint8Array = EMPTY;
  list: Value[] = [];
  map: Map<string, Value> = new Map<string, Value>();

  /** The kind's name as the getters' errors use it: null, bool, integer, float, string, bytes, list, map. */
  typeName(): string {
    switch (this.kind) {
      case ValueKind.Null: return "null";
      case ValueKind.Bool: return "bool";
      case ValueKind.Int: return "integer";
      case ValueKind.Float: return "float";
      case ValueKind.Text: return "string";
      case ValueKind.Bytes: return "bytes";
      case ValueKind.List: return "list";
    }
    return "map";
  }
}

/**
 * Reads one parameter value whose head the reader has just read: anything
 * that decodes to an integer, float, text, bytes, bool, null, list or map
 * with text keys; no tags, no undefined, no other simple values.
 */
export function readValue(r: Reader, depth: i32): Value {
  const v = new Value();
  const major = r.major;
  const info = r.info;
  const arg = r.arg;
  if (major == MAJOR_UINT || major == MAJOR_NEGINT) {
    if (arg > <u64>i64.MAX_VALUE) {
      r.fail("integer overflows int64");
      return v;
    }
    v.kind = ValueKind.Int;
    v.intValue = major == MAJOR_UINT ? <i64>arg : -1 - <i64>arg;
  } else if (major == MAJOR_BYTES) {
    v.kind = ValueKind.Bytes;
    v.bytes = r.bytesBody().slice(); // parameters outlive the init envelope
  } else if (major == MAJOR_TEXT) {
    v.kind = ValueKind.Text;
    v.text = r.textBody();
  } else if (major == MAJOR_ARRAY) {
    v.kind = ValueKind.List;
    const n = r.enter(arg, 1, depth);
    for (let i = 0; i < n; i++) {
      if (!r.head()) {
        r.at(i);
        return v;
      }
      v.list.push(readValue(r, depth + 1));
      if (r.failed) {
        r.at(i);
        return v;
      }
    }
  } else if (major == MAJOR_MAP) {
    v.kind = ValueKind.Map;
    readMapAny(r, v.map, arg, depth);
  } else if (major == MAJOR_TAG) {
    r.fail("tags are not allowed");
  } else {
    // Simple values and floats.
    if (info < 20 || info == 23 || info == 24) {
      r.fail(describeHead(major, info, arg) + " is not allowed");
    } else if (info == 20 || info == 21) {
      v.kind = ValueKind.Bool;
      v.boolValue = info == 21;
    } else if (info == 22) {
      v.kind = ValueKind.Null;
    } else {
      v.kind = ValueKind.Float;
      v.floatValue = info == 25 ? halfToF64(<u32>arg) : info == 26 ? <f64>reinterpret<f32>(<u32>arg) : reinterpret<f64>(arg);
    }
  }
  return v;
}

/** Reads the count pairs of a map with text keys into m. */
export function readMapAny(r: Reader, m: Map<string, Value>, count: u64, depth: i32): void {
  const n = r.enter(count, 2, depth);
  for (let i = 0; i < n; i++) {
    const k = r.key();
    if (r.failed) return;
    if (m.has(k)) {
      r.fail("duplicate map key");
      r.in(k);
      return;
    }
    if (!r.head()) {
      r.in(k);
      return;
    }
    const v = readValue(r, depth + 1);
    if (r.failed) {
      r.in(k);
      return;
    }
    m.set(k, v);
  }
}

/** Converts an IEEE 754 half-precision float to f64. */
function halfToF64(h: u32): f64 {
  const sign: f64 = (h & 0x8000) != 0 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = <f64>(h & 0x3ff);
  if (exp == 0) return sign * frac * Math.pow(2, -24);
  if (exp == 31) return frac == 0 ? sign * Infinity : NaN;
  return sign * (1 + frac / 1024) * Math.pow(2, <f64>exp - 15);
}

/**
 * Params are the computation's parameters from the pipeline spec and
 * what the host says about the instance. The typed getters return a zero
 * value when the parameter is missing or has another type, and record
 * the first such problem in error, worded as the Go SDK words it
 * (`parameter "window" is missing`), so that an init function can read
 * everything and then return params.error.
 */
export class Params {
  /** The computation's name in the pipeline spec. */
  readonly computation: string;
  /** The computation's kind: "transform" or "map". */
  readonly kind: string;
  /** The computation partition the instance is started for. */
  readonly partition: u64;
  private streams: string[];
  private values: Map<string, Value>;
  /** The first error of a typed getter, or null. */
  error: string | null = null;

  constructor(computation: string, kind: string, partition: u64, outputStreams: string[], values: Map<string, Value>) {
    this.computation = computation;
    this.kind = kind;
    this.partition = partition;
    this.streams = outputStreams;
    this.values = values;
  }

  /** The computation's declared output streams (a copy). */
  outputStreams(): string[] {
    return this.streams.slice();
  }

  /** The names of all parameters, sorted. */
  names(): string[] {
    const names = this.values.keys();
    names.sort((a: string, b: string): i32 => (a < b ? -1 : a > b ? 1 : 0));
    return names;
  }

  /** Reports whether the parameter is set (even to null). */
  has(name: string): bool {
    return this.values.has(name);
  }

  /** The parameter's raw value, or null when it is missing (a null parameter is a Value of kind Null). */
  value(name: string): Value | null {
    return this.values.has(name) ? this.values.get(name) : null;
  }

  private problem(name: string, msg: string): void {
    if (this.error === null) this.error = "parameter " + quote(name) + ": " + msg;
  }

  private lookup(name: string): Value | null {
    if (!this.values.has(name)) {
      if (this.error === null) this.error = "parameter " + quote(name) + " is missing";
      return null;
    }
    return this.values.get(name);
  }

  private wrongType(name: string, want: string, v: Value): void {
    this.problem(name, "expected " + want + ", got " + v.typeName());
  }

  /** A text parameter. */
  string(name: string): string {
    const v = this.lookup(name);
    if (v === null) return "";
    if (v.kind != ValueKind.Text) {
      this.wrongType(name, "string", v);
      return "";
    }
    return v.text;
  }

  /** An integer parameter; a float with an integral value counts. */
  int(name: string): i64 {
    const v = this.lookup(name);
    if (v === null) return 0;
    if (v.kind == ValueKind.Int) return v.intValue;
    if (v.kind == ValueKind.Float) {
      const x = v.floatValue;
      if (x == Math.trunc(x) && x >= -9223372036854775808.0 && x < 9223372036854775808.0) return <i64>x;
    }
    this.wrongType(name, "integer", v);
    return 0;
  }

  /** A number parameter; an integer counts. */
  float(name: string): f64 {
    const v = this.lookup(name);
    if (v === null) return 0;
    if (v.kind == ValueKind.Float) return v.floatValue;
    if (v.kind == ValueKind.Int) return <f64>v.intValue;
    this.wrongType(name, "number", v);
    return 0;
  }

  /** A boolean parameter. */
  bool(name: string): bool {
    const v = this.lookup(name);
    if (v === null) return false;
    if (v.kind != ValueKind.Bool) {
      this.wrongType(name, "bool", v);
      return false;
    }
    return v.boolValue;
  }

  /**
   * A duration parameter in nanoseconds, written as a Go duration string
   * ("250ms", "1h30m") or as an integer number of nanoseconds.
   */
  duration(name: string): i64 {
    const v = this.lookup(name);
    if (v === null) return 0;
    if (v.kind == ValueKind.Int) return v.intValue;
    if (v.kind == ValueKind.Text) {
      const d = parseDuration(v.text);
      if (d.error !== null) {
        this.problem(name, d.error!);
        return 0;
      }
      return d.nanos;
    }
    this.wrongType(name, "duration", v);
    return 0;
  }

  /** A parameter that is a list of text. */
  strings(name: string): string[] {
    const v = this.lookup(name);
    if (v === null) return [];
    if (v.kind != ValueKind.List) {
      this.wrongType(name, "list of strings", v);
      return [];
    }
    const out = new Array<string>(v.list.length);
    for (let i = 0; i < v.list.length; i++) {
      const e = v.list[i];
      if (e.kind != ValueKind.Text) {
        this.problem(name, "element " + i.toString() + ": expected string, got " + e.typeName());
        return [];
      }
      out[i] = e.text;
    }
    return out;
  }

  /** A parameter that is a map. */
  map(name: string): Map<string, Value> {
    const v = this.lookup(name);
    if (v === null) return new Map<string, Value>();
    if (v.kind != ValueKind.Map) {
      this.wrongType(name, "map", v);
      return new Map<string, Value>();
    }
    return v.map;
  }
}

/** The result of parseDuration: nanos, or an error in Go's words. */
export class Duration {
  nanos: i64 = 0;
  error: string | null = null;
}

/**
 * Parses a duration the way Go's time.ParseDuration does: an optional
 * sign, then decimal numbers with optional fraction, each with a unit of
 * ns, us (or µs, μs), ms, s, m or h, like "300ms", "-1.5h" or "2h45m".
 */
export function parseDuration(s: string): Duration {
  const result = new Duration();
  const orig = s;
  let i = 0;
  let neg = false;
  if (i < s.length && (s.charCodeAt(i) == 0x2d || s.charCodeAt(i) == 0x2b)) {
    neg = s.charCodeAt(i) == 0x2d;
    i++;
  }
  if (s.substring(i) == "0") return result;
  if (i == s.length) {
    result.error = "time: invalid duration " + quote(orig);
    return result;
  }
  let total: u64 = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (!(c == 0x2e || (c >= 0x30 && c <= 0x39))) {
      result.error = "time: invalid duration " + quote(orig);
      return result;
    }
    // Integer part.
    let v: u64 = 0;
    const pl = i;
    let overflow = false;
    while (i < s.length && s.charCodeAt(i) >= 0x30 && s.charCodeAt(i) <= 0x39) {
      const d = <u64>(s.charCodeAt(i) - 0x30);
      if (v > (<u64>1 << 63) / 10) overflow = true;
      v = v * 10 + d;
      if (v > <u64>1 << 63) overflow = true;
      i++;
    }
    if (overflow) {
      result.error = "time: invalid duration " + quote(orig);
      return result;
    }
    const pre = pl != i;
    // Fraction.
    let f: u64 = 0;
    let scale: f64 = 1;
    let post = false;
    if (i < s.length && s.charCodeAt(i) == 0x2e) {
      i++;
      const pf = i;
      let over = false;
      while (i < s.length && s.charCodeAt(i) >= 0x30 && s.charCodeAt(i) <= 0x39) {
        if (!over) {
          if (f > (<u64>1 << 63) / 10) {
            over = true;
          } else {
            const y = f * 10 + <u64>(s.charCodeAt(i) - 0x30);
            if (y > <u64>1 << 63) over = true;
            else {
              f = y;
              scale *= 10;
            }
          }
        }
        i++;
      }
      post = pf != i;
    }
    if (!pre && !post) {
      result.error = "time: invalid duration " + quote(orig);
      return result;
    }
    // Unit.
    const us = i;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c == 0x2e || (c >= 0x30 && c <= 0x39)) break;
      i++;
    }
    if (us == i) {
      result.error = "time: missing unit in duration " + quote(orig);
      return result;
    }
    const u = s.substring(us, i);
    let unit: u64 = 0;
    if (u == "ns") unit = 1;
    else if (u == "us" || u == "\u00b5s" || u == "\u03bcs") unit = 1000;
    else if (u == "ms") unit = 1000000;
    else if (u == "s") unit = 1000000000;
    else if (u == "m") unit = 60000000000;
    else if (u == "h") unit = 3600000000000;
    else {
      result.error = "time: unknown unit " + quote(u) + " in duration " + quote(orig);
      return result;
    }
    if (v > (<u64>1 << 63) / unit) {
      result.error = "time: invalid duration " + quote(orig);
      return result;
    }
    v *= unit;
    if (f > 0) {
      v += <u64>(<f64>f * (<f64>unit / scale));
      if (v > <u64>1 << 63) {
        result.error = "time: invalid duration " + quote(orig);
        return result;
      }
    }
    total += v;
    if (total > <u64>1 << 63) {
      result.error = "time: invalid duration " + quote(orig);
      return result;
    }
  }
  if (neg) {
    result.nanos = -(<i64>total);
    return result;
  }
  if (total > <u64>i64.MAX_VALUE) {
    result.error = "time: invalid duration " + quote(orig);
    return result;
  }
  result.nanos = <i64>total;
  return result;
}
