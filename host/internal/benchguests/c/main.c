/*
 * The identity benchmark guest written with the C SDK: every message of a
 * batch is emitted unchanged on stream "out". fh_next_message makes the
 * message the key's current input, so fh_emit gives it that one parent.
 */
#include "flowhost.h"

int flowhost_process_key(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        if (fh_emit(k, "out", m->payload, m->payload_len) != 0) {
            return -1;
        }
    }
    return 0;
}
