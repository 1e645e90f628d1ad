// The programming model: a Batch of Keys, each with its due timers and
// messages, and the effects a computation produces for a key (emits,
// state, timers, failure). Effects are encoded as they are made, so a
// batch keeps no copy of a payload it has already written.

import { EMPTY, Writer, bytesOf, decodeUTF8 } from "./cbor";
import { quote } from "./text";
import { TypedState } from "./typed_state";

/** The kind of a computation that may keep state and timers. */
export const KIND_TRANSFORM = "transform";
/** The kind of a deterministic per-message computation without state or timers. */
export const KIND_MAP = "map";

/** A partition's input watermarks, in nanoseconds since the Unix epoch. */
export class Watermarks {
  /** The EventWatermark: inputs with a smaller EventTimestamp are no longer expected (a heuristic). */
  event: i64 = 0;
  /** The SystemWatermark: exact for internal streams. */
  system: i64 = 0;
}

/** One input message of a key. */
export class Message {
  /** The message's message_id, unique and stable across replays. */
  id: string = "";
  /** The stream the message was read from. */
  stream: string = "";
  /** When the event happened. */
  eventTimestamp: i64 = 0;
  /** When the message was created. */
  systemTimestamp: i64 = 0;
  /** The message's ordering timestamp. */
  alignmentTimestamp: i64 = 0;
  /**
   * The message body: a view of the request, which stays valid after the
   * batch as long as it is referenced. It must not be modified.
   */
  payload: Uint8Array = EMPTY;
  /** The message's index among the key's inputs (timers first, then messages). */
  input: i32 = 0;
  /** The key the message belongs to. */
  key: Key | null = null;

  /** The payload decoded as UTF-8 (invalid bytes become U+FFFD). */
  text(): string {
    return decodeUTF8(this.payload.dataStart, <usize>this.payload.length);
  }

  /**
   * Emits an output derived from this message: Key.emit with this message
   * as the parent, unless options name other parents.
   */
  emit<T>(stream: string, payload: T, options: EmitOptions | null = null): void {
    this.key!.emitFrom(this.input, stream, bytesOf<T>(payload), options);
  }
}

/** A due timer of a key, firing in this batch. */
export class Timer {
  /** The timer's message_id. */
  id: string = "";
  /** The time the timer was set for. */
  triggerTimestamp: i64 = 0;
  /** The timer's EventTimestamp. */
  eventTimestamp: i64 = 0;
  /** What was attached when the timer was set; empty when nothing was. */
  payload: Uint8Array = EMPTY;
  /** The timer's index among the key's inputs. */
  input: i32 = 0;
  /** The key the timer belongs to. */
  key: Key | null = null;

  /** The payload decoded as UTF-8 (invalid bytes become U+FFFD). */
  text(): string {
    return decodeUTF8(this.payload.dataStart, <usize>this.payload.length);
  }

  /**
   * Emits an output derived from this timer: Key.emit with this timer as
   * the parent, unless options name other parents.
   */
  emit<T>(stream: string, payload: T, options: EmitOptions | null = null): void {
    this.key!.emitFrom(this.input, stream, bytesOf<T>(payload), options);
  }
}

/**
 * Options of one emit, built by chaining: withKey("k").withEventTimestamp(t).
 * By default an output has no key, the host derives its EventTimestamp
 * from its parents, and its parents are the timer or message it is
 * emitted from (Message.emit, Timer.emit) or every input of the key
 * (Key.emit).
 */
export class EmitOptions {
  /** The key the output carries; "" means none. */
  key: string = "";
  /** Whether eventTimestamp was set. */
  hasEventTimestamp: bool = false;
  /** The output's EventTimestamp, when hasEventTimestamp. */
  eventTimestamp: i64 = 0;
  /** Explicit parents; null keeps the default. */
  parents: i32[] | null = null;
  /** Every input of the key is a parent (the field is left out). */
  allParents: bool = false;

  /** Gives the output a key, for example the record key a Kafka sink writes; it does not change whose state the emit belongs to. */
  withKey(key: string): EmitOptions {
    this.key = key;
    return this;
  }

