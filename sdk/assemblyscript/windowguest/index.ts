// The AssemblyScript SDK's window conformance guest: a transform that
// counts each key's records in event-time windows with the SDK's Windows
// helper, as every SDK's window guest does, so that the real-host
// conformance test can compare the languages with one model.
//
// Parameters: kind (tumbling, hopping or session), size_ns (tumbling,
// hopping), advance_ns (hopping), gap_ns (session), lateness_ns (default
// 0). Results go to "windows" as {"start":S,"end":E,"count":N}; late
// records go to "late" unchanged. The accumulator is the count as an
// unsigned LEB128 varint (Go binary.AppendUvarint); empty is 0.

import { Aggregator, Batch, Message, Params, Window, WindowSpec, Windows, bytesOfText, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

/** Reads a count as Go's binary.Uvarint does: a truncated or overflowing one is 0. */
function readCount(b: Uint8Array): u64 {
  let x: u64 = 0;
  let s: u64 = 0;
  for (let i = 0; i < b.length; i++) {
    if (i == 10) return 0;
    const c = <u64>b[i];
    if (c < 0x80) {
      if (i == 9 && c > 1) return 0;
      return x | (c << s);
    }
    x |= (c & 0x7f) << s;
    s += 7;
  }
  return 0;
}

function writeCount(x: u64): Uint8Array {
  const out = new Uint8Array(10);
  let n = 0;
  while (x >= 0x80) {
    out[n++] = <u8>(x | 0x80);
    x >>= 7;
  }
  out[n++] = <u8>x;
  return out.slice(0, n);
}

class Count extends Aggregator {
  add(acc: Uint8Array, m: Message): Uint8Array {
    return writeCount(readCount(acc) + 1);
  }

  merge(a: Uint8Array, b: Uint8Array): Uint8Array {
    return writeCount(readCount(a) + readCount(b));
  }

  result(w: Window, acc: Uint8Array): Uint8Array {
    return bytesOfText("{\"start\":" + w.start.toString() + ",\"end\":" + w.end.toString() + ",\"count\":" + readCount(acc).toString() + "}");
  }
}

let windows: Windows | null = null;

/** An integer parameter that must be positive; the error names it. */
function positive(p: Params, name: string): i64 {
  const v = p.int(name);
  if (p.error === null && v <= 0) p.error = "parameter \"" + name + "\": must be positive, got " + v.toString();
  return v;
}

function start(p: Params): string | null {
  const kind = p.string("kind");
  if (p.error !== null) return p.error;
  let spec: WindowSpec;
  if (kind == "tumbling") {
    const size = positive(p, "size_ns");
    if (p.error !== null) return p.error;
    spec = WindowSpec.tumbling(size);
  } else if (kind == "hopping") {
    const size = positive(p, "size_ns");
    const advance = positive(p, "advance_ns");
    if (p.error !== null) return p.error;
    if (advance > size) return "parameter \"advance_ns\": must not exceed size_ns (" + size.toString() + "), got " + advance.toString();
    spec = WindowSpec.hopping(size, advance);
  } else if (kind == "session") {
    const gap = positive(p, "gap_ns");
    if (p.error !== null) return p.error;
    spec = WindowSpec.session(gap);
  } else {
    return "parameter \"kind\": must be tumbling, hopping or session, got \"" + kind + "\"";
  }
  let lateness: i64 = 0;
  if (p.has("lateness_ns")) {
    lateness = p.int("lateness_ns");
    if (p.error !== null) return p.error;
    if (lateness < 0) return "parameter \"lateness_ns\": must not be negative, got " + lateness.toString();
  }
  windows = new Windows(spec, new Count(), "windows", "late").withAllowedLateness(lateness);
  return null;
}

function process(b: Batch): void {
  const w = windows!;
  for (let i = 0; i < b.keys.length; i++) w.process(b.keys[i]);
}

register(process, start);
