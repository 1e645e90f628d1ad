// Event-time windows: a port of the Go SDK's helper (sdk/go/window.go)
// following the design every SDK shares (sdk/WINDOWS.md). The lateness
// rule and the state encoding are the contract: the same input in the
// same merge order gives the same results, late records and state bytes
// as the Go helper.

import { Key, Message, withEventTimestamp } from "./batch";

const TUMBLING: u8 = 1;
const HOPPING: u8 = 2;
const SESSION: u8 = 3;

/**
 * Which event-time windows a record belongs to. Build one with
 * WindowSpec.tumbling, WindowSpec.hopping or WindowSpec.session; times
 * are i64 nanoseconds, bounds are counted from the Unix epoch with floor
 * division (times before 1970 work).
 */
export class WindowSpec {
  private constructor(
    readonly kind: u8,
    readonly size: i64,
    readonly advance: i64,
    readonly gap: i64,
  ) {}

  /** Windows [n*size, (n+1)*size): each record belongs to exactly one. Aborts unless size > 0. */
  static tumbling(size: i64): WindowSpec {
    if (size <= 0) throw new Error("flowhost: Tumbling window size must be positive");
    return new WindowSpec(TUMBLING, size, size, 0);
  }

  /** Windows [n*advance, n*advance+size): a record belongs to each that contains it. Aborts unless 0 < advance <= size. */
  static hopping(size: i64, advance: i64): WindowSpec {
    if (advance <= 0 || size < advance) throw new Error("flowhost: Hopping windows need 0 < advance <= size");
    return new WindowSpec(HOPPING, size, advance, 0);
  }

  /** Session windows: records of a key less than gap apart share one window [first, last+gap). Aborts unless gap > 0. */
  static session(gap: i64): WindowSpec {
    if (gap <= 0) throw new Error("flowhost: Session gap must be positive");
    return new WindowSpec(SESSION, 0, 0, gap);
  }
}

/** One window of one key: [start, end) in event time. */
export class Window {
  constructor(readonly key: string, readonly start: i64, readonly end: i64) {}
}

/**
 * Folds a window's records into an accumulator of bytes, kept in the
 * key's host-owned state between batches. Extend it and override add
 * (always), merge (session windows) and, when the defaults do not fit,
 * init (default: empty) and result (default: the accumulator).
 */
export class Aggregator {
  /** The accumulator of an empty window. */
  init(): Uint8Array {
    return new Uint8Array(0);
  }

  /** acc with m folded in; it may modify and return acc. */
  add(acc: Uint8Array, m: Message): Uint8Array {
    throw new Error("flowhost: Aggregator.add must be overridden");
  }

  /** The accumulator of two merged session windows, a starting earlier than b. */
  merge(a: Uint8Array, b: Uint8Array): Uint8Array {
    throw new Error("flowhost: Session windows need Aggregator.merge");
  }

  /** The payload emitted for a closed window. */
  result(w: Window, acc: Uint8Array): Uint8Array {
    return acc;
  }
}

/** A window still waiting for its timer. */
class OpenWindow {
  constructor(public start: i64, public end: i64, public acc: Uint8Array) {}
}

/** What Windows keeps in a key's state. */
class WindowState {
  /** The largest trigger that closed a window of the key; i64.MIN_VALUE: none. */
  firedThrough: i64 = i64.MIN_VALUE;
  open: OpenWindow[] = [];
}

/** The first byte of the state encoding (sdk/WINDOWS.md). */
const STATE_VERSION: u8 = 1;

/** What every state error starts with, the Go SDK's ErrWindowState text. */
export const WINDOW_STATE_ERROR = "flowhost: the key's state is not a window state";

/** Reads Go encoding/binary varints from a byte string. */
export class VarintReader {
  pos: i32 = 0;
  /** Set when the last read failed (truncated, or overflowing 64 bits). */
  bad: bool = false;
  constructor(readonly b: Uint8Array) {}

  /** binary.Uvarint: at most 10 bytes, the 10th at most 1. */
  uvarint(): u64 {
    let x: u64 = 0;
    let s: u64 = 0;
    for (let i = 0; this.pos + i < this.b.length; i++) {
      if (i == 10) break;
      const c = <u64>this.b[this.pos + i];
      if (c < 0x80) {
        if (i == 9 && c > 1) break;
        this.pos += i + 1;
        return x | (c << s);
      }
      x |= (c & 0x7f) << s;
      s += 7;
    }
    this.bad = true;
    return 0;
  }

  /** binary.Varint: zig-zag over uvarint. */
  varint(): i64 {
    const ux = this.uvarint();
    let x = <i64>(ux >> 1);
    if ((ux & 1) != 0) x = ~x;
    return x;
  }

  get left(): i32 {
    return this.b.length - this.pos;
  }
}

