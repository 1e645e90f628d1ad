// Joins: ports of the Go SDK's interval and enrichment join helpers
// (sdk/go/join.go). sdk/JOINS.md is the contract, state bytes included:
// the same input in the same merge order gives the same matches, expired
// records, timers, error texts and state bytes as the Go helpers.

import { Key, Message, withEventTimestamp, withParents, withTimerEventTimestamp } from "./batch";
import { decodeUTF8, encodeUTF8 } from "./cbor";
import { quote } from "./text";
import { Bytes, VarintReader } from "./window";

/** What every join state error starts with, the Go SDK's ErrJoinState text. */
export const JOIN_STATE_ERROR = "flowhost: the key's state is not a join state";

const JOIN_STATE_VERSION: u8 = 1;
const KIND_INTERVAL: u8 = 0x49; // 'I'
const KIND_ENRICH: u8 = 0x45; // 'E'

/**
 * One side of a join: a message as delivered, or as kept in the key's
 * state from an earlier call.
 */
export class JoinRecord {
  /** The message's message_id, decoded as UTF-8 (invalid bytes become U+FFFD); idBytes holds it exactly. */
  id: string = "";
  /** The message_id's bytes exactly as delivered or stored. */
  idBytes: Uint8Array = new Uint8Array(0);
  /** The stream the record was read from (for a record from state, the join's stream of its side). */
  stream: string = "";
  /** The message's event time. */
  eventTimestamp: i64 = 0;
  /** The message body; it must not be modified. */
  payload: Uint8Array = new Uint8Array(0);
  /** The record's index among the key's inputs when it is an input of this call, -1 when it came from state. */
  input: i32 = -1;

  /** The record of an input message: its fields, its index among the key's inputs. */
  static ofMessage(m: Message): JoinRecord {
    const r = new JoinRecord();
    r.id = m.id;
    r.idBytes = encodeUTF8(m.id);
    r.stream = m.stream;
    r.eventTimestamp = m.eventTimestamp;
    r.payload = m.payload;
    r.input = m.input;
    return r;
  }
}

/** A match of an interval join. */
export class JoinPair {
  constructor(readonly key: string, readonly left: JoinRecord, readonly right: JoinRecord) {}
}

/**
 * Builds the payloads of an interval join. Extend it and override join
 * (always) and, to change an expired record's payload, expired (default:
 * the record's payload unchanged), as Go's WithExpired.
 */
export class Joiner {
  /** The payload of a match. */
  join(p: JoinPair): Uint8Array {
    throw new Error("flowhost: Joiner.join must be overridden");
  }

  /** The payload of a record that expired without a match. */
  expired(r: JoinRecord): Uint8Array {
    return r.payload;
  }
}

/** Builds the payloads of an enrichment join; extend it and override enrich. */
export class Enricher {
  /** The payload of event enriched with the table's value. */
  enrich(event: Message, value: JoinRecord): Uint8Array {
    throw new Error("flowhost: Enricher.enrich must be overridden");
  }
}

/** Go's %q of a byte: strconv.QuoteRune of the rune with that value. */
function quoteByte(c: u8): string {
  if (c == 0x27) return "'\\''";
  if (c == 0x5c) return "'\\\\'";
  if (c >= 0x20 && c < 0x7f) return "'" + String.fromCharCode(c) + "'";
  if (c == 7) return "'\\a'";
  if (c == 8) return "'\\b'";
  if (c == 12) return "'\\f'";
  if (c == 10) return "'\\n'";
  if (c == 13) return "'\\r'";
  if (c == 9) return "'\\t'";
  if (c == 11) return "'\\v'";
  const hex = "0123456789abcdef";
  const h = hex.charAt(c >> 4) + hex.charAt(c & 15);
  if (c < 0x80) return "'\\x" + h + "'";
  // U+0080..U+00A0 and the soft hyphen are not printable for strconv.IsPrint.
  if (c <= 0xa0 || c == 0xad) return "'\\u00" + h + "'";
  return "'" + String.fromCharCode(c) + "'";
}

/** Reads the join state encodings, naming the field and its byte offset on failure, in the Go helper's words. */
class StateReader {
  r: VarintReader;
  err: string | null = null;
  constructor(readonly b: Uint8Array) {
    this.r = new VarintReader(b);
  }

  fail(field: string): void {
    if (this.err === null) this.err = JOIN_STATE_ERROR + ": " + field + " at byte " + this.r.pos.toString();
  }

  byte(field: string): u8 {
    if (this.err !== null) return 0;
    if (this.r.pos >= this.b.length) {
      this.fail("missing " + field);
      return 0;
    }
    return this.b[this.r.pos++];
  }