  /** Sets the output's EventTimestamp instead of the one the host derives (the minimum over the parents). */
  withEventTimestamp(ts: i64): EmitOptions {
    this.hasEventTimestamp = true;
    this.eventTimestamp = ts;
    return this;
  }

  /** Names the inputs (Message.input, Timer.input) the output derives from; repeats count once. */
  withParents(inputs: i32[]): EmitOptions {
    this.parents = inputs;
    this.allParents = false;
    return this;
  }

  /** Makes every input of the key a parent, even for Message.emit and Timer.emit. */
  withAllParents(): EmitOptions {
    this.parents = null;
    this.allParents = true;
    return this;
  }
}

/** Starts EmitOptions with an output key. */
export function withKey(key: string): EmitOptions {
  return new EmitOptions().withKey(key);
}

/** Starts EmitOptions with an EventTimestamp. */
export function withEventTimestamp(ts: i64): EmitOptions {
  return new EmitOptions().withEventTimestamp(ts);
}

/** Starts EmitOptions with explicit parents. */
export function withParents(inputs: i32[]): EmitOptions {
  return new EmitOptions().withParents(inputs);
}

/** Starts EmitOptions with every input of the key as parent. */
export function withAllParents(): EmitOptions {
  return new EmitOptions().withAllParents();
}

/** Options of one setTimer: withTimerEventTimestamp(t).withPayload(p). */
export class TimerOptions {
  /** Whether eventTimestamp was set. */
  hasEventTimestamp: bool = false;
  /** The EventTimestamp the timer carries when it fires; by default its trigger. */
  eventTimestamp: i64 = 0;
  /** What the timer carries back when it fires; empty means nothing. */
  payload: Uint8Array = EMPTY;

  /** Sets the EventTimestamp the timer carries when it fires. */
  withEventTimestamp(ts: i64): TimerOptions {
    this.hasEventTimestamp = true;
    this.eventTimestamp = ts;
    return this;
  }

  /** Attaches a copy of payload (a string as UTF-8, or bytes); Timer.payload returns it when the timer fires. */
  withPayload<T>(payload: T): TimerOptions {
    this.payload = bytesOf<T>(payload).slice();
    return this;
  }
}

/** Starts TimerOptions with an EventTimestamp. */
export function withTimerEventTimestamp(ts: i64): TimerOptions {
  return new TimerOptions().withEventTimestamp(ts);
}

/** Starts TimerOptions with a payload. */
export function withTimerPayload<T>(payload: T): TimerOptions {
  return new TimerOptions().withPayload<T>(payload);
}

/** A timer set in this batch. */
export class TimerSet {
  trigger: i64 = 0;
  hasEventTimestamp: bool = false;
  eventTimestamp: i64 = 0;
  payload: Uint8Array = EMPTY;
}

/** What happens to a key's state. */
export enum StateOp {
  Keep = 0,
  Replace = 1,
  Delete = 2,
}

/**
 * One key of a batch: its state, its inputs and the effects the
 * computation produces for it. It is valid only during the process call.
 */
export class Key {
  /** The batch the key belongs to. */
  readonly batch: Batch;
  /** The key's canonical text; "" for an unkeyed computation. */
  key: string = "";
  /** The stored state, when hasStoredState. */
  storedState: Uint8Array = EMPTY;
  hasStoredState: bool = false;
  /** The due timers, in fire order (inputs 0..T-1). */
  dueTimers: Timer[] = [];
  /** The messages, in delivery order (inputs T..T+M-1). */
  inputMessages: Message[] = [];

  // Effects.
  stateOp: StateOp = StateOp.Keep;
  newState: Uint8Array = EMPTY;
  /** The encoded emits, one CBOR map each, in the order produced. */
  emitBuf: Writer | null = null;
  emitCount: i32 = 0;
  timersSet: TimerSet[] = [];
  timersCancel: i64[] = [];
  /** The error the key failed with, or null. */
  error: string | null = null;
  /** The key's typed state cells (typed_state.ts), once a cell was used. */
  typed: TypedState | null = null;
  /** Saves unsaved typed cells when process returns; set by the first use of a cell, so modules without typed state do not carry the encoder. */
  typedFinish: ((k: Key) => void) | null = null;