/** Decodes a key's state into out (null: the key has none yet); returns the error of a bad one, in the Go SDK's words. */
function decodeState(b: Uint8Array | null, out: WindowState): string | null {
  if (b === null) return null;
  if (b.length == 0 || b[0] != STATE_VERSION) return WINDOW_STATE_ERROR + ": missing or unknown version byte";
  const r = new VarintReader(b);
  r.pos = 1;
  out.firedThrough = r.varint();
  if (r.bad) return WINDOW_STATE_ERROR + ": bad fired-through";
  const left = r.left;
  const count = r.uvarint();
  if (r.bad || count > <u64>left) return WINDOW_STATE_ERROR + ": bad window count";
  for (let i: u64 = 0; i < count; i++) {
    const start = r.varint();
    if (r.bad) return WINDOW_STATE_ERROR + ": bad window start";
    const end = r.varint();
    if (r.bad) return WINDOW_STATE_ERROR + ": bad window end";
    const size = r.uvarint();
    // Go checks the length against what follows the length's own bytes.
    if (r.bad || size > <u64>(b.length - r.pos)) return WINDOW_STATE_ERROR + ": bad accumulator length";
    const acc = b.slice(r.pos, r.pos + <i32>size);
    r.pos += <i32>size;
    // Sorted and distinct, as encodeState writes them (Go's windowBefore).
    const n = out.open.length;
    if (n > 0 && !(out.open[n - 1].end < end || (out.open[n - 1].end == end && out.open[n - 1].start < start))) {
      return WINDOW_STATE_ERROR + ": windows out of (end, start) order or repeated";
    }
    out.open.push(new OpenWindow(start, end, acc));
  }
  if (r.left != 0) return WINDOW_STATE_ERROR + ": trailing bytes";
  return null;
}

/** A growable byte buffer for the state encoding. */
export class Bytes {
  buf: Uint8Array = new Uint8Array(32);
  len: i32 = 0;

  byte(c: u8): void {
    if (this.len == this.buf.length) {
      const n = new Uint8Array(this.buf.length * 2);
      n.set(this.buf, 0);
      this.buf = n;
    }
    this.buf[this.len++] = c;
  }

  /** binary.AppendUvarint. */
  uvarint(x: u64): void {
    while (x >= 0x80) {
      this.byte(<u8>(x | 0x80));
      x >>= 7;
    }
    this.byte(<u8>x);
  }

  /** binary.AppendVarint. */
  varint(x: i64): void {
    let ux = (<u64>x) << 1;
    if (x < 0) ux = ~ux;
    this.uvarint(ux);
  }

  append(b: Uint8Array): void {
    for (let i = 0; i < b.length; i++) this.byte(b[i]);
  }