  varint(field: string): i64 {
    if (this.err !== null) return 0;
    const v = this.r.varint();
    if (this.r.bad) {
      this.fail("bad " + field);
      return 0;
    }
    return v;
  }

  uvarint(field: string): u64 {
    if (this.err !== null) return 0;
    const v = this.r.uvarint();
    if (this.r.bad) {
      this.fail("bad " + field);
      return 0;
    }
    return v;
  }

  bytes(field: string): Uint8Array {
    const start = this.r.pos;
    const size = this.uvarint(field + " length");
    if (this.err !== null) return new Uint8Array(0);
    if (size > <u64>(this.b.length - this.r.pos)) {
      this.r.pos = start; // name the length, not what follows it
      this.fail(field + " length past the end");
      return new Uint8Array(0);
    }
    const v = this.b.slice(this.r.pos, this.r.pos + <i32>size);
    this.r.pos += <i32>size;
    return v;
  }

  header(kind: u8): void {
    const v = this.byte("version");
    if (this.err === null && v != JOIN_STATE_VERSION) {
      this.r.pos--;
      this.fail("unknown version " + v.toString());
    }
    const k = this.byte("kind");
    if (this.err === null && k != kind) {
      this.r.pos--;
      this.fail("kind " + quoteByte(k) + ", want " + quoteByte(kind));
    }
  }

  end(): void {
    if (this.err === null && this.r.pos != this.b.length) this.fail("trailing bytes");
  }
}

function appendBytes(w: Bytes, b: Uint8Array): void {
  w.uvarint(<u64>b.length);
  w.append(b);
}

/** One record waiting in an interval join's state. */
class HeldRecord {
  constructor(public right: bool, public matched: bool, public rec: JoinRecord) {}
}

function decodeIntervalState(b: Uint8Array | null, held: HeldRecord[]): string | null {
  if (b === null) return null;
  const r = new StateReader(b);
  r.header(KIND_INTERVAL);
  const n = r.uvarint("record count");
  if (r.err === null && n > <u64>b.length) r.fail("record count larger than the state");
  for (let i: u64 = 0; r.err === null && i < n; i++) {
    let right = false;
    let matched = false;
    const s = r.byte("side");
    if (r.err === null) {
      if (s > 1) {
        r.r.pos--;
        r.fail("record " + i.toString() + ": side " + s.toString() + ", want 0 or 1");
      } else {
        right = s == 1;
      }
    }
    const m = r.byte("matched");
    if (r.err === null) {
      if (m > 1) {
        r.r.pos--;
        r.fail("record " + i.toString() + ": matched " + m.toString() + ", want 0 or 1");
      } else {
        matched = m == 1;
      }
    }
    const rec = new JoinRecord();
    rec.eventTimestamp = r.varint("ts");
    rec.idBytes = r.bytes("message_id");
    rec.id = decodeUTF8(rec.idBytes.dataStart, <usize>rec.idBytes.length);
    rec.payload = r.bytes("payload");
    rec.input = -1;
    held.push(new HeldRecord(right, matched, rec));
  }
  r.end();
  return r.err;
}

function encodeIntervalState(held: HeldRecord[]): Uint8Array {
  const w = new Bytes();
  w.byte(JOIN_STATE_VERSION);
  w.byte(KIND_INTERVAL);
  w.uvarint(<u64>held.length);
  for (let i = 0; i < held.length; i++) {
    const h = held[i];
    w.byte(h.right ? 1 : 0);
    w.byte(h.matched ? 1 : 0);
    w.varint(h.rec.eventTimestamp);
    appendBytes(w, h.rec.idBytes);
    appendBytes(w, h.rec.payload);
  }
  return w.bytes();
}

/**
 * a+b+1 clamped to i64 (the expiry trigger of a record at a whose last
 * possible match is at a+b), so times near the ends of i64 do not wrap
 * around into the past.
 */
function satAdd(a: i64, b: i64): i64 {
  const s = a + b;
  if (b > 0 && s < a) return i64.MAX_VALUE;
  if (b < 0 && s > a) return i64.MIN_VALUE;
  if (s == i64.MAX_VALUE) return s;
  return s + 1;
}

/**
 * Joins two streams per key: a left record at ts_l and a right record at
 * ts_r match when lower <= ts_r - ts_l <= upper. It owns the key's state
 * and timers: a computation that uses it keeps nothing else in them.
 *
 * Every match is emitted on the output stream, EventTimestamp the later of
 * the two; every record that never matched is emitted on the expired
 * stream when its expiry timer fires, so nothing is dropped. Results
 * depend only on the key's inputs in merge order, not on batch limits
 * (sdk/JOINS.md).
 */
