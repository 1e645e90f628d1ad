// The AssemblyScript SDK's conformance guest: a computation that
// interprets each input message as the script of sdk/conformance/SCRIPT.md,
// so that the conformance suite drives every corner of ABI v1 through it
// and compares its responses with those of the other languages' guests.
// Where SCRIPT.md leaves a choice open it does what the Go guest
// (sdk/conformance/goguest) does: a command with too few arguments or a
// number that does not parse fails the key with the Go guest's wording,
// and failbatch ends the batch at once.
//
// Scripts are parsed as bytes, so that texts the script emits or stores
// pass through unchanged even when they are not UTF-8.

import {
  Batch, Key, Message, Params, ParsedInt, ValueKind, register, parseInt64,
  quoteBytes, withParents, withAllParents, withTimerEventTimestamp, textOf,
} from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

/** The stream every echo, timer, showstate, param and meta goes to. */
const OUT = "out";

/** The instance's parameters, kept from init for `param:`. */
let params: Params | null = null;

/** Refuses to start when fail_init is a text parameter (another type is ignored, as SCRIPT.md names only text). */
function start(p: Params): string | null {
  params = p;
  const v = p.value("fail_init");
  if (v !== null && v.kind == ValueKind.Text) return v.text;
  return null;
}

/** Runs every key's due timers, then its messages, in order; a failbatch ends the batch. */
function process(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const timers = k.timers();
    for (let j = 0; j < timers.length; j++) {
      const t = timers[j];
      t.emit(OUT, concat(ascii("timer:" + t.triggerTimestamp.toString() + ":"), t.payload), withParents([t.input]));
    }
    const messages = k.messages();
    for (let j = 0; j < messages.length; j++) {
      const m = messages[j];
      const p = m.payload;
      if (p.length == 0 || p[0] != 0x21 /* ! */) {
        m.emit(OUT, p, withParents([m.input]));
        continue;
      }
      const commands = split(p.subarray(1), 0x3b /* ; */, 0);
      for (let c = 0; c < commands.length; c++) {
        if (run(b, k, m, commands[c])) return;
      }
    }
  }
}

/** The number of arguments of a verb, or -1 for an unknown verb; the last argument takes the rest of the command. */
function arity(verb: string): i32 {
  if (verb == "emit" || verb == "emitall" || verb == "emitnone") return 2;
  if (verb == "emitk" || verb == "emite" || verb == "timerp") return 3;
  if (verb == "state" || verb == "timer" || verb == "cancel" || verb == "param" || verb == "failkey" || verb == "failbatch") return 1;
  if (verb == "append" || verb == "delstate" || verb == "showstate" || verb == "meta") return 0;
  return -1;
}

/**
 * Runs one command of message m on key k. It returns true only for
 * failbatch; every other failure fails the key and lets the script go on
 * (the key's first failure is the one reported).
 */
function run(b: Batch, k: Key, m: Message, cmd: Uint8Array): bool {
  const colon = cmd.indexOf(0x3a /* : */);
  const verbBytes = colon < 0 ? cmd : cmd.subarray(0, colon);
  const verb = textOf(verbBytes);
  const n = arity(verb);
  if (n < 0) {
    k.fail("unknown command " + verb);
    return false;
  }
  let args: Uint8Array[] = [];
  if (n > 0) {
    if (colon >= 0) args = split(cmd.subarray(colon + 1), 0x3a, n);
    if (args.length != n) {
      k.fail("bad command " + quoteBytes(cmd) + ": " + verb + " takes " + n.toString() + " arguments");
      return false;
    }
  }
  const own = withParents([m.input]);
  if (verb == "emit") {
    k.emit(textOf(args[0]), args[1], own);
  } else if (verb == "emitk") {
    k.emit(textOf(args[0]), args[2], own.withKey(textOf(args[1])));
  } else if (verb == "emite") {
    const e = number(k, cmd, args[1]);
    if (e !== null) k.emit(textOf(args[0]), args[2], own.withEventTimestamp(e.value));
  } else if (verb == "emitall") {
    const every = new Array<i32>(k.inputs);
    for (let i = 0; i < every.length; i++) every[i] = i;
    k.emit(textOf(args[0]), args[1], withParents(every));
  } else if (verb == "emitnone") {
    k.emit(textOf(args[0]), args[1], withAllParents());
  } else if (verb == "state") {
    k.setState(args[0]);
  } else if (verb == "append") {
    const old = k.state();
    k.setState(concat(concat(old !== null ? old : new Uint8Array(0), ascii(m.id)), ascii(",")));
  } else if (verb == "delstate") {
    k.deleteState();
  } else if (verb == "showstate") {
    const s = k.state();
    m.emit(OUT, s !== null ? concat(ascii("state:"), s) : ascii("state:none"), own);
  } else if (verb == "timer") {
    const tr = number(k, cmd, args[0]);
    if (tr !== null) k.setTimer(tr.value);
  } else if (verb == "timerp") {
    const tr = number(k, cmd, args[0]);
    if (tr !== null) {
      const e = number(k, cmd, args[1]);
      if (e !== null) k.setTimer(tr.value, withTimerEventTimestamp(e.value).withPayload(args[2]));
    }
  } else if (verb == "cancel") {
    const tr = number(k, cmd, args[0]);
    if (tr !== null) k.cancelTimer(tr.value);
  } else if (verb == "param") {
    const name = textOf(args[0]);
    m.emit(OUT, "param:" + name + "=" + paramText(name), own);
  } else if (verb == "meta") {
    const wm = b.watermarks;
    m.emit(OUT,
      "meta:key=" + k.key + ",stream=" + m.stream + ",id=" + m.id +
      ",event=" + m.eventTimestamp.toString() + ",system=" + m.systemTimestamp.toString() +
      ",alignment=" + m.alignmentTimestamp.toString() +
      ",wm=" + wm.event.toString() + "/" + wm.system.toString() +
      ",partition=" + b.partition.toString() + ",epoch=" + b.epoch.toString() +
      ",computation=" + b.computation + ",kind=" + b.kind, own);
  } else if (verb == "failkey") {
    k.fail(textOf(args[0]));
  } else if (verb == "failbatch") {
    b.fail(textOf(args[0]));
    return true;
  }
  return false;
}

/** Parses a numeric argument; a bad one fails the key before the command has any effect. */
function number(k: Key, cmd: Uint8Array, arg: Uint8Array): ParsedInt | null {
  const parsed = parseInt64(textOf(arg));
  const err = parsed.error;
  if (err !== null) {
    k.fail("bad command " + quoteBytes(cmd) + ": " + err);
    return null;
  }
  return parsed;
}

/** Renders a parameter the way `param:` reports it. */
function paramText(name: string): string {
  const p = params;
  if (p === null) return "missing";
  const v = p.value(name);
  if (v === null) return "missing";
  if (v.kind == ValueKind.Text) return v.text;
  if (v.kind == ValueKind.Int) return v.intValue.toString();
  if (v.kind == ValueKind.Bool) return v.boolValue ? "true" : "false";
  return "?";
}

/**
 * Splits b at every sep, as Go's strings.Split; with limit > 0 into at
 * most limit parts, the last taking the rest, as strings.SplitN.
 */
function split(b: Uint8Array, sep: u8, limit: i32): Uint8Array[] {
  const parts: Uint8Array[] = [];
  let from = 0;
  for (let i = 0; i < b.length; i++) {
    if (limit > 0 && parts.length == limit - 1) break;
    if (b[i] == sep) {
      parts.push(b.subarray(from, i));
      from = i + 1;
    }
  }
  parts.push(b.subarray(from));
  return parts;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function ascii(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}

register(process, start);