  bytes(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function encodeState(s: WindowState): Uint8Array {
  const w = new Bytes();
  w.byte(STATE_VERSION);
  w.varint(s.firedThrough);
  w.uvarint(<u64>s.open.length);
  for (let i = 0; i < s.open.length; i++) {
    const o = s.open[i];
    w.varint(o.start);
    w.varint(o.end);
    w.uvarint(<u64>o.acc.length);
    w.append(o.acc);
  }
  return w.bytes();
}

/** t/d rounded towards minus infinity, for windows before 1970. */
function floorDiv(t: i64, d: i64): i64 {
  let q = t / d;
  if (t % d != 0 && (t < 0) != (d < 0)) q--;
  return q;
}

/** Orders windows by (end, start), stably. */
function sortOpen(ws: OpenWindow[]): void {
  for (let i = 1; i < ws.length; i++) {
    const x = ws[i];
    let j = i - 1;
    while (j >= 0 && (ws[j].end > x.end || (ws[j].end == x.end && ws[j].start > x.start))) {
      ws[j + 1] = ws[j];
      j--;
    }
    ws[j + 1] = x;
  }
}

/**
 * Aggregates a transform's messages per (key, window) and emits each
 * window's result when the watermark passes its end plus the allowed
 * lateness. It owns the key's state and timers: a computation that uses
 * Windows keeps nothing else in them.
 *
 * A result goes to the output stream with EventTimestamp end-1 and the
 * firing timer as its only parent. A record whose every window has
 * already fired for its key is late: it goes, unchanged, to the late
 * stream, with itself as parent. Nothing is dropped.
 */
export class Windows {
  /** The allowed lateness in nanoseconds (default 0). */
  lateness: i64 = 0;
  /**
   * The triggers set during the current process call: such a timer is
   * never cancelled in the same call, because the host re-cuts a batch
   * only for the timers its response sets (sdk/WINDOWS.md, point 4).
   */
  private setHere: i64[] = [];

  /** Windows of spec aggregated by agg; results go to output, late records to late. Aborts on an empty stream name. */
  constructor(readonly spec: WindowSpec, readonly agg: Aggregator, readonly output: string, readonly late: string) {
    if (output.length == 0 || late.length == 0) throw new Error("flowhost: Windows needs an output stream and a late stream");
  }

  /** Keeps each window open until the watermark passes its end plus lateness (ns, not negative). */
  withAllowedLateness(lateness: i64): Windows {
    if (lateness < 0) throw new Error("flowhost: allowed lateness must not be negative");
    this.lateness = lateness;
    return this;
  }

  /**
   * Handles one key of a batch: fires the windows whose timers are due,
   * adds the key's messages to their windows (or sends them to the late
   * stream) and saves the key's state and timers. A state that is not the
   * window encoding fails the key (its inputs go to dead letters); the
   * error is returned, null otherwise.
   */
  process(k: Key): string | null {
    const s = new WindowState();
    const err = decodeState(k.state(), s);
    if (err !== null) {
      k.fail(err);
      return err;
    }
    this.setHere = [];
    const timers = k.timers();
    for (let i = 0; i < timers.length; i++) {
      const t = timers[i];
      const kept: OpenWindow[] = [];
      for (let j = 0; j < s.open.length; j++) {
        const o = s.open[j];
        if (o.end + this.lateness <= t.triggerTimestamp) {
          // Only a timer that closes a window counts: a session's stale
          // timer closes nothing.
          if (t.triggerTimestamp > s.firedThrough) s.firedThrough = t.triggerTimestamp;
          t.emit(this.output, this.agg.result(new Window(k.key, o.start, o.end), o.acc), withEventTimestamp(o.end - 1));
        } else {
          kept.push(o);
        }
      }
      s.open = kept;
    }
    const messages = k.messages();
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      const added = this.spec.kind == SESSION ? this.addSession(k, s, m) : this.add(k, s, m);
      if (!added) m.emit(this.late, m.payload);
    }
    if (s.open.length == 0 && s.firedThrough == i64.MIN_VALUE) k.deleteState();
    else k.setState(encodeState(s));
    return null;
  }

  /** Whether a window ending at end has fired for the key. */
  private closed(s: WindowState, end: i64): bool {
    return s.firedThrough != i64.MIN_VALUE && end + this.lateness <= s.firedThrough;
  }

  private add(k: Key, s: WindowState, m: Message): bool {
    const t = m.eventTimestamp;
    const size = this.spec.size;
    const advance = this.spec.advance;
    let added = false;
    for (let start = floorDiv(t, advance) * advance; start > t - size; start -= advance) {
      const end = start + size;
      if (this.closed(s, end)) break; // earlier windows end earlier: closed too
      let i = -1;
      for (let j = 0; j < s.open.length; j++) {
        if (s.open[j].start == start) {
          i = j;
          break;
        }
      }
      if (i < 0) {
        s.open.push(new OpenWindow(start, end, this.agg.init()));
        i = s.open.length - 1;
        this.setTimer(k, end + this.lateness);
      }
      s.open[i].acc = this.agg.add(s.open[i].acc, m);
      added = true;
    }
    sortOpen(s.open);
    return added;
  }

  private addSession(k: Key, s: WindowState, m: Message): bool {
    const t = m.eventTimestamp;
    const nStart = t;
    const nEnd = t + this.spec.gap;
    if (this.closed(s, nEnd)) return false;
    const n = new OpenWindow(nStart, nEnd, this.agg.add(this.agg.init(), m));
    const kept: OpenWindow[] = [];
    const old: OpenWindow[] = [];
    for (let j = 0; j < s.open.length; j++) {
      const o = s.open[j];
      if (o.start < n.end && n.start < o.end) old.push(o);
      else kept.push(o);
    }
    const merged = old.slice();
    merged.push(n);
    // By (start, end), as Go's comparator: start first, then end.
    for (let i = 1; i < merged.length; i++) {
      const x = merged[i];
      let j = i - 1;
      while (j >= 0 && (merged[j].start > x.start || (merged[j].start == x.start && merged[j].end > x.end))) {
        merged[j + 1] = merged[j];
        j--;
      }
      merged[j + 1] = x;
    }
    let acc = merged[0].acc;
    let start = merged[0].start;
    let end = merged[0].end;
    for (let i = 1; i < merged.length; i++) {
      const o = merged[i];
      acc = this.agg.merge(acc, o.acc);
      if (o.start < start) start = o.start;
      if (o.end > end) end = o.end;
    }
    for (let i = 0; i < old.length; i++) {
      const o = old[i];
      if (o.end != end && !this.setHere.includes(o.end + this.lateness)) k.cancelTimer(o.end + this.lateness);
    }
    this.setTimer(k, end + this.lateness);
    kept.push(new OpenWindow(start, end, acc));
    s.open = kept;
    sortOpen(s.open);
    return true;
  }

  private setTimer(k: Key, trigger: i64): void {
    k.setTimer(trigger);
    this.setHere.push(trigger);
  }
}
