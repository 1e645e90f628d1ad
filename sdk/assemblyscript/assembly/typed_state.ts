// Typed state: named cells (a value, a list, a map) layered on a key's one
// state blob, written byte for byte as the Go SDK writes them (sdk/JOINS.md,
// "Typed state"): a canonical CBOR map from cell name to cell, a byte string
// for a value, an array of byte strings for a list, a map from text to byte
// strings for a map. Elements are bytes the computation encodes.

import { Key, KIND_MAP } from "./batch";
import { bytesOf, decodeUTF8, encodeUTF8, validUTF8, Writer } from "./cbor";
import { Params } from "./params";
import { quote } from "./text";

/** The error classes of typed state. */
export enum StateErrorKind {
  /** The cell is another kind, or a map key is not valid Unicode. */
  Cell = 1,
  /** The key's state blob is not typed state. */
  State = 2,
  /** saveState: the blob is over the limit; the state stays as it was. */
  Quota = 3,
}

/**
 * Why a typed state call failed; the call changed nothing. toString() is the
 * Go SDK's error text for the same failure. offset is the blob's byte for
 * State; size and limit are set for Quota.
 */
export class StateError {
  /** The error's class. */
  kind: StateErrorKind;
  /** The Go SDK's text, which toString returns. */
  message: string;
  /** State: the byte of the blob where decoding stopped. */
  offset: i32 = 0;
  /** Quota: the encoded state's size in bytes. */
  size: i32 = 0;
  /** Quota: the limit in bytes. */
  limit: i32 = 0;

  constructor(kind: StateErrorKind, message: string) {
    this.kind = kind;
    this.message = message;
  }

  /** The Go SDK's text of the error. */
  toString(): string {
    return this.message;
  }
}

/** A value read: value is null when there is none or on error. */
export class CellValue {
  /** The element as stored (do not change it), or null. */
  value: Uint8Array | null = null;
  /** Why the read failed, or null. */
  error: StateError | null = null;
}

/** A list read: items in append order (none when no cell or on error). */
export class CellItems {
  /** The elements as stored (a fresh array; do not change the elements). */
  items: Uint8Array[] = [];
  /** Why the read failed, or null. */
  error: StateError | null = null;
}

/** A map's keys read: sorted bytewise by their UTF-8. */
export class CellKeys {
  /** The keys, sorted. */
  keys: string[] = [];
  /** Why the read failed, or null. */
  error: StateError | null = null;
}

/** A count read. */
export class CellLen {
  /** The count; 0 when the cell does not exist. */
  len: i32 = 0;
  /** Why the read failed, or null. */
  error: StateError | null = null;
}

/** The parameter that sets saveState's limit; set it to the tenant's quotas.max_state_bytes_per_key. */
export const MAX_STATE_PARAM = "max_state_bytes_per_key";
/** The ABI's bound on one key's state, and the largest limit. */
export const ABI_MAX_STATE_BYTES: i32 = 16 << 20;

let stateLimit: i32 = 0;

/** Sets the limit saveState checks (0 or more than 16 MiB: the ABI's 16 MiB). */
export function setStateLimit(bytes: i32): void {
  stateLimit = bytes > 0 && bytes < ABI_MAX_STATE_BYTES ? bytes : 0;
}

/**
 * Sets the limit from the parameter max_state_bytes_per_key when present;
 * call it from the init function and return its result: null, or the
 * Go SDK's refusal text.
 */
export function stateLimitParam(p: Params): string | null {
  if (!p.has(MAX_STATE_PARAM)) return null;
  const saved = p.error;
  p.error = null;
  const n = p.int(MAX_STATE_PARAM);
  const err = p.error;
  p.error = saved;
  if (err !== null) return err;
  if (n <= 0) return "parameter " + quote(MAX_STATE_PARAM) + ": expected a positive number of bytes, got " + n.toString();
  setStateLimit(n < <i64>ABI_MAX_STATE_BYTES ? <i32>n : 0);
  return null;
}

function limitNow(): i32 {
  return stateLimit > 0 ? stateLimit : ABI_MAX_STATE_BYTES;
}

const KIND_VALUE: u8 = 1;
const KIND_LIST: u8 = 2;
const KIND_MAPCELL: u8 = 3;