  constructor(batch: Batch) {
    this.batch = batch;
  }

  /** The number of the key's inputs: due timers plus messages. */
  get inputs(): i32 {
    return this.dueTimers.length + this.inputMessages.length;
  }

  /** The key's due timers in fire order. */
  timers(): Timer[] {
    return this.dueTimers;
  }

  /** The key's messages in delivery order. */
  messages(): Message[] {
    return this.inputMessages;
  }

  /**
   * The key's state as this batch has left it so far: the stored state, or
   * what setState last set; null when the key has no state (never had
   * one, or deleteState was called). An empty state is not null.
   */
  state(): Uint8Array | null {
    if (this.stateOp == StateOp.Replace) return this.newState;
    if (this.stateOp == StateOp.Delete) return null;
    return this.hasStoredState ? this.storedState : null;
  }

  /** The state decoded as UTF-8, or null when the key has none. */
  stateText(): string | null {
    const s = this.state();
    if (s === null) return null;
    return decodeUTF8(s.dataStart, <usize>s.length);
  }

  /** Reports whether the key has a state (see state). */
  hasState(): bool {
    return this.state() !== null;
  }

  /**
   * Replaces the key's state with a copy of state (a string as UTF-8, or
   * bytes), creating it if the key had none. It is a guest failure in a
   * map computation, or over unsaved typed state cells (saveState first).
   */
  setState<T>(state: T): void {
    if (!this.requireTransform("setState")) return;
    if (!this.checkRawState("setState")) return;
    this.setStateRaw(bytesOf<T>(state).slice());
  }

  /** For typed_state.ts: sets the new state without the typed state check, and without copying state. Computations call setState. */
  setStateRaw(state: Uint8Array): void {
    this.stateOp = StateOp.Replace;
    this.newState = state;
  }

  /** For typed_state.ts: deletes the state without the typed state check. Computations call deleteState. */
  deleteStateRaw(): void {
    this.stateOp = StateOp.Delete;
    this.newState = EMPTY;
  }

  /**
   * Keeps a raw setState or deleteState from silently overwriting, or being
   * overwritten by, unsaved typed cells: that is misuse, as in the Go SDK.
   */
  private checkRawState(call: string): bool {
    const ts = this.typed;
    if (ts !== null && ts.dirty) {
      this.batch.misuse(call + " with unsaved typed state changes; call saveState or discardStateChanges first");
      return false;
    }
    this.typed = null; // the next typed use reads the new state
    return true;
  }

  /** Deletes the key's state. It is a guest failure in a map computation, or over unsaved typed state cells. */
  deleteState(): void {
    if (!this.requireTransform("deleteState")) return;
    if (!this.checkRawState("deleteState")) return;
    this.deleteStateRaw();
  }

  /**
   * Asks the host to fire a timer for this key when the watermark of the
   * computation's timer stream reaches trigger (nanoseconds since the Unix
   * epoch). Timers of one key with the same trigger are one timer. It is a
   * guest failure in a map computation.
   */
  setTimer(trigger: i64, options: TimerOptions | null = null): void {
    if (!this.requireTransform("setTimer")) return;
    const t = new TimerSet();
    t.trigger = trigger;
    if (options !== null) {
      t.hasEventTimestamp = options.hasEventTimestamp;
      t.eventTimestamp = options.eventTimestamp;
      t.payload = options.payload;
    }
    this.timersSet.push(t);
  }

  /**
   * Deletes the key's pending timers at trigger, including those set
   * earlier in this batch; a later setTimer at trigger sets a new one. It
   * is a guest failure in a map computation.
   */
  cancelTimer(trigger: i64): void {
    if (!this.requireTransform("cancelTimer")) return;
    const kept: TimerSet[] = [];
    for (let i = 0; i < this.timersSet.length; i++) {
      const t = this.timersSet[i];
      if (t.trigger != trigger) kept.push(t);
    }
    this.timersSet = kept;
    if (!this.timersCancel.includes(trigger)) this.timersCancel.push(trigger);
  }

