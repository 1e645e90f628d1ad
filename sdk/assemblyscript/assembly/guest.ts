// The instance-wide state behind the ABI exports (exports.ts): the
// registered computation, the declared output streams, the request region
// handed out by flowhost_alloc and the buffer of the last envelope
// returned. The host calls one export at a time, so nothing here needs a
// lock.

import { Reader, Writer } from "./cbor";
import { Batch, KIND_MAP, KIND_TRANSFORM } from "./batch";
import { decodeInit, decodeRequest, peekVersion, validateInit } from "./envelope";
import { Params } from "./params";
import { Level, log } from "./log";
import { quote } from "./text";

/** The ABI version this SDK speaks. */
export const ABI_VERSION: u64 = 1;

/** The guest could not decode the request or init envelope. */
export const STATUS_BAD_REQUEST: i64 = -1;
/** The guest failed internally; it logged why. */
export const STATUS_GUEST_FAILURE: i64 = -2;
/** The envelope's abi field names a version this SDK does not implement. */
export const STATUS_UNSUPPORTED_VERSION: i64 = -3;

/** Handles one batch; Key.fail fails a key, Batch.fail the whole batch. */
export type ProcessFunc = (batch: Batch) => void;
/** Runs once per instance before the first batch; a non-null result refuses to start with that error text. */
export type InitFunc = (params: Params) => string | null;

let processFunc: ProcessFunc | null = null;
let initFunc: InitFunc | null = null;
let initialized = false;
let outputs: string[] | null = null;
/** The region flowhost_alloc handed out last. */
let region: ArrayBuffer | null = null;
/** The envelope returned last; the host may read it until its next call. */
let out = new Writer(1024);

/** Above this size the response buffer is given back once the host has read it. */
const SHRINK_ABOVE: i32 = 1 << 20;
/** The largest region flowhost_alloc hands out (AssemblyScript's largest block). */
const MAX_REGION: i32 = 0x3fff_fff0;

const NO_COMPUTATION = "flowhost: no computation registered; call register(process) at the top level of the entry file";

/**
 * Makes process (and init, when given) the module's computation. Call it
 * once, at the top level of the entry file; a second call aborts.
 */
export function register(process: ProcessFunc, init: InitFunc | null = null): void {
  if (processFunc !== null) throw new Error("flowhost: register called twice");
  processFunc = process;
  initFunc = init;
}

/**
 * flowhost_alloc: a fresh region of max(size, 1) bytes, or 0 for a
 * negative or oversized size. A fresh region rather than a reused one,
 * because the payloads of a batch are views of its request and may be
 * kept by the computation. Between batches nothing of the SDK's is on the
 * stack, so this is where the minimal runtime collects garbage.
 */
export function allocRegion(size: i32): i32 {
  region = null;
  if (out.buf.byteLength > SHRINK_ABOVE) out = new Writer(1024);
  if (ASC_RUNTIME == 1) __collect();
  if (size < 0 || size > MAX_REGION) return 0;
  const r = new ArrayBuffer(size > 0 ? size : 1);
  region = r;
  return <i32>changetype<usize>(r);
}

/** Returns the region at ptr holding len bytes, or null when alloc did not hand it out. */
function regionAt(what: string, ptr: i32, len: i32): ArrayBuffer | null {
  const r = region;
  if (r === null || <usize>ptr != changetype<usize>(r) || len < 0 || len > r.byteLength) {
    log(Level.Error, "flowhost: " + what + "(" + (<u32>ptr).toString() + ", " + len.toString() + ") names memory that flowhost_alloc did not hand out");
    return null;
  }
  return r;
}

/** Packs a region into flowhost_process's result. */
function pack(w: Writer): i64 {
  return <i64>((<u64>(<u32>changetype<usize>(w.buf)) << 32) | <u64>(<u32>w.len));
}

/** Reports an envelope that does not decode: a newer ABI version when its abi field says so, a bad request otherwise. */
function badEnvelope(what: string, buf: ArrayBuffer, len: i32, reason: string): i64 {
  const v = peekVersion(buf, 0, len);
  if (v >= 0 && <u64>v != ABI_VERSION) {
    log(Level.Error, "flowhost: " + what + " speaks ABI version " + v.toString() + "; this SDK speaks " + ABI_VERSION.toString());
    return STATUS_UNSUPPORTED_VERSION;
  }
  log(Level.Error, "flowhost: cannot decode the " + what + ": " + reason);
  return STATUS_BAD_REQUEST;
}

/** flowhost_process: the encoded Response, or a negative status. */
export function processRegion(ptr: i32, len: i32): i64 {
  const buf = regionAt("flowhost_process", ptr, len);
  if (buf === null) return STATUS_BAD_REQUEST;
  const process = processFunc;
  if (process === null) {
    log(Level.Error, NO_COMPUTATION);
    return STATUS_GUEST_FAILURE;
  }
  if (initFunc !== null && !initialized) {
    log(Level.Error, "flowhost: flowhost_process called before a successful flowhost_init");
    return STATUS_GUEST_FAILURE;
  }
  const r = new Reader(buf, 0, len);
  const batch = decodeRequest(r);
  if (r.failed) return badEnvelope("request", buf, len, r.message());
  if (batch.abi != ABI_VERSION) return badEnvelope("request", buf, len, "abi " + batch.abi.toString());
  if (batch.kind != KIND_TRANSFORM && batch.kind != KIND_MAP) {
    log(Level.Error, "flowhost: request of unknown kind " + quote(batch.kind));
    return STATUS_BAD_REQUEST;
  }
  batch.outputs = outputs;
  process(batch);
  for (let i = 0; i < batch.keys.length; i++) {
    const k = batch.keys[i];
    const finish = k.typedFinish;
    if (finish !== null) finish(k);
  }
  const misuse = batch.misuseError;
  if (misuse !== null) {
    log(Level.Error, misuse);
    return STATUS_GUEST_FAILURE;
  }
  out.reset();
  batch.encode(out);
  return pack(out);
}

/** flowhost_init: 0 when started, an encoded InitResult when refused, or a negative status. */
export function initRegion(ptr: i32, len: i32): i64 {
  const buf = regionAt("flowhost_init", ptr, len);
  if (buf === null) return STATUS_BAD_REQUEST;
  const r = new Reader(buf, 0, len);
  const e = decodeInit(r);
  if (r.failed) return badEnvelope("init envelope", buf, len, r.message());
  if (e.abi != ABI_VERSION) return badEnvelope("init envelope", buf, len, "abi " + e.abi.toString());
  const invalid = validateInit(e);
  if (invalid !== null) {
    log(Level.Error, "flowhost: invalid init envelope: " + invalid);
    return STATUS_BAD_REQUEST;
  }
  if (processFunc === null) {
    log(Level.Error, NO_COMPUTATION);
    return STATUS_GUEST_FAILURE;
  }
  outputs = e.outputStreams;
  const init = initFunc;
  if (init !== null) {
    const refused = init(new Params(e.computation, e.kind, e.partition, e.outputStreams.slice(), e.parameters));
    if (refused !== null) {
      out.reset();
      out.map(1);
      out.text("error");
      out.text(refused.length ? refused : "failed (the error has no message)");
      return pack(out);
    }
  }
  initialized = true;
  return 0;
}