function kindName(k: u8): string {
  return k == KIND_VALUE ? "a value" : k == KIND_LIST ? "a list" : "a map";
}

class Entry {
  key: string;
  keyBytes: Uint8Array;
  value: Uint8Array;
  constructor(key: string, keyBytes: Uint8Array, value: Uint8Array) {
    this.key = key;
    this.keyBytes = keyBytes;
    this.value = value;
  }
}

class Cell {
  name: string;
  nameBytes: Uint8Array;
  kind: u8;
  value: Uint8Array = new Uint8Array(0);
  list: Uint8Array[] = [];
  entries: Entry[] = []; // in canonical order
  constructor(name: string, nameBytes: Uint8Array, kind: u8) {
    this.name = name;
    this.nameBytes = nameBytes;
    this.kind = kind;
  }
}

/** Canonical CBOR key order: shorter first, then bytewise. */
function canonicalCmp(a: Uint8Array, b: Uint8Array): i32 {
  if (a.length != b.length) return a.length - b.length;
  return memory.compare(a.dataStart, b.dataStart, <usize>a.length);
}

/** Bytewise order (Go's sort of strings). */
function bytewiseCmp(a: Uint8Array, b: Uint8Array): i32 {
  const n = a.length < b.length ? a.length : b.length;
  const c = memory.compare(a.dataStart, b.dataStart, <usize>n);
  return c != 0 ? c : a.length - b.length;
}

const MAJOR_NAMES: string[] = ["an unsigned integer", "a negative integer", "a byte string", "a text string", "an array", "a map", "a tag", "a simple value or float"];

/** The Go SDK's decoder, byte for byte: the same acceptance and the same texts. */
class StateDecoder {
  b: Uint8Array;
  off: i32 = 0;
  cell: string = "";
  err: StateError | null = null;
  constructor(b: Uint8Array) {
    this.b = b;
  }

  fail(off: i32, msg: string): void {
    let s = "typed state: byte " + off.toString() + ": ";
    if (this.cell.length) s += "cell " + quote(this.cell) + ": ";
    const e = new StateError(StateErrorKind.State, s + msg);
    e.offset = off;
    this.err = e;
  }

  peekMajor(): i32 {
    if (this.off >= this.b.length) {
      this.fail(this.off, "unexpected end of the state");
      return -1;
    }
    return this.b[this.off] >> 5;
  }

  /** The argument of an item of major type major, or -1 after a failure. */
  head(major: i32, want: string): i32 {
    const start = this.off;
    const m = this.peekMajor();
    if (m < 0) return -1;
    if (m != major) {
      this.fail(start, "expected " + want + ", got " + MAJOR_NAMES[m]);
      return -1;
    }
    const info = this.b[this.off] & 0x1f;
    this.off++;
    let arg: u64 = 0;
    if (info < 24) {
      arg = <u64>info;
    } else if (info <= 27) {
      const n = 1 << (info - 24);
      if (this.b.length - this.off < n) {
        this.fail(start, "unexpected end of the state in an item's head");
        return -1;
      }
      for (let i = 0; i < n; i++) arg = (arg << 8) | <u64>this.b[this.off + i];
      this.off += n;
    } else if (info == 31) {
      this.fail(start, "indefinite lengths are not canonical");
      return -1;
    } else {
      this.fail(start, "reserved additional information " + info.toString());
      return -1;
    }
    const left = this.b.length - this.off;
    if (arg > <u64>left) {
      this.fail(start, "a length of " + arg.toString() + " exceeds the " + left.toString() + " bytes left");
      return -1;
    }
    return <i32>arg;
  }

  bytes(want: string): Uint8Array | null {
    const n = this.head(2, want);
    if (n < 0) return null;
    const p = this.b.slice(this.off, this.off + n);
    this.off += n;
    return p;
  }

  /** A text item's UTF-8 bytes, or null after a failure. */
  text(want: string): Uint8Array | null {
    const start = this.off;
    const n = this.head(3, want);
    if (n < 0) return null;
    const p = this.b.slice(this.off, this.off + n);
    if (!validUTF8(p.dataStart, <usize>n)) {
      this.fail(start, "text is not valid UTF-8");
      return null;
    }
    this.off += n;
    return p;
  }