  /**
   * Marks the key as failed with message: everything the batch did for
   * the key is dropped and the host sends its inputs to the dead-letter
   * stream. Other keys are not affected. The first failure is kept.
   */
  fail(message: string): void {
    if (this.error === null) this.error = message.length ? message : "failed (the error has no message)";
  }

  /**
   * Produces an output message on stream with a copy of payload (a string
   * as UTF-8, or bytes). Its parents, which decide its timestamps and
   * lineage, are every input of the key unless options name them; see
   * Message.emit and Timer.emit for an output derived from one input.
   * Emitting to a stream that is not a declared output stream is a guest
   * failure: the batch ends with status -2 and the reason is logged.
   */
  emit<T>(stream: string, payload: T, options: EmitOptions | null = null): void {
    this.emitFrom(-1, stream, bytesOf<T>(payload), options);
  }

  /**
   * Emits with input as the default parent (-1: every input); what emit,
   * Message.emit and Timer.emit share.
   */
  emitFrom(input: i32, stream: string, payload: Uint8Array, options: EmitOptions | null): void {
    const outputs = this.batch.outputs;
    if (outputs !== null && !outputs.includes(stream)) {
      this.batch.misuse("emit to " + quote(stream) + ", which is not a declared output stream (declared: " + outputs.join(", ") + ")");
      return;
    }
    let parents: i32[] | null = null;
    let key = "";
    let hasEvent = false;
    let event: i64 = 0;
    if (options !== null) {
      key = options.key;
      hasEvent = options.hasEventTimestamp;
      event = options.eventTimestamp;
      if (options.parents !== null) {
        parents = this.checkParents(options.parents!);
        if (parents === null) return;
      } else if (options.allParents) {
        input = -1;
      }
    }

    let w = this.emitBuf;
    if (w === null) {
      w = new Writer(64 + payload.length);
      this.emitBuf = w;
    }
    // Emit: key, stream, parents, payload, event_ts (canonical order).
    let fields = 2;
    if (key.length) fields++;
    if (parents !== null || input >= 0) fields++;
    if (hasEvent) fields++;
    w.map(fields);
    if (key.length) {
      w.text("key");
      w.text(key);
    }
    w.text("stream");
    w.text(stream);
    if (parents !== null) {
      w.text("parents");
      w.array(parents.length);
      for (let i = 0; i < parents.length; i++) w.uint(<u64>parents[i]);
    } else if (input >= 0) {
      w.text("parents");
      w.array(1);
      w.uint(<u64>input);
    }
    w.text("payload");
    w.bytes(payload);
    if (hasEvent) {
      w.text("event_ts");
      w.int(event);
    }
    this.emitCount++;
  }

  /** Checks explicit parent indexes and drops repeats; null after a misuse. */
  private checkParents(inputs: i32[]): i32[] | null {
    if (inputs.length == 0) {
      this.batch.misuse("withParents without inputs; use withAllParents for every input");
      return null;
    }
    const n = this.inputs;
    const out: i32[] = [];
    for (let i = 0; i < inputs.length; i++) {
      const p = inputs[i];
      if (p < 0 || p >= n) {
        this.batch.misuse("withParents(" + p.toString() + "): key " + quote(this.key) + " has " + n.toString() + " inputs");
        return null;
      }
      if (!out.includes(p)) out.push(p);
    }
    return out;
  }

  /** Reports a state or timer call in a map computation as a misuse. */
  private requireTransform(call: string): bool {
    if (this.batch.kind == KIND_MAP) {
      this.batch.misuse(call + " in a map computation; only a transform keeps state and timers");
      return false;
    }
    return true;
  }

  /** Reports whether the key has something to report in the response. */
  reports(): bool {
    return this.error !== null || this.emitCount > 0 || this.timersSet.length > 0 || this.timersCancel.length > 0 || this.stateOp != StateOp.Keep;
  }

