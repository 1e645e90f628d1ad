// window-count in AssemblyScript: the windowed count of
// examples/plugins/window-count, a transform with keyed state and timers.
// It counts each key's messages in tumbling windows of event time and,
// once the watermark says a window is complete, emits
//
//   {"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":42}
//
// on its one output stream (timestamps in nanoseconds since the Unix
// epoch; key is the value of the group_by field, or the list of values
// when there are several, as the host renders it). The parameter window (a
// duration, default 1m) sets the window length; windows are aligned to the
// Unix epoch.
//
// The state is the Go plugin's, {"windows":[{"start":S,"count":N},...]}
// with the open windows sorted by start, so that either plugin can take
// over a pipeline's state from the other.
//
// How it works, and what the host does for it:
//
//   - A message with EventTimestamp t belongs to the window
//     [floor(t/window)*window, +window).
//   - Opening a window sets a timer at its end, with the window's last
//     instant as its EventTimestamp. The host fires it when the watermark
//     of the computation's timer stream reaches the end: the host decides
//     when a window is complete, not this code.
//   - A fired timer emits the windows that ended (the timer is their
//     parent, so the count inherits the window's last instant as its event
//     time), removes them from the state and deletes the state when no
//     window is left open.
//
// Late data: a message that arrives after its window's timer fired opens
// the window again, and it is emitted a second time, counting only the
// late messages.
//
// Build: npx asc index.ts --config node_modules/@flowhost/sdk/asconfig.json -o window-count.wasm

import { Batch, Key, Params, register, withTimerEventTimestamp } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

const MINUTE: i64 = 60_000_000_000;

let windowSize: i64 = MINUTE;
let output = "";

function start(p: Params): string | null {
  windowSize = MINUTE;
  if (p.has("window")) {
    const d = p.duration("window");
    if (p.error !== null) return p.error;
    if (d <= 0) return "parameter \"window\": must be positive, got " + d.toString() + "ns";
    windowSize = d;
  }
  const outs = p.outputStreams();
  if (outs.length != 1) return "window-count writes exactly one output stream; the pipeline declares " + outs.length.toString();
  output = outs[0];
  return null;
}

/** One open window of a key. */
class Window {
  constructor(public start: i64, public count: i64) {}
}

function process(b: Batch): void {
  const size = windowSize;
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const had = k.hasState();
    const windows: Window[] = [];
    const raw = k.stateText();
    if (raw !== null) {
      const err = parseState(raw, windows);
      if (err !== null) {
        k.fail("state of key " + k.key + ": " + err);
        continue;
      }
    }
    const key = keyValue(k);
    if (key === null) continue;

    const timers = k.timers();
    for (let j = 0; j < timers.length; j++) {
      // Every window that ended by the trigger is complete; normally
      // exactly the one the timer was set for.
      const t = timers[j];
      let done = 0;
      while (done < windows.length && windows[done].start + size <= t.triggerTimestamp) {
        const w = windows[done];
        t.emit(output,
          "{\"key\":" + key + ",\"window_start\":" + w.start.toString() + ",\"window_end\":" + (w.start + size).toString() +
          ",\"count\":" + w.count.toString() + "}");
        done++;
      }
      windows.splice(0, done);
    }

    const messages = k.messages();
    for (let j = 0; j < messages.length; j++) {
      const start = floorDiv(messages[j].eventTimestamp, size) * size;
      let at = 0;
      while (at < windows.length && windows[at].start < start) at++;
      if (at < windows.length && windows[at].start == start) {
        windows[at].count++;
        continue;
      }
      insert(windows, at, new Window(start, 1));
      const end = start + size;
      k.setTimer(end, withTimerEventTimestamp(end - 1));
    }

    if (windows.length == 0) {
      if (had) k.deleteState();
      continue;
    }
    k.setState(formatState(windows));
  }
}

/**
 * The output's "key" as JSON: the host's key text is a JSON array of the
 * group_by values; one value is written as itself, several as the list,
 * none as null. A key that is not such an array fails the key.
 */
function keyValue(k: Key): string | null {
  const text = k.key;
  if (text.length == 0) return "null";
  if (text.charCodeAt(0) != 0x5b || text.charCodeAt(text.length - 1) != 0x5d) {
    k.fail("key " + text + " is not a JSON array");
    return null;
  }
  // Find the end of the first element: a comma at depth 1 outside strings.
  let depth = 0;
  let inString = false;
  for (let i = 1; i < text.length - 1; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c == 0x5c) i++;
      else if (c == 0x22) inString = false;
    } else if (c == 0x22) inString = true;
    else if (c == 0x5b || c == 0x7b) depth++;
    else if (c == 0x5d || c == 0x7d) depth--;
    else if (c == 0x2c && depth == 0) return text; // several values: the list
  }
  return text.length == 2 ? "null" : text.substring(1, text.length - 1);
}