  readCell(name: string, nameBytes: Uint8Array): Cell | null {
    const m = this.peekMajor();
    if (m < 0) return null;
    if (m == 2) {
      const v = this.bytes("");
      if (v === null) return null;
      const c = new Cell(name, nameBytes, KIND_VALUE);
      c.value = v;
      return c;
    }
    if (m == 4) {
      const start = this.off;
      const n = this.head(4, "");
      if (n < 0) return null;
      if (n == 0) {
        this.fail(start, "an empty list is not stored (a cell exists only while it holds something)");
        return null;
      }
      const c = new Cell(name, nameBytes, KIND_LIST);
      for (let i = 0; i < n; i++) {
        const e = this.bytes("list element " + i.toString() + " to be a byte string");
        if (e === null) return null;
        c.list.push(e);
      }
      return c;
    }
    if (m == 5) {
      const start = this.off;
      const n = this.head(5, "");
      if (n < 0) return null;
      if (n == 0) {
        this.fail(start, "an empty map is not stored (a cell exists only while it holds something)");
        return null;
      }
      const c = new Cell(name, nameBytes, KIND_MAPCELL);
      for (let i = 0; i < n; i++) {
        const kstart = this.off;
        const kb = this.text("a map entry's key (text)");
        if (kb === null) return null;
        const k = decodeUTF8(kb.dataStart, <usize>kb.length);
        if (findEntry(c.entries, kb) >= 0) {
          this.fail(kstart, "map key " + quote(k) + " appears twice");
          return null;
        }
        const e = this.bytes("map entry " + quote(k) + " to be a byte string");
        if (e === null) return null;
        insertEntry(c.entries, new Entry(k, kb, e));
      }
      return c;
    }
    this.fail(this.off, "expected a cell (a byte string, an array or a map), got " + MAJOR_NAMES[m]);
    return null;
  }
}

// Cells and map entries are kept in canonical order, so a lookup is a
// binary search and encoding needs no sort: a map of many entries stays
// O(log n) a lookup.

/** The index of kb in entries, or -(insertion point) - 1. */
function searchEntry(entries: Entry[], kb: Uint8Array): i32 {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = canonicalCmp(entries[mid].keyBytes, kb);
    if (c == 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -lo - 1;
}

function findEntry(entries: Entry[], kb: Uint8Array): i32 {
  const i = searchEntry(entries, kb);
  return i >= 0 ? i : -1;
}

/** Inserts e, whose key is not in entries, at its place. */
function insertEntry(entries: Entry[], e: Entry): void {
  const at = -searchEntry(entries, e.keyBytes) - 1;
  // AssemblyScript's splice does not insert.
  entries.push(e);
  for (let i = entries.length - 1; i > at; i--) entries[i] = entries[i - 1];
  entries[at] = e;
}

/** The index of nb in cells, or -(insertion point) - 1. */
function searchCell(cells: Cell[], nb: Uint8Array): i32 {
  let lo = 0;
  let hi = cells.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = canonicalCmp(cells[mid].nameBytes, nb);
    if (c == 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -lo - 1;
}

function findCell(cells: Cell[], nb: Uint8Array): i32 {
  const i = searchCell(cells, nb);
  return i >= 0 ? i : -1;
}

/** Inserts c, whose name is not in cells, at its place. */
function insertCell(cells: Cell[], c: Cell): void {
  const at = -searchCell(cells, c.nameBytes) - 1;
  cells.push(c);
  for (let i = cells.length - 1; i > at; i--) cells[i] = cells[i - 1];
  cells[at] = c;
}

/** The decoded cells in canonical order, or the error naming the byte. */
class Decoded {
  cells: Cell[] = [];
  error: StateError | null = null;
}

function decodeBlob(blob: Uint8Array | null): Decoded {
  const out = new Decoded();
  if (blob === null || blob.length == 0) return out;
  const d = new StateDecoder(blob);
  const n = d.head(5, "the state to be a map of cells");
  if (n < 0) {
    out.error = d.err;
    return out;
  }
  for (let i = 0; i < n; i++) {
    d.cell = "";
    const start = d.off;
    const nb = d.text("a cell name (text)");
    if (nb === null) {
      out.error = d.err;
      return out;
    }
    const name = decodeUTF8(nb.dataStart, <usize>nb.length);
    if (findCell(out.cells, nb) >= 0) {
      d.cell = name;
      d.fail(start, "the cell appears twice");
      out.error = d.err;
      return out;
    }
    d.cell = name;
    const c = d.readCell(name, nb);
    if (c === null) {
      out.error = d.err;
      return out;
    }
    insertCell(out.cells, c);
  }
  if (d.off != blob.length) {
    d.cell = "";
    d.fail(d.off, (blob.length - d.off).toString() + " bytes after the map of cells");
    out.error = d.err;
  }
  return out;
}

/**
 * Checks a blob as the Go SDK's DecodeTypedState does: null when it is
 * typed state (an empty blob has no cells), else the error naming the byte.
 */
export function checkTypedState(blob: Uint8Array): StateError | null {
  return decodeBlob(blob).error;
}

/** Reports whether s has an unpaired surrogate, which UTF-8 cannot hold. */
function hasLoneSurrogate(s: string): bool {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c < 0xdc00) {
      if (i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d < 0xe000) {
          i++;
          continue;
        }
      }
      return true;
    }
    if (c >= 0xdc00 && c < 0xe000) return true;
  }
  return false;
}

