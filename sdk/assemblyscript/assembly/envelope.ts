// Strict decoders of the host's envelopes (Request, Init) into the SDK's
// types, and the lenient reader of their abi field. Field names and rules
// are abi/ABI.md section 4; errors carry the field path as the host's do.

import { Reader, MAJOR_MAP, MAJOR_TEXT, MAJOR_UINT, describeHead } from "./cbor";
import { quote } from "./text";
import { Batch, Key, Message, Timer, KIND_MAP, KIND_TRANSFORM } from "./batch";
import { Value, readMapAny } from "./params";

const REQUEST_FIELDS: StaticArray<string> = ["abi", "computation", "kind", "partition", "epoch", "watermarks", "keys"];
const REQUEST_REQUIRED: u32 = 0b1111111;
const WATERMARK_FIELDS: StaticArray<string> = ["event", "system"];
const WATERMARK_REQUIRED: u32 = 0b11;
const KEY_FIELDS: StaticArray<string> = ["key", "state", "timers", "messages"];
const KEY_REQUIRED: u32 = 0b0001;
const TIMER_FIELDS: StaticArray<string> = ["id", "trigger_ts", "event_ts", "payload"];
const TIMER_REQUIRED: u32 = 0b0111;
const MESSAGE_FIELDS: StaticArray<string> = ["id", "stream", "event_ts", "system_ts", "alignment_ts", "payload"];
const MESSAGE_REQUIRED: u32 = 0b111111;
const INIT_FIELDS: StaticArray<string> = ["abi", "computation", "kind", "partition", "parameters", "output_streams"];
const INIT_REQUIRED: u32 = 0b101111;

/**
 * Checks a struct field index against the fields seen so far; records a
 * duplicate. Returns the updated set, or 0xffffffff after a failure.
 */
function see(r: Reader, fields: StaticArray<string>, seen: u32, f: i32): u32 {
  if (f < 0) return u32.MAX_VALUE;
  const bit: u32 = 1 << <u32>f;
  if ((seen & bit) != 0) {
    r.fail("duplicate field");
    r.in(fields[f]);
    return u32.MAX_VALUE;
  }
  return seen | bit;
}

/** Records the first required field that is missing. */
function requireFields(r: Reader, fields: StaticArray<string>, required: u32, seen: u32): void {
  const missing = required & ~seen;
  if (missing == 0) return;
  for (let i = 0; i < fields.length; i++) {
    if ((missing & (1 << <u32>i)) != 0) {
      r.fail("missing required field");
      r.in(fields[i]);
      return;
    }
  }
}

function readWatermarks(r: Reader, b: Batch, depth: i32): void {
  const n = r.map(depth);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(WATERMARK_FIELDS);
    seen = see(r, WATERMARK_FIELDS, seen, f);
    if (r.failed) return;
    if (f == 0) b.watermarks.event = r.int();
    else b.watermarks.system = r.int();
    if (r.failed) {
      r.in(WATERMARK_FIELDS[f]);
      return;
    }
  }
  if (!r.failed) requireFields(r, WATERMARK_FIELDS, WATERMARK_REQUIRED, seen);
}

function readTimer(r: Reader, k: Key, input: i32, depth: i32): Timer {
  const t = new Timer();
  t.input = input;
  t.key = k;
  const n = r.map(depth);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(TIMER_FIELDS);
    seen = see(r, TIMER_FIELDS, seen, f);
    if (r.failed) return t;
    if (f == 0) t.id = r.text();
    else if (f == 1) t.triggerTimestamp = r.int();
    else if (f == 2) t.eventTimestamp = r.int();
    else t.payload = r.bytes();
    if (r.failed) {
      r.in(TIMER_FIELDS[f]);
      return t;
    }
  }
  if (!r.failed) requireFields(r, TIMER_FIELDS, TIMER_REQUIRED, seen);
  return t;
}

function readMessage(r: Reader, k: Key, depth: i32): Message {
  const m = new Message();
  m.key = k;
  const n = r.map(depth);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(MESSAGE_FIELDS);
    seen = see(r, MESSAGE_FIELDS, seen, f);
    if (r.failed) return m;
    if (f == 0) m.id = r.text();
    else if (f == 1) m.stream = r.text();
    else if (f == 2) m.eventTimestamp = r.int();
    else if (f == 3) m.systemTimestamp = r.int();
    else if (f == 4) m.alignmentTimestamp = r.int();
    else m.payload = r.bytes();
    if (r.failed) {
      r.in(MESSAGE_FIELDS[f]);
      return m;
    }
  }
  if (!r.failed) requireFields(r, MESSAGE_FIELDS, MESSAGE_REQUIRED, seen);
  return m;
}

function readKey(r: Reader, b: Batch, depth: i32): Key {
  const k = new Key(b);
  const n = r.map(depth);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(KEY_FIELDS);
    seen = see(r, KEY_FIELDS, seen, f);
    if (r.failed) return k;
    if (f == 0) {
      k.key = r.text();
    } else if (f == 1) {
      k.storedState = r.bytes();
      k.hasStoredState = true;
    } else if (f == 2) {
      const count = r.array(depth + 1);
      for (let j = 0; j < count; j++) {
        k.dueTimers.push(readTimer(r, k, j, depth + 2));
        if (r.failed) {
          r.at(j);
          break;
        }
      }
    } else {
      const count = r.array(depth + 1);
      for (let j = 0; j < count; j++) {
        k.inputMessages.push(readMessage(r, k, depth + 2));
        if (r.failed) {
          r.at(j);
          break;
        }
      }
    }
    if (r.failed) {
      r.in(KEY_FIELDS[f]);
      return k;
    }
  }
  if (r.failed) return k;
  requireFields(r, KEY_FIELDS, KEY_REQUIRED, seen);
  // Messages are numbered after the timers, which may come later in the map.
  const first = k.dueTimers.length;
  for (let j = 0; j < k.inputMessages.length; j++) k.inputMessages[j].input = first + j;
  return k;
}

