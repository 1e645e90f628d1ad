// The join test guest: the SDK's IntervalJoin or EnrichJoin, with
// payloads that spell out every field a helper hands to the user's
// function, so that the tests can compare them with the Go helpers'.
//
// Parameters: join (interval or enrich); for interval, lower_ns and
// upper_ns. Interval: left "left", right "right", outputs "joined" and
// "expired" (an expired payload is "X" + the record). Enrich: table
// "table", events "events", outputs "enriched" and "unmatched".
// A record is id/stream/input/ts/payload, id as its exact bytes.

import { Batch, Enricher, EnrichJoin, IntervalJoin, JoinPair, JoinRecord, Joiner, Message, Params, bytesOfText, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

function cat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (let i = 0; i < parts.length; i++) n += parts[i].length;
  const out = new Uint8Array(n);
  let off = 0;
  for (let i = 0; i < parts.length; i++) {
    out.set(parts[i], off);
    off += parts[i].length;
  }
  return out;
}

function record(r: JoinRecord): Uint8Array {
  return cat([r.idBytes, bytesOfText("/" + r.stream + "/" + r.input.toString() + "/" + r.eventTimestamp.toString() + "/"), r.payload]);
}

class Pairs extends Joiner {
  join(p: JoinPair): Uint8Array {
    return cat([bytesOfText(p.key + " L:"), record(p.left), bytesOfText(" R:"), record(p.right)]);
  }

  expired(r: JoinRecord): Uint8Array {
    return cat([bytesOfText("X"), record(r)]);
  }
}

class Enrich extends Enricher {
  enrich(ev: Message, v: JoinRecord): Uint8Array {
    return cat([bytesOfText(ev.id + "/" + ev.stream + "/" + ev.input.toString() + "/" + ev.eventTimestamp.toString() + "/"), ev.payload, bytesOfText(" V:"), record(v)]);
  }
}

let interval: IntervalJoin | null = null;
let enrich: EnrichJoin | null = null;

function start(p: Params): string | null {
  const kind = p.string("join");
  if (p.error !== null) return p.error;
  if (kind == "interval") {
    const lower = p.int("lower_ns");
    const upper = p.int("upper_ns");
    if (p.error !== null) return p.error;
    if (lower > upper) return "parameter \"lower_ns\": must not exceed upper_ns";
    interval = new IntervalJoin("left", "right", lower, upper, new Pairs(), "joined", "expired");
  } else if (kind == "enrich") {
    enrich = new EnrichJoin("table", "events", new Enrich(), "enriched", "unmatched");
  } else {
    return "parameter \"join\": must be interval or enrich, got \"" + kind + "\"";
  }
  return null;
}

function process(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    if (interval !== null) interval!.process(b.keys[i]);
    else enrich!.process(b.keys[i]);
  }
}

register(process, start);