/**
 * A key's cells as the batch has left them so far. Reach it through
 * valueCell, listCell, mapCell; it is kept on the Key.
 */
export class TypedState {
  /** The cells in canonical order. */
  cells: Cell[] = [];
  /** Reports changes not yet saved. */
  dirty: bool = false;
}

function cellError(cell: string, element: string, msg: string): StateError {
  let s = "state cell " + quote(cell) + ": ";
  if (element.length) s += element + ": ";
  return new StateError(StateErrorKind.Cell, s + msg);
}

/** What a lookup found: the key's cells (decoded on first use), the cell and its index, or the error. */
class Lookup {
  ts: TypedState | null = null;
  cell: Cell | null = null;
  index: i32 = -1;
  nameBytes: Uint8Array = new Uint8Array(0);
  error: StateError | null = null;
}

function loadState(k: Key): Lookup {
  const l = new Lookup();
  const have = k.typed;
  if (have !== null) {
    l.ts = have;
    return l;
  }
  const d = decodeBlob(k.state());
  if (d.error !== null) {
    l.error = d.error;
    return l;
  }
  const ts = new TypedState();
  ts.cells = d.cells;
  k.typed = ts;
  k.typedFinish = saveAtEnd;
  l.ts = ts;
  return l;
}

function lookup(k: Key, name: string, want: u8): Lookup {
  const l = loadState(k);
  if (l.error !== null) return l;
  const nb = encodeUTF8(name);
  l.nameBytes = nb;
  const ts = l.ts!;
  const i = findCell(ts.cells, nb);
  if (i >= 0) {
    const c = ts.cells[i];
    if (c.kind != want) {
      l.error = cellError(name, "", "is " + kindName(c.kind) + ", used as " + kindName(want));
      return l;
    }
    l.cell = c;
    l.index = i;
  }
  return l;
}

/** Reports a write in a map computation as misuse, as the Go SDK panics on it. */
function writable(k: Key, call: string): bool {
  if (k.batch.kind == KIND_MAP) {
    k.batch.misuse(call + " in a map computation; only a transform keeps state and timers");
    return false;
  }
  return true;
}

function clearCell(k: Key, name: string, call: string): StateError | null {
  if (!writable(k, call)) return null;
  const l = loadState(k);
  if (l.error !== null) return l.error;
  const ts = l.ts!;
  const i = findCell(ts.cells, encodeUTF8(name));
  if (i >= 0) {
    ts.cells.splice(i, 1);
    ts.dirty = true;
  }
  return null;
}

/** The key's value cell name; its element is the bytes the computation encodes. */
export class ValueCell {
  constructor(readonly k: Key, readonly name: string) {}

