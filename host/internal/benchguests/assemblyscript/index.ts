// The identity benchmark guest written with the AssemblyScript SDK: every
// message of a batch is emitted unchanged on stream "out", with the
// message as its only parent (Message.emit).

import { Batch, register } from "@flowhost/sdk";
export * from "@flowhost/sdk/assembly/exports";

function process(batch: Batch): void {
  for (let i = 0; i < batch.keys.length; i++) {
    const messages = batch.keys[i].messages();
    for (let j = 0; j < messages.length; j++) {
      messages[j].emit("out", messages[j].payload);
    }
  }
}

register(process);
