// @flowhost/sdk: write flowhost computations in AssemblyScript.
//
//   import { Batch, register } from "@flowhost/sdk";
//   export * from "@flowhost/sdk/assembly/exports";
//
//   function process(batch: Batch): void {
//     for (let i = 0; i < batch.keys.length; i++) {
//       const messages = batch.keys[i].messages();
//       for (let j = 0; j < messages.length; j++) {
//         messages[j].emit("upper", messages[j].text().toUpperCase());
//       }
//     }
//   }
//   register(process);
//
// README.md describes the API and how to build a guest.

export {
  Batch, Key, Message, Timer, Watermarks, EmitOptions, TimerOptions,
  withKey, withEventTimestamp, withParents, withAllParents,
  withTimerEventTimestamp, withTimerPayload,
  KIND_TRANSFORM, KIND_MAP,
} from "./batch";
export { Params, Value, ValueKind, Duration, parseDuration } from "./params";
export { Level, log, flowhostAbort } from "./log";
export { register, ProcessFunc, InitFunc } from "./guest";
export { quote, quoteBytes, parseInt64, ParsedInt } from "./text";
export { WindowSpec, Window, Aggregator, Windows, WINDOW_STATE_ERROR } from "./window";
export { parseKey, KeyFields, KeyError, KeyValue, ParsedKey } from "./keyfields";
export {
  valueCell, listCell, mapCell, ValueCell, ListCell, MapCell, CellValue, CellItems, CellKeys, CellLen,
  saveState, discardStateChanges, setStateLimit, stateLimitParam, checkTypedState, StateError, StateErrorKind,
  MAX_STATE_PARAM, ABI_MAX_STATE_BYTES,
} from "./typed_state";
export { JoinRecord, JoinPair, Joiner, Enricher, IntervalJoin, EnrichJoin, JOIN_STATE_ERROR } from "./join";

import { decodeUTF8, encodeUTF8 } from "./cbor";

/** Decodes UTF-8 bytes into a string; invalid bytes become U+FFFD. */
export function textOf(bytes: Uint8Array): string {
  return decodeUTF8(bytes.dataStart, <usize>bytes.length);
}

/** Encodes a string as UTF-8 bytes; unpaired surrogates become U+FFFD. */
export function bytesOfText(text: string): Uint8Array {
  return encodeUTF8(text);
}