  /** The value, or value null when the cell does not exist; an error when it is another kind or the state is not typed state. */
  get(): CellValue {
    const r = new CellValue();
    const l = lookup(this.k, this.name, KIND_VALUE);
    r.error = l.error;
    if (l.cell !== null) r.value = l.cell!.value;
    return r;
  }

  /** Replaces the value with a copy of v (a string as UTF-8, or bytes), creating the cell. */
  set<T>(v: T): StateError | null {
    if (!writable(this.k, "Value.Set")) return null;
    const l = lookup(this.k, this.name, KIND_VALUE);
    if (l.error !== null) return l.error;
    const ts = l.ts!;
    const c = new Cell(this.name, l.nameBytes, KIND_VALUE);
    c.value = bytesOf<T>(v).slice();
    if (l.index >= 0) ts.cells[l.index] = c;
    else insertCell(ts.cells, c);
    ts.dirty = true;
    return null;
  }

  /** Removes the cell, whatever its kind. */
  clear(): StateError | null {
    return clearCell(this.k, this.name, "clearing a state cell");
  }
}

/** The key's list cell name: elements in append order. */
export class ListCell {
  constructor(readonly k: Key, readonly name: string) {}

  /** Adds a copy of v (a string as UTF-8, or bytes) at the end, creating the cell. */
  append<T>(v: T): StateError | null {
    if (!writable(this.k, "List.Append")) return null;
    const l = lookup(this.k, this.name, KIND_LIST);
    if (l.error !== null) return l.error;
    const ts = l.ts!;
    let c = l.cell;
    if (c === null) {
      c = new Cell(this.name, l.nameBytes, KIND_LIST);
      insertCell(ts.cells, c);
    }
    c.list.push(bytesOf<T>(v).slice());
    ts.dirty = true;
    return null;
  }

  /** The elements in append order; none when the cell does not exist. */
  all(): CellItems {
    const r = new CellItems();
    const l = lookup(this.k, this.name, KIND_LIST);
    r.error = l.error;
    if (l.cell !== null) r.items = l.cell!.list.slice();
    return r;
  }

  /** The number of elements. */
  len(): CellLen {
    const r = new CellLen();
    const l = lookup(this.k, this.name, KIND_LIST);
    r.error = l.error;
    if (l.cell !== null) r.len = l.cell!.list.length;
    return r;
  }

  /** Removes the cell, whatever its kind. */
  clear(): StateError | null {
    return clearCell(this.k, this.name, "clearing a state cell");
  }
}

/** The key's map cell name: values by text key. */
export class MapCell {
  constructor(readonly k: Key, readonly name: string) {}

  /** The entry's value, or value null when there is none. */
  get(key: string): CellValue {
    const r = new CellValue();
    const l = lookup(this.k, this.name, KIND_MAPCELL);
    r.error = l.error;
    if (l.cell !== null) {
      const i = findEntry(l.cell!.entries, encodeUTF8(key));
      if (i >= 0) r.value = l.cell!.entries[i].value;
    }
    return r;
  }

  /** Sets the entry to a copy of v, creating the cell; a key with an unpaired surrogate is refused. */
  put<T>(key: string, v: T): StateError | null {
    if (!writable(this.k, "Map.Put")) return null;
    const l = lookup(this.k, this.name, KIND_MAPCELL);
    if (l.error !== null) return l.error;
    if (hasLoneSurrogate(key)) return cellError(this.name, "entry " + quote(key), "the key is not valid UTF-8");
    const ts = l.ts!;
    let c = l.cell;
    if (c === null) {
      c = new Cell(this.name, l.nameBytes, KIND_MAPCELL);
      insertCell(ts.cells, c);
    }
    const kb = encodeUTF8(key);
    const e = new Entry(key, kb, bytesOf<T>(v).slice());
    const i = findEntry(c.entries, kb);
    if (i >= 0) c.entries[i] = e;
    else insertEntry(c.entries, e);
    ts.dirty = true;
    return null;
  }

