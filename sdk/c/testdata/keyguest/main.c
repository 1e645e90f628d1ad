/* The key fields test guest: each message's payload names fields (hex of
 * each, joined by ","); the guest emits to "out" what fh_parse_key and its
 * accessors answer for the key (testdata/keyfields/line.h), which
 * keyfields_test.go compares with Go's ParseKey. */
#include "../keyfields/line.h"

int flowhost_init_params(fh_params *p) {
    (void)p;
    return 0;
}

int flowhost_process_key(fh_key *k) {
    size_t key_len;
    const char *key = fh_key_text(k, &key_len);
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        size_t n;
        char *line = kfl_line(key, key_len, (const char *)m->payload, m->payload_len, &n);
        if (line == NULL) return fh_fail_key(k, "out of memory");
        int rc = fh_emit(k, "out", line, n);
        free(line);
        if (rc != 0) return -1;
    }
    return 0;
}