/** Inserts w at index at (AssemblyScript's splice only removes). */
function insert(windows: Window[], at: i32, w: Window): void {
  windows.push(w);
  for (let i = windows.length - 1; i > at; i--) windows[i] = windows[i - 1];
  windows[at] = w;
}

/** Rounds toward negative infinity, so that windows before 1970 align like those after. */
function floorDiv(a: i64, b: i64): i64 {
  let q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) q--;
  return q;
}

function formatState(windows: Window[]): string {
  let s = "{\"windows\":[";
  for (let i = 0; i < windows.length; i++) {
    if (i > 0) s += ",";
    s += "{\"start\":" + windows[i].start.toString() + ",\"count\":" + windows[i].count.toString() + "}";
  }
  return s + "]}";
}

/**
 * Reads the state {"windows":[{"start":S,"count":N},...]} into windows:
 * the shape the Go plugin writes, in any member order and with any
 * whitespace. Returns what is wrong, or null.
 */
function parseState(s: string, windows: Window[]): string | null {
  const p = new JSONReader(s);
  if (!p.expect(0x7b)) return p.error();
  let first = true;
  while (!p.peek(0x7d)) {
    if (!first && !p.expect(0x2c)) return p.error();
    first = false;
    const name = p.str();
    if (name === null || !p.expect(0x3a)) return p.error();
    if (name != "windows") return "unknown field " + name;
    if (!p.expect(0x5b)) return p.error();
    let firstWindow = true;
    while (!p.peek(0x5d)) {
      if (!firstWindow && !p.expect(0x2c)) return p.error();
      firstWindow = false;
      if (!p.expect(0x7b)) return p.error();
      const w = new Window(0, 0);
      let firstField = true;
      while (!p.peek(0x7d)) {
        if (!firstField && !p.expect(0x2c)) return p.error();
        firstField = false;
        const field = p.str();
        if (field === null || !p.expect(0x3a)) return p.error();
        const v = p.int();
        if (p.failed) return p.error();
        if (field == "start") w.start = v;
        else if (field == "count") w.count = v;
        else return "unknown field " + field;
      }
      p.expect(0x7d);
      windows.push(w);
    }
    p.expect(0x5d);
  }
  p.expect(0x7d);
  if (p.failed) return p.error();
  p.space();
  if (!p.atEnd()) return "bytes after the state's JSON";
  return null;
}

/** A reader of the little JSON the state holds. */
class JSONReader {
  pos: i32 = 0;
  failed: bool = false;
  constructor(public s: string) {}

  error(): string {
    return "invalid JSON at offset " + this.pos.toString();
  }

  space(): void {
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.pos++;
    }
  }

  atEnd(): bool {
    return this.pos >= this.s.length;
  }

  /** Reports whether the next character is c, without consuming it; false at the end, where expect fails. */
  peek(c: i32): bool {
    this.space();
    if (this.pos >= this.s.length) {
      this.failed = true;
      return true; // ends the loops; the caller's expect reports it
    }
    return this.s.charCodeAt(this.pos) == c;
  }

  expect(c: i32): bool {
    this.space();
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == c) {
      this.pos++;
      return true;
    }
    this.failed = true;
    return false;
  }

  /** A string without escapes (the state's member names have none). */
  str(): string | null {
    if (!this.expect(0x22)) return null;
    const from = this.pos;
    while (this.pos < this.s.length && this.s.charCodeAt(this.pos) != 0x22) {
      if (this.s.charCodeAt(this.pos) == 0x5c) {
        this.failed = true;
        return null;
      }
      this.pos++;
    }
    if (this.pos >= this.s.length) {
      this.failed = true;
      return null;
    }
    this.pos++;
    return this.s.substring(from, this.pos - 1);
  }

  int(): i64 {
    this.space();
    let neg = false;
    if (this.pos < this.s.length && this.s.charCodeAt(this.pos) == 0x2d) {
      neg = true;
      this.pos++;
    }
    const from = this.pos;
    let v: i64 = 0;
    while (this.pos < this.s.length) {
      const c = this.s.charCodeAt(this.pos);
      if (c < 0x30 || c > 0x39) break;
      v = v * 10 + <i64>(c - 0x30);
      this.pos++;
    }
    if (from == this.pos) this.failed = true;
    return neg ? -v : v;
  }
}

register(process, start);