  /** Removes the entry; removing the last one removes the cell. */
  delete(key: string): StateError | null {
    if (!writable(this.k, "Map.Delete")) return null;
    const l = lookup(this.k, this.name, KIND_MAPCELL);
    if (l.error !== null || l.cell === null) return l.error;
    const c = l.cell!;
    const i = findEntry(c.entries, encodeUTF8(key));
    if (i < 0) return null;
    c.entries.splice(i, 1);
    const ts = l.ts!;
    if (c.entries.length == 0) ts.cells.splice(l.index, 1);
    ts.dirty = true;
    return null;
  }

  /** The entries' keys, sorted bytewise by their UTF-8 (as Go sorts strings). */
  keys(): CellKeys {
    const r = new CellKeys();
    const l = lookup(this.k, this.name, KIND_MAPCELL);
    r.error = l.error;
    if (l.cell !== null) {
      const es = l.cell!.entries.slice();
      es.sort((a: Entry, b: Entry): i32 => bytewiseCmp(a.keyBytes, b.keyBytes));
      for (let i = 0; i < es.length; i++) r.keys.push(es[i].key);
    }
    return r;
  }

  /** The number of entries. */
  len(): CellLen {
    const r = new CellLen();
    const l = lookup(this.k, this.name, KIND_MAPCELL);
    r.error = l.error;
    if (l.cell !== null) r.len = l.cell!.entries.length;
    return r;
  }

  /** Removes the cell, whatever its kind. */
  clear(): StateError | null {
    return clearCell(this.k, this.name, "clearing a state cell");
  }
}

/** The key's value cell name. */
export function valueCell(k: Key, name: string): ValueCell {
  return new ValueCell(k, name);
}

/** The key's list cell name. */
export function listCell(k: Key, name: string): ListCell {
  return new ListCell(k, name);
}

/** The key's map cell name. */
export function mapCell(k: Key, name: string): MapCell {
  return new MapCell(k, name);
}

function encodeCells(cells: Cell[]): Uint8Array {
  const w = new Writer(64);
  w.map(cells.length);
  for (let i = 0; i < cells.length; i++) {
    const c = cells[i];
    w.head(3, <u64>c.nameBytes.length);
    w.raw(c.nameBytes.dataStart, c.nameBytes.length);
    if (c.kind == KIND_VALUE) {
      w.bytes(c.value);
    } else if (c.kind == KIND_LIST) {
      w.array(c.list.length);
      for (let j = 0; j < c.list.length; j++) w.bytes(c.list[j]);
    } else {
      w.map(c.entries.length);
      for (let j = 0; j < c.entries.length; j++) {
        const e = c.entries[j];
        w.head(3, <u64>e.keyBytes.length);
        w.raw(e.keyBytes.dataStart, e.keyBytes.length);
        w.bytes(e.value);
      }
    }
  }
  const out = new Uint8Array(w.len);
  memory.copy(out.dataStart, w.ptr, <usize>w.len);
  return out;
}

/**
 * Writes the key's cells into its state once: the canonical blob, or a
 * delete when no cell is left. Over the limit it returns a Quota error, the
 * state stays as it was and the changes stay pending. Changes unsaved when
 * the process function returns are saved then, and a failure there fails
 * the key, so no write is lost silently.
 */
export function saveState(k: Key): StateError | null {
  const ts = k.typed;
  if (ts === null || !ts.dirty) return null;
  if (!writable(k, "SaveState")) return null;
  if (ts.cells.length == 0) {
    if (k.hasState()) k.deleteStateRaw();
    ts.dirty = false;
    return null;
  }
  const blob = encodeCells(ts.cells);
  const limit = limitNow();
  if (blob.length > limit) {
    const e = new StateError(StateErrorKind.Quota, "key " + quote(k.key) + ": typed state of " + blob.length.toString() +
      " bytes exceeds the limit of " + limit.toString() + " bytes; its state stays as it was");
    e.size = blob.length;
    e.limit = limit;
    return e;
  }
  k.setStateRaw(blob);
  ts.dirty = false;
  return null;
}

/** Drops the key's unsaved changes: the next use of a cell reads the state as it is. */
export function discardStateChanges(k: Key): void {
  k.typed = null;
}

/** Saves what the process function left unsaved, failing the key on error. */
function saveAtEnd(k: Key): void {
  if (k.error !== null) return;
  const e = saveState(k);
  if (e !== null) k.fail("saving typed state at the end of the batch: " + e.message);
}
