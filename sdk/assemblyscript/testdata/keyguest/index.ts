// The key fields test guest: for each message, parseKey(key, names) with
// the names the message's payload lists (hex of each, joined by ","), and
// an emit to "out" of what every accessor answers, in the format of
// keyfields_test.go: `E <hex error>`, or for every name and the unknown
// field `zz` the results of raw, string, int, float (its bits) and bool,
// `o<hex value>` or `e<hex error>`, space-separated.

import { Batch, KeyError, bytesOfText, parseKey, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

const HEX = "0123456789abcdef";

function hex(s: string): string {
  // Into bytes, not by concatenation: a key of 20000 characters would
  // otherwise allocate gigabytes under the runtime that never frees.
  const b = bytesOfText(s);
  const out = new Uint8Array(2 * b.length);
  for (let i = 0; i < b.length; i++) {
    out[2 * i] = <u8>HEX.charCodeAt(b[i] >> 4);
    out[2 * i + 1] = <u8>HEX.charCodeAt(b[i] & 15);
  }
  return String.UTF8.decode(out.buffer);
}

function unhex(s: string): string {
  const b = new Uint8Array(s.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = <u8>I32.parseInt(s.substr(2 * i, 2), 16);
  return String.UTF8.decode(b.buffer);
}

function res(v: string, e: KeyError | null): string {
  return e ? "e" + hex(e.toString()) : "o" + hex(v);
}

function process(batch: Batch): void {
  for (let i = 0; i < batch.keys.length; i++) {
    const k = batch.keys[i];
    const messages = k.messages();
    for (let j = 0; j < messages.length; j++) {
      const spec = messages[j].text();
      const names: string[] = [];
      if (spec.length > 0) {
        const parts = spec.split(",");
        for (let p = 0; p < parts.length; p++) names.push(unhex(parts[p]));
      }
      const pk = parseKey(k.key, names);
      if (pk.error) {
        messages[j].emit("out", "E " + hex(pk.error!.toString()));
        continue;
      }
      const kf = pk.fields!;
      const all = names.slice(0);
      all.push("zz");
      const f: string[] = [];
      for (let n = 0; n < all.length; n++) {
        const name = all[n];
        const r = kf.raw(name);
        f.push(res(r.value, r.error));
        const s = kf.string(name);
        f.push(res(s.value, s.error));
        const iv = kf.int(name);
        f.push(res(iv.value.toString(), iv.error));
        const fv = kf.float(name);
        f.push(res(fv.error ? "0" : reinterpret<u64>(fv.value).toString(), fv.error));
        const bv = kf.bool(name);
        f.push(res(bv.value ? "true" : "false", bv.error));
      }
      messages[j].emit("out", f.join(" "));
    }
  }
}

register(process);
