// The typed state test guest: each message's payload is a script of
// operations (typed_state_test.go, tsScript: one op byte, then fields of a
// one-byte length), and every operation emits its result to "out", so the
// test compares each response with the Go SDK's byte for byte.

import {
  Batch, Key, Message, Params, StateError, StateErrorKind, bytesOfText, discardStateChanges, listCell, mapCell,
  register, saveState, stateLimitParam, textOf, valueCell,
} from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

class Out {
  parts: Uint8Array[] = [];
  n: i32 = 0;
  add(b: Uint8Array): void {
    this.parts.push(b);
    this.n += b.length;
  }
  text(s: string): void {
    this.add(bytesOfText(s));
  }
  bytes(): Uint8Array {
    const b = new Uint8Array(this.n);
    let at = 0;
    for (let i = 0; i < this.parts.length; i++) {
      b.set(this.parts[i], at);
      at += this.parts[i].length;
    }
    return b;
  }
}

function result(o: Out, e: StateError | null): void {
  if (e === null) {
    o.text("ok");
    return;
  }
  o.text("error:" + e.toString());
  if (e.kind == StateErrorKind.Quota) o.text(" size=" + e.size.toString() + " limit=" + e.limit.toString());
  if (e.kind == StateErrorKind.State) o.text(" offset=" + e.offset.toString());
}

function run(k: Key, msg: Message): void {
  const p = msg.payload;
  let i = 0;
  while (i < p.length) {
    const op = p[i++];
    let cell = "";
    let key = "";
    let data = new Uint8Array(0);
    if (op != 0x73 && op != 0x78) {
      if (i >= p.length || p.length - i < 1 + <i32>p[i]) { k.fail("bad script"); return; }
      cell = textOf(p.subarray(i + 1, i + 1 + <i32>p[i]));
      i += 1 + <i32>p[i];
    }
    if (op == 0x70 || op == 0x50 || op == 0x64 || op == 0x47) {
      if (i >= p.length || p.length - i < 1 + <i32>p[i]) { k.fail("bad script"); return; }
      key = textOf(p.subarray(i + 1, i + 1 + <i32>p[i]));
      i += 1 + <i32>p[i];
    }
    if (op == 0x76 || op == 0x61 || op == 0x70 || op == 0x50) {
      if (i >= p.length || p.length - i < 1 + <i32>p[i]) { k.fail("bad script"); return; }
      data = p.subarray(i + 1, i + 1 + <i32>p[i]);
      i += 1 + <i32>p[i];
    }
    const o = new Out();
    if (op == 0x76) result(o, valueCell(k, cell).set(data)); // v
    else if (op == 0x61) result(o, listCell(k, cell).append(data)); // a
    else if (op == 0x70) result(o, mapCell(k, cell).put(key, data)); // p
    else if (op == 0x50) result(o, mapCell(k, cell).put(key + String.fromCharCode(0xd800), data)); // P: an unpaired surrogate after the key
    else if (op == 0x64) result(o, mapCell(k, cell).delete(key)); // d
    else if (op == 0x63) result(o, valueCell(k, cell).clear()); // c
    else if (op == 0x73) result(o, saveState(k)); // s
    else if (op == 0x78) { discardStateChanges(k); o.text("ok"); } // x
    else if (op == 0x67 || op == 0x47) { // g G
      const r = op == 0x67 ? valueCell(k, cell).get() : mapCell(k, cell).get(key);
      if (r.error !== null) result(o, r.error);
      else if (r.value === null) o.text("none");
      else { o.text("value:"); o.add(r.value!); }
    } else if (op == 0x6c) { // l
      const r = listCell(k, cell).all();
      if (r.error !== null) result(o, r.error);
      else {
        o.text("list");
        for (let j = 0; j < r.items.length; j++) { o.text("|"); o.add(r.items[j]); }
        o.text(" len=" + r.items.length.toString());
      }
    } else if (op == 0x6d) { // m
      const m = mapCell(k, cell);
      const r = m.keys();
      if (r.error !== null) result(o, r.error);
      else {
        o.text("map");
        for (let j = 0; j < r.keys.length; j++) {
          o.text("|" + r.keys[j] + "=");
          o.add(m.get(r.keys[j]).value!);
        }
        o.text(" len=" + r.keys.length.toString());
      }
    } else if (op == 0x72) { // r
      k.setState(bytesOfText(cell));
      o.text("ok");
    } else { k.fail("bad script"); return; }
    msg.emit("out", o.bytes()); // the message as parent, as the Go SDK's Emit inside Messages
  }
}

function process(batch: Batch): void {
  for (let i = 0; i < batch.keys.length; i++) {
    const k = batch.keys[i];
    const messages = k.messages();
    for (let j = 0; j < messages.length; j++) {
      run(k, messages[j]);
      if (k.error !== null) break;
    }
  }
}

function init(p: Params): string | null {
  return stateLimitParam(p);
}

register(process, init);
