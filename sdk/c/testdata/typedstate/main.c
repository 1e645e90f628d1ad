/* A test guest for typed state: each message's payload is a script of
 * operations (sdk/c/typed_state_test.go, tsScript), and every operation
 * emits its result to "out", so the test compares it with the Go SDK's. */
#include <stdio.h>
#include <string.h>

#include "flowhost.h"
#include "typed_state.h"

int flowhost_init_params(fh_params *p) { return fh_state_limit_param(p); }

typedef struct out {
    uint8_t buf[1 << 16];
    size_t n;
} out;

static out o;

static void put(const void *p, size_t n) {
    if (o.n + n <= sizeof o.buf) {
        memcpy(o.buf + o.n, p, n);
        o.n += n;
    }
}
static void puts_(const char *s) { put(s, strlen(s)); }

static void result(int rc) {
    if (rc < 0) {
        puts_("error:");
        puts_(fh_ts_last_error()->msg);
        if (rc == FH_TS_QUOTA) {
            char t[64];
            snprintf(t, sizeof t, " size=%zu limit=%zu", fh_ts_last_error()->size, fh_ts_last_error()->limit);
            puts_(t);
        }
        if (rc == FH_TS_STATE) {
            char t[32];
            snprintf(t, sizeof t, " offset=%zu", fh_ts_last_error()->offset);
            puts_(t);
        }
    } else {
        puts_("ok");
    }
}

/* field reads a 1-byte length and that many bytes. */
static bool field(const uint8_t **p, const uint8_t *end, const uint8_t **f, size_t *n) {
    if (*p >= end || (size_t)(end - *p) < 1u + **p) {
        return false;
    }
    *n = **p;
    *f = *p + 1;
    *p += 1 + *n;
    return true;
}

static int run(fh_key *k, const uint8_t *p, size_t len) {
    const uint8_t *end = p + len;
    while (p < end) {
        uint8_t op = *p++;
        const uint8_t *c, *key = NULL, *data = NULL;
        size_t cn = 0, kn = 0, dn = 0;
        char cell[256];
        bool needs_cell = op != 's' && op != 'x';
        if (needs_cell) {
            if (!field(&p, end, &c, &cn)) {
                return fh_fail_key(k, "bad script");
            }
            memcpy(cell, c, cn);
            cell[cn] = 0;
        }
        if ((op == 'p' || op == 'd' || op == 'G') && !field(&p, end, &key, &kn)) {
            return fh_fail_key(k, "bad script");
        }
        if ((op == 'v' || op == 'a' || op == 'p') && !field(&p, end, &data, &dn)) {
            return fh_fail_key(k, "bad script");
        }
        o.n = 0;
        const uint8_t *d;
        size_t n;
        int rc;
        switch (op) {
        case 'v': result(fh_value_set(k, cell, data, dn)); break;
        case 'a': result(fh_list_append(k, cell, data, dn)); break;
        case 'p': result(fh_map_put(k, cell, (const char *)key, kn, data, dn)); break;
        case 'd': result(fh_map_delete(k, cell, (const char *)key, kn)); break;
        case 'c': result(fh_cell_clear(k, cell)); break;
        case 's': result(fh_save_state(k)); break;
        case 'x': fh_discard_state_changes(k); puts_("ok"); break;
        case 'g':
        case 'G':
            rc = op == 'g' ? fh_value_get(k, cell, &d, &n) : fh_map_get(k, cell, (const char *)key, kn, &d, &n);
            if (rc < 0) {
                result(rc);
            } else if (rc == 0) {
                puts_("none");
            } else {
                puts_("value:");
                put(d, n);
            }
            break;
        case 'l': {
            size_t count;
            rc = fh_list_len(k, cell, &count);
            if (rc < 0) {
                result(rc);
                break;
            }
            puts_("list");
            for (size_t i = 0; fh_list_at(k, cell, i, &d, &n) == 1; i++) {
                puts_("|");
                put(d, n);
            }
            char t[32];
            snprintf(t, sizeof t, " len=%zu", count);
            puts_(t);
            break;
        }
        case 'm': {
            size_t count;
            rc = fh_map_len(k, cell, &count);
            if (rc < 0) {
                result(rc);
                break;
            }
            puts_("map");
            const char *ek;
            size_t ekn;
            for (size_t i = 0; fh_map_entry_at(k, cell, i, &ek, &ekn, &d, &n) == 1; i++) {
                puts_("|");
                put(ek, ekn);
                puts_("=");
                put(d, n);
            }
            char t[32];
            snprintf(t, sizeof t, " len=%zu", count);
            puts_(t);
            break;
        }
        case 'r':
            /* A raw write: misuse over unsaved cells. */
            if (fh_set_state(k, cell, cn) != 0) {
                return -1;
            }
            puts_("ok");
            break;
        default:
            return fh_fail_key(k, "bad script op");
        }
        if (fh_emit(k, "out", o.buf, o.n) != 0) {
            return -1;
        }
    }
    return 0;
}

int flowhost_process_key(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        int rc = run(k, m->payload, m->payload_len);
        if (rc != 0) {
            fh_clear_current(k);
            return rc;
        }
    }
    return 0;
}
