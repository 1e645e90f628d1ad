// The AssemblyScript SDK's join conformance guest (sdk/conformance/README.md,
// "The join guest"; the contract is sdk/JOINS.md): a transform that hands
// every key of each batch to the SDK's interval or enrichment join, as
// every SDK's join guest does, so that the real-host join test can compare
// the languages with one model.
//
// Parameters: join (interval or enrich); for interval lower_ns and
// upper_ns (lower_ns <= upper_ns). Interval: streams "left" and "right",
// matches on "joined" as <left payload>|<right payload>, never-matched
// records on "expired" unchanged. Enrich: streams "table" and "events",
// enriched events on "enriched" as <event payload>|<table payload>, events
// without a value on "unmatched" unchanged.

import { Batch, Enricher, EnrichJoin, IntervalJoin, JoinPair, JoinRecord, Joiner, Message, Params, quote, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

const PIPE: u8 = 0x7c; // '|'

/** a, one '|' byte, b. */
function pipe(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + 1 + b.length);
  out.set(a, 0);
  out[a.length] = PIPE;
  out.set(b, a.length + 1);
  return out;
}

class Pipe extends Joiner {
  join(p: JoinPair): Uint8Array {
    return pipe(p.left.payload, p.right.payload);
  }
}

class PipeEnricher extends Enricher {
  enrich(ev: Message, v: JoinRecord): Uint8Array {
    return pipe(ev.payload, v.payload);
  }
}

let interval: IntervalJoin | null = null;
let enrich: EnrichJoin | null = null;

// The bounds are checked here, naming the parameter, because the
// IntervalJoin constructor throws on them, which would trap the instance
// instead of refusing to start.
function start(p: Params): string | null {
  interval = null;
  enrich = null;
  const kind = p.string("join");
  if (p.error !== null) return p.error;
  if (kind == "interval") {
    const lower = p.int("lower_ns");
    const upper = p.int("upper_ns");
    if (p.error !== null) return p.error;
    if (lower == i64.MIN_VALUE) return "parameter \"lower_ns\": must be above the smallest int64";
    if (lower > upper) return "parameter \"lower_ns\": must not exceed upper_ns";
    interval = new IntervalJoin("left", "right", lower, upper, new Pipe(), "joined", "expired");
  } else if (kind == "enrich") {
    enrich = new EnrichJoin("table", "events", new PipeEnricher(), "enriched", "unmatched");
  } else {
    return "parameter \"join\": must be interval or enrich, got " + quote(kind);
  }
  return null;
}

// A key the helper fails (a bad state, a message of another stream) has
// its inputs dead-lettered; the other keys of the batch go on.
function process(b: Batch): void {
  for (let i = 0; i < b.keys.length; i++) {
    if (interval !== null) interval!.process(b.keys[i]);
    else enrich!.process(b.keys[i]);
  }
}

register(process, start);