  /** Writes the key's ResponseKey map. */
  encode(w: Writer): void {
    const err = this.error;
    if (err !== null) {
      w.map(2);
      w.text("key");
      w.text(this.key);
      w.text("error");
      w.text(err);
      return;
    }
    // ResponseKey: key, emits, error, state, state_op, timers_set, timers_cancel.
    let fields = 1;
    if (this.emitCount > 0) fields++;
    if (this.stateOp == StateOp.Replace) fields++;
    if (this.stateOp != StateOp.Keep) fields++;
    if (this.timersSet.length > 0) fields++;
    if (this.timersCancel.length > 0) fields++;
    w.map(fields);
    w.text("key");
    w.text(this.key);
    const emits = this.emitBuf;
    if (this.emitCount > 0 && emits !== null) {
      w.text("emits");
      w.array(this.emitCount);
      w.raw(emits.ptr, emits.len);
    }
    if (this.stateOp == StateOp.Replace) {
      w.text("state");
      w.bytes(this.newState);
    }
    if (this.stateOp != StateOp.Keep) {
      w.text("state_op");
      w.uint(<u64>this.stateOp);
    }
    if (this.timersSet.length > 0) {
      w.text("timers_set");
      w.array(this.timersSet.length);
      for (let i = 0; i < this.timersSet.length; i++) {
        const t = this.timersSet[i];
        // Timer: payload, event_ts, trigger_ts.
        let n = 1;
        if (t.payload.length > 0) n++;
        if (t.hasEventTimestamp) n++;
        w.map(n);
        if (t.payload.length > 0) {
          w.text("payload");
          w.bytes(t.payload);
        }
        if (t.hasEventTimestamp) {
          w.text("event_ts");
          w.int(t.eventTimestamp);
        }
        w.text("trigger_ts");
        w.int(t.trigger);
      }
    }
    if (this.timersCancel.length > 0) {
      w.text("timers_cancel");
      w.array(this.timersCancel.length);
      for (let i = 0; i < this.timersCancel.length; i++) w.int(this.timersCancel[i]);
    }
  }
}

/**
 * One call of the computation: the inputs of several keys of one
 * partition. It is valid only during the process call it was passed to.
 */
export class Batch {
  /** The ABI version of the request. */
  abi: u64 = 0;
  /** The computation's name in the pipeline spec. */
  computation: string = "";
  /** The computation's kind: "transform" or "map". */
  kind: string = "";
  /** The computation partition the batch belongs to. */
  partition: u64 = 0;
  /** The epoch the batch's effects commit in. */
  epoch: u64 = 0;
  /** The partition's input watermarks when the batch was cut. */
  watermarks: Watermarks = new Watermarks();
  /** The batch's keys in the host's order; each has at least one due timer or message. */
  keys: Key[] = [];
  /** The declared output streams; null when no init told them. */
  outputs: string[] | null = null;
  /** The error the whole batch failed with, or null. */
  error: string | null = null;
  /** The first misuse of the SDK, which makes the call a guest failure. */
  misuseError: string | null = null;

  /**
   * Fails the whole batch with message: nothing the batch did is
   * reported, and the host applies the pipeline's failure policy (retry
   * or dead-letter) to every input. The first failure is kept.
   */
  fail(message: string): void {
    if (this.error === null) this.error = message.length ? message : "failed (the error has no message)";
  }

  /** Records a misuse of the SDK, as the Go SDK panics on it. */
  misuse(message: string): void {
    if (this.misuseError === null) this.misuseError = "flowhost: " + message;
  }

  /** Writes the batch's Response. */
  encode(w: Writer): void {
    // Response: keys, error.
    const err = this.error;
    if (err !== null) {
      w.map(2);
      w.text("keys");
      w.array(0);
      w.text("error");
      w.text(err);
      return;
    }
    let n = 0;
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i].reports()) n++;
    w.map(1);
    w.text("keys");
    w.array(n);
    for (let i = 0; i < this.keys.length; i++) {
      const k = this.keys[i];
      if (k.reports()) k.encode(w);
    }
  }
}