export class IntervalJoin {
  /**
   * A join of the streams left and right with lower <= ts_right - ts_left
   * <= upper (ns), whose matches joiner builds and emits on output and
   * whose unmatched records go to expired. Aborts, with the Go helper's
   * panic text, when lower > upper, lower is i64.MIN_VALUE, a stream name
   * is empty or left equals right.
   */
  constructor(
    readonly left: string,
    readonly right: string,
    readonly lower: i64,
    readonly upper: i64,
    readonly joiner: Joiner,
    readonly output: string,
    readonly expired: string,
  ) {
    if (lower > upper) throw new Error("flowhost: NewIntervalJoin needs lower <= upper");
    if (lower == i64.MIN_VALUE) throw new Error("flowhost: NewIntervalJoin needs lower > math.MinInt64");
    if (left.length == 0 || right.length == 0 || output.length == 0 || expired.length == 0)
      throw new Error("flowhost: NewIntervalJoin needs left, right, output and expired streams");
    if (left == right) throw new Error("flowhost: NewIntervalJoin needs two different input streams");
  }

  /**
   * Handles one key of a batch: expires the held records whose timers
   * fired, matches the key's messages and holds them, and saves the key's
   * state and timers. A bad state or a message of neither stream fails
   * the key (its inputs go to dead letters); the error is returned, null
   * otherwise.
   */
  process(k: Key): string | null {
    const held: HeldRecord[] = [];
    let err = decodeIntervalState(k.state(), held);
    if (err === null) {
      for (let i = 0; i < held.length; i++) held[i].rec.stream = held[i].right ? this.right : this.left;
      err = this.run(k, held);
    }
    if (err !== null) k.fail(err);
    return err;
  }

  /** The trigger after which no on-time record can match h. */
  private expiry(h: HeldRecord): i64 {
    return h.right ? satAdd(h.rec.eventTimestamp, -this.lower) : satAdd(h.rec.eventTimestamp, this.upper);
  }

  /** lower <= tr - tl <= upper; a difference that overflows i64 is outside any range. */
  private inRange(tl: i64, tr: i64): bool {
    const d = tr - tl;
    if ((tr >= tl) != (d >= 0)) return false;
    return this.lower <= d && d <= this.upper;
  }

  private run(k: Key, held: HeldRecord[]): string | null {
    let changed = false;
    const timers = k.timers();
    for (let i = 0; i < timers.length; i++) {
      const t = timers[i];
      const kept: HeldRecord[] = [];
      for (let j = 0; j < held.length; j++) {
        const h = held[j];
        if (this.expiry(h) > t.triggerTimestamp) {
          kept.push(h);
          continue;
        }
        changed = true;
        if (!h.matched) t.emit(this.expired, this.joiner.expired(h.rec), withEventTimestamp(h.rec.eventTimestamp));
      }
      held = kept;
    }
    // touched are the expiry triggers whose hold this call changed; reset
    // those of them that have a timer from an earlier call.
    const touched: i64[] = [];
    const reset: i64[] = [];
    const messages = k.messages();
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      let right = false;
      if (m.stream == this.right) right = true;
      else if (m.stream != this.left)
        return "message " + m.id + ": stream " + quote(m.stream) + " is neither the left stream " + quote(this.left) +
          " nor the right stream " + quote(this.right) + " of the join";
      const n = new HeldRecord(right, false, JoinRecord.ofMessage(m));
      for (let j = 0; j < held.length; j++) {
        const h = held[j];
        if (h.right == right) continue;
        const l = right ? h.rec : n.rec;
        const r = right ? n.rec : h.rec;
        if (!this.inRange(l.eventTimestamp, r.eventTimestamp)) continue;
        if (!h.matched) {
          touched.push(this.expiry(h));
          if (h.rec.input < 0) reset.push(this.expiry(h)); // its pending timer still holds h's time
        }
        h.matched = true;
        n.matched = true;
        const parents: i32[] = [m.input];
        if (h.rec.input >= 0) {
          parents.push(h.rec.input);
          parents.sort();
        }
        const ts = l.eventTimestamp > r.eventTimestamp ? l.eventTimestamp : r.eventTimestamp;
        k.emit(this.output, this.joiner.join(new JoinPair(k.key, l, r)), withParents(parents).withEventTimestamp(ts));
      }
      held.push(n);
      changed = true;
      touched.push(this.expiry(n));
    }
    this.setTimers(k, held, touched, reset);
    if (changed) {
      if (held.length == 0) {
        if (k.hasState()) k.deleteState();
      } else {
        k.setState(encodeIntervalState(held));
      }
    }
    return null;
  }

  /**
   * Sets the timer of each touched trigger with the event time it must
   * hold the output watermark at: the oldest unmatched held record of that
   * expiry. A timer from an earlier call is cancelled first, since the
   * host keeps the smallest event time of one trigger; setting it again at
   * the same trigger does not move where it fires.
   */
  private setTimers(k: Key, held: HeldRecord[], touched: i64[], reset: i64[]): void {
    touched.sort();
    for (let i = 0; i < touched.length; i++) {
      const trigger = touched[i];
      if (i > 0 && touched[i - 1] == trigger) continue;
      if (reset.includes(trigger)) k.cancelTimer(trigger);
      let hold: i64 = 0;
      let holds = false;
      for (let j = 0; j < held.length; j++) {
        const h = held[j];
        if (!h.matched && this.expiry(h) == trigger && (!holds || h.rec.eventTimestamp < hold)) {
          hold = h.rec.eventTimestamp;
          holds = true;
        }
      }
      if (holds) k.setTimer(trigger, withTimerEventTimestamp(hold));
      else k.setTimer(trigger); // event_ts = trigger: in the future, it holds nothing back
    }
  }
}

