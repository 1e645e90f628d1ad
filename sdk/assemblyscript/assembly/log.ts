// Logging through the host's flowhost.log import, and the abort handler
// that the build aliases to AssemblyScript's abort (--use abort=...), so
// that a guest imports nothing but flowhost.log.

import { encodeUTF8 } from "./cbor";

// @ts-ignore: decorator
@external("flowhost", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): void;

/** The severity of a log line; the values are Go's log/slog levels. */
export enum Level {
  Debug = -4,
  Info = 0,
  Warn = 4,
  Error = 8,
}

/**
 * Writes message to the host's log at level; the host adds the plugin's
 * name and may rate-limit. It is meant for diagnostics, not for data:
 * every call crosses the WebAssembly boundary.
 */
export function log(level: Level, message: string): void {
  const bytes = encodeUTF8(message);
  hostLog(<i32>level, bytes.dataStart, bytes.length);
}

/**
 * flowhostAbort replaces AssemblyScript's abort, which would import
 * env.abort: a failed assertion, an index out of range, an explicit throw
 * or a call of abort() logs what happened through flowhost.log at error
 * level, then traps. The host reports the trap as a guest failure naming
 * the plugin, discards the instance and starts a new one; nothing is lost
 * because state and timers live in the host.
 */
export function flowhostAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let text = "flowhost: abort: " + (message !== null ? message : "(no message)");
  if (fileName !== null) text += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  log(Level.Error, text);
  unreachable();
}
