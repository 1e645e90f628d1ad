//! The identity benchmark guest written with the Rust SDK: every message
//! of a batch is emitted unchanged on stream "out", with the message as its
//! only parent.

use flowhost::{Batch, Computation, Error};

/// The identity transform; it has no configuration.
#[derive(Default)]
pub struct Identity;

impl Computation for Identity {
    fn process(&mut self, batch: &mut Batch) -> Result<(), Error> {
        batch.for_each_key(|k| {
            for m in k.messages() {
                k.emit("out", m.payload).parent(&m);
            }
            Ok(())
        })
    }
}

flowhost::export!(Identity);