function decodeEnrichState(b: Uint8Array | null): EnrichDecoded {
  const out = new EnrichDecoded();
  if (b === null) return out;
  const r = new StateReader(b);
  r.header(KIND_ENRICH);
  const v = new JoinRecord();
  v.input = -1;
  v.eventTimestamp = r.varint("ts");
  v.idBytes = r.bytes("message_id");
  v.id = decodeUTF8(v.idBytes.dataStart, <usize>v.idBytes.length);
  const start = r.r.pos;
  v.payload = r.bytes("payload");
  if (r.err === null && v.payload.length == 0) {
    r.r.pos = start;
    r.fail("empty payload (a tombstone is no state)");
  }
  r.end();
  out.err = r.err;
  if (r.err === null) out.value = v;
  return out;
}

class EnrichDecoded {
  value: JoinRecord | null = null;
  err: string | null = null;
}

function encodeEnrichState(v: JoinRecord): Uint8Array {
  const w = new Bytes();
  w.byte(JOIN_STATE_VERSION);
  w.byte(KIND_ENRICH);
  w.varint(v.eventTimestamp);
  appendBytes(w, v.idBytes);
  appendBytes(w, v.payload);
  return w.bytes();
}

/**
 * Enriches the events of one stream with the latest value of a table
 * stream of the same key, in merge order. A table record with an empty
 * payload is a tombstone that deletes the value. An event with no value
 * goes unchanged to the unmatched stream: it is never dropped, and it
 * does not wait for a value. It owns the key's state and sets no timers
 * (sdk/JOINS.md).
 */
export class EnrichJoin {
  /**
   * An enrichment of events by table, whose results enricher builds and
   * emits on output and whose events without a value go to unmatched.
   * Aborts, with the Go helper's panic text, when a stream name is empty
   * or table equals events.
   */
  constructor(
    readonly table: string,
    readonly events: string,
    readonly enricher: Enricher,
    readonly output: string,
    readonly unmatched: string,
  ) {
    if (table.length == 0 || events.length == 0 || output.length == 0 || unmatched.length == 0)
      throw new Error("flowhost: NewEnrichJoin needs table, events, output and unmatched streams");
    if (table == events) throw new Error("flowhost: NewEnrichJoin needs two different input streams");
  }

  /**
   * Handles one key of a batch in delivery order: table messages set or
   * delete the value, events are enriched or sent to unmatched. A bad
   * state or a message of neither stream fails the key; the error is
   * returned, null otherwise.
   */
  process(k: Key): string | null {
    const d = decodeEnrichState(k.state());
    let err = d.err;
    if (err === null) err = this.run(k, d.value);
    if (err !== null) k.fail(err);
    return err;
  }

  private run(k: Key, v: JoinRecord | null): string | null {
    if (v !== null) v.stream = this.table;
    let changed = false;
    const messages = k.messages();
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (m.stream == this.table) {
        changed = true;
        v = m.payload.length == 0 ? null : JoinRecord.ofMessage(m);
      } else if (m.stream == this.events) {
        if (v === null) {
          m.emit(this.unmatched, m.payload);
          continue;
        }
        const value = v!;
        const parents: i32[] = value.input >= 0 ? [value.input, m.input] : [m.input];
        k.emit(this.output, this.enricher.enrich(m, value), withParents(parents).withEventTimestamp(m.eventTimestamp));
      } else {
        return "message " + m.id + ": stream " + quote(m.stream) + " is neither the table stream " + quote(this.table) +
          " nor the events stream " + quote(this.events) + " of the join";
      }
    }
    if (changed) {
      if (v === null) {
        if (k.hasState()) k.deleteState();
      } else {
        k.setState(encodeEnrichState(v!));
      }
    }
    return null;
  }
}
