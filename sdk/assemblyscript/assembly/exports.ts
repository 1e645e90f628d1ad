// The exports of flowhost's ABI v1. The entry file of a computation
// re-exports them:
//
//   export * from "@flowhost/sdk/assembly/exports";

import { allocRegion, initRegion, processRegion } from "./guest";

/** The ABI v1 marker: its presence declares the version; the host never calls it. */
export function flowhost_abi_v1(): void {}

/** Returns a region of at least size bytes for the next envelope, or 0. */
export function flowhost_alloc(size: i32): i32 {
  return allocRegion(size);
}

/** Processes the Request at ptr/len; returns the packed Response or a negative status. */
export function flowhost_process(ptr: i32, len: i32): i64 {
  return processRegion(ptr, len);
}

/** Receives the Init at ptr/len; returns 0, a packed InitResult or a negative status. */
export function flowhost_init(ptr: i32, len: i32): i64 {
  return initRegion(ptr, len);
}
