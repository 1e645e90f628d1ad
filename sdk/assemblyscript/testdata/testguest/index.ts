// The test guest: one computation per golden vector of
// abi/testdata/vectors, chosen by the computation name of the request or
// init, each written against the SDK the way sdk/go/golden_test.go writes
// it in Go, so that its responses must equal the golden bytes exactly;
// and a few computations for the other tests of the package:
//
//   - params reads one parameter with a typed getter, to compare the
//     getters' errors with the Go SDK's;
//   - throw throws, to show what an abort looks like to the host;
//   - remember emits the first payload of the previous batch, to show that
//     payloads stay valid after their batch, garbage collection included.

import { Batch, Params, register, parseInt64, withKey, withEventTimestamp, withParents, withTimerEventTimestamp, ValueKind } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

const SECOND: i64 = 1_000_000_000;

function process(b: Batch): void {
  const c = b.computation;
  if (c == "noop") noop(b);
  else if (c == "upper") upper(b);
  else if (c == "click-counter") clickCounter(b);
  else if (c == "echo") echo(b);
  else if (c == "counter" || c == "windowed-sum") counter(b);
  else if (c == "sessionizer") sessionizer(b);
  else if (c == "join") join(b);
  else if (c == "length") lengths(b);
  else if (c == "doubler") doubler(b);
  else if (c == "lookup") lookup(b);
  else if (c == "throw") throw new Error("boom in " + b.keys[0].key);
  else if (c == "remember") remember(b);
  else b.fail("no script for computation " + c);
}

function noop(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) b.keys[i].emit("out", new Uint8Array(0));
}

function upper(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const ms = b.keys[i].messages();
    for (let j = 0; j < ms.length; j++) ms[j].emit("out", ms[j].text().toUpperCase());
  }
}

function clickCounter(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const n = k.messages().length;
    if (n > 1) k.emit("counts", n.toString());
  }
}

function echo(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const ms = k.messages();
    for (let j = 0; j < ms.length; j++) ms[j].emit("echo", ms[j].payload, withKey(k.key));
  }
}

/**
 * Keeps a decimal count of messages in the key's state: "clear" empties
 * the state, "reset" emits the final count and deletes it, "peek" changes
 * nothing.
 */
function counter(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const s = k.stateText();
    let n: i64 = 0;
    if (s !== null) {
      const parsed = parseInt64(s);
      if (parsed.error === null) n = parsed.value;
    }
    const ms = k.messages();
    for (let j = 0; j < ms.length; j++) {
      const m = ms[j];
      const text = m.text();
      if (text == "clear") {
        k.setState("");
      } else if (text == "reset") {
        m.emit("final", n.toString());
        k.deleteState();
      } else if (text != "peek") {
        n++;
        k.setState(n.toString());
      }
    }
  }
}

function sessionizer(b: Batch): void {
  const now = b.watermarks.event;
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const ts = k.timers();
    for (let j = 0; j < ts.length; j++) ts[j].emit("fired", "timer:" + ts[j].text());
    const ms = k.messages();
    for (let j = 0; j < ms.length; j++) ms[j].emit("fired", "message:" + ms[j].text());
    k.setTimer(now + 30 * SECOND);
    k.setTimer(now + 60 * SECOND);
    k.setTimer(now + 120 * SECOND, withTimerEventTimestamp(now + 100 * SECOND).withPayload("late"));
    k.cancelTimer(now + 30 * SECOND); // also drops the first setTimer
  }
}

function join(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const orders: i32[] = [];
    const payments: i32[] = [];
    const orderPayloads: string[] = [];
    let payment = new Uint8Array(0);
    let last: i64 = 0;
    const ms = k.messages();
    for (let j = 0; j < ms.length; j++) {
      const m = ms[j];
      if (m.stream == "orders") {
        orders.push(m.input);
        orderPayloads.push(m.text());
      } else if (m.stream == "payments") {
        payments.push(m.input);
        payment = m.payload;
      }
      last = m.alignmentTimestamp;
    }
    k.emit("joined", orderPayloads.join("+"), withParents(orders));
    k.emit("joined", payment, withKey("customer-1").withEventTimestamp(-1000).withParents(payments));
    k.emit("audit", k.inputs.toString() + " inputs", withEventTimestamp(last + SECOND));
  }
}

function lengths(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const ms = b.keys[i].messages();
    for (let j = 0; j < ms.length; j++) ms[j].emit("lengths", ms[j].payload.length.toString());
  }
}

function doubler(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    const k = b.keys[i];
    const ms = k.messages();
    for (let j = 0; j < ms.length; j++) {
      const parsed = parseInt64(ms[j].text());
      const err = parsed.error;
      if (err !== null) {
        k.fail(err.replace("strconv.ParseInt", "strconv.Atoi"));
        continue;
      }
      ms[j].emit("doubled", (2 * parsed.value).toString());
    }
  }
}

function lookup(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) b.keys[i].emit("out", "dropped with the batch");
  b.fail("lookup table not loaded");
}

/** The first payload of the previous batch: a view of that batch's request. */
let remembered = new Uint8Array(0);

function remember(b: Batch): void {
  const k = b.keys[0];
  k.emit("out", remembered);
  remembered = k.messages()[0].payload;
}

function init(p: Params): string | null {
  if (p.computation == "windowed-sum") return requireParameters(p);
  if (p.computation == "params") return readParameter(p);
  return null;
}

/** Reads every parameter of the init_parameters vector; the first missing or mistyped one is the error. */
function requireParameters(p: Params): string | null {
  const window = p.duration("window");
  const threshold = p.int("threshold");
  const offset = p.int("offset");
  const ratio = p.float("ratio");
  const enabled = p.bool("enabled");
  const tags = p.strings("tags");
  const sink = p.map("sink");
  if (p.error !== null) return p.error;
  const fallback = p.value("fallback");
  if (fallback === null || fallback.kind != ValueKind.Null) return "fallback: want a null parameter";
  if (window != 300 * SECOND || threshold != 10 || offset != -3 || ratio != 0.25 || !enabled || tags.join(",") != "a,b" ||
      !sink.has("name") || sink.get("name").text != "alerts" || !sink.has("retries") || sink.get("retries").intValue != 3) {
    return "parameters read back wrong";
  }
  return null;
}

/**
 * Reads parameter "x" with the getter named by the text parameter
 * "getter" and refuses to start with the getter's error, or with
 * "ok:" and the value it read.
 */
function readParameter(p: Params): string | null {
  const g = p.value("getter");
  const getter = g !== null ? g.text : "";
  let got = "";
  if (getter == "string") got = p.string("x");
  else if (getter == "int") got = p.int("x").toString();
  else if (getter == "float") got = reinterpret<i64>(p.float("x")).toString();
  else if (getter == "bool") got = p.bool("x") ? "true" : "false";
  else if (getter == "duration") got = p.duration("x").toString();
  else if (getter == "strings") got = p.strings("x").join(",");
  else if (getter == "map") {
    const keys = p.map("x").keys();
    keys.sort();
    got = keys.join(",");
  } else return "unknown getter " + getter;
  const err = p.error;
  return err !== null ? err : "ok:" + got;
}

register(process, init);