/**
 * Decodes a Request strictly into a Batch. On failure r.failed is set and
 * r.message() says what and where.
 */
export function decodeRequest(r: Reader): Batch {
  const b = new Batch();
  const n = r.map(0);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(REQUEST_FIELDS);
    seen = see(r, REQUEST_FIELDS, seen, f);
    if (r.failed) return b;
    if (f == 0) b.abi = r.uint();
    else if (f == 1) b.computation = r.text();
    else if (f == 2) b.kind = r.text();
    else if (f == 3) b.partition = r.uint();
    else if (f == 4) b.epoch = r.uint();
    else if (f == 5) readWatermarks(r, b, 1);
    else {
      const count = r.array(1);
      for (let j = 0; j < count; j++) {
        b.keys.push(readKey(r, b, 2));
        if (r.failed) {
          r.at(j);
          break;
        }
      }
    }
    if (r.failed) {
      r.in(REQUEST_FIELDS[f]);
      return b;
    }
  }
  if (!r.failed) requireFields(r, REQUEST_FIELDS, REQUEST_REQUIRED, seen);
  if (!r.failed && r.left > 0) r.fail(r.left.toString() + " trailing bytes after the envelope");
  return b;
}

/** The decoded Init envelope. */
export class InitEnvelope {
  abi: u64 = 0;
  computation: string = "";
  kind: string = "";
  partition: u64 = 0;
  parameters: Map<string, Value> = new Map<string, Value>();
  outputStreams: string[] = [];
}

/** Decodes an Init strictly. On failure r.failed is set. */
export function decodeInit(r: Reader): InitEnvelope {
  const e = new InitEnvelope();
  const n = r.map(0);
  let seen: u32 = 0;
  for (let i = 0; i < n; i++) {
    const f = r.field(INIT_FIELDS);
    seen = see(r, INIT_FIELDS, seen, f);
    if (r.failed) return e;
    if (f == 0) e.abi = r.uint();
    else if (f == 1) e.computation = r.text();
    else if (f == 2) e.kind = r.text();
    else if (f == 3) e.partition = r.uint();
    else if (f == 4) {
      if (r.head()) {
        if (r.major != MAJOR_MAP) r.fail("expected map, got " + describeHead(r.major, r.info, r.arg));
        else readMapAny(r, e.parameters, r.arg, 1);
      }
    } else {
      const count = r.array(1);
      for (let j = 0; j < count; j++) {
        e.outputStreams.push(r.text());
        if (r.failed) {
          r.at(j);
          break;
        }
      }
    }
    if (r.failed) {
      r.in(INIT_FIELDS[f]);
      return e;
    }
  }
  if (!r.failed) requireFields(r, INIT_FIELDS, INIT_REQUIRED, seen);
  if (!r.failed && r.left > 0) r.fail(r.left.toString() + " trailing bytes after the envelope");
  return e;
}

/**
 * Checks what the host's Init.Validate checks beyond decoding: a known
 * kind, a computation name, distinct non-empty output streams. Returns
 * the problem, or null.
 */
export function validateInit(e: InitEnvelope): string | null {
  if (e.kind != KIND_TRANSFORM && e.kind != KIND_MAP) return "kind: unknown kind " + quote(e.kind) + " (want transform or map)";
  if (e.computation.length == 0) return "computation: empty";
  for (let i = 0; i < e.outputStreams.length; i++) {
    const s = e.outputStreams[i];
    if (s.length == 0) return "output_streams[" + i.toString() + "]: empty";
    for (let j = 0; j < i; j++) {
      if (e.outputStreams[j] == s) return "output_streams[" + i.toString() + "]: " + quote(s) + " repeats output_streams[" + j.toString() + "]";
    }
  }
  return null;
}

/**
 * Reads the abi field of an envelope leniently, as abi.PeekVersion does,
 * so that a newer envelope is answered with status -3 rather than -1.
 * Returns -1 when the data is not a map with an unsigned abi field.
 */
export function peekVersion(buf: ArrayBuffer, offset: i32, length: i32): i64 {
  const r = new Reader(buf, offset, length);
  if (!r.head() || r.major != MAJOR_MAP) return -1;
  const n = r.enter(r.arg, 2, 0);
  let version: i64 = -1;
  for (let i = 0; i < n; i++) {
    if (!r.head() || r.major != MAJOR_TEXT) return -1;
    const isABI = r.textBody() == "abi";
    if (r.failed) return -1;
    if (isABI) {
      if (!r.head() || r.major != MAJOR_UINT) return -1;
      version = r.arg > <u64>i64.MAX_VALUE ? i64.MAX_VALUE : <i64>r.arg;
    } else if (!r.skipItem(1)) {
      return -1;
    }
  }
  return r.left > 0 ? -1 : version;
}
