//go:build ignore

/*
 * The C SDK's window conformance guest (sdk/conformance, windows part;
 * the behaviour is the same in every SDK): windows chosen by the
 * parameters kind, size_ns, advance_ns, gap_ns and lateness_ns, counting
 * records, results on "windows" as {"start":S,"end":E,"count":N}, late
 * records on "late".
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "flowhost.h"

static fh_windows windows;

/* The accumulator is the count as a uvarint (Go's binary.AppendUvarint);
 * empty is 0. It is read like Go's binary.Uvarint, which gives 0 for bytes
 * that are not a uvarint, so that a state written by any SDK counts the
 * same. */
static uint64_t count_of(const uint8_t *b, size_t len) {
    uint64_t v = 0;
    for (size_t i = 0; i < len && i < 10; i++) {
        if (b[i] < 0x80) {
            return i == 9 && b[i] > 1 ? 0 : v | (uint64_t)b[i] << (7 * i);
        }
        v |= (uint64_t)(b[i] & 0x7f) << (7 * i);
    }
    return 0;
}

static void put_count(fh_cbor_writer *acc, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)v | 0x80;
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    acc->len = 0;
    fh_cbor_put_raw(acc, b, n);
}

static int add(fh_cbor_writer *acc, const fh_message *m, void *ctx) {
    (void)m, (void)ctx;
    put_count(acc, count_of(acc->buf, acc->len) + 1);
    return 0;
}

static int merge(fh_cbor_writer *a, const uint8_t *b, size_t b_len, void *ctx) {
    (void)ctx;
    put_count(a, count_of(a->buf, a->len) + count_of(b, b_len));
    return 0;
}

static int result(const fh_window *w, const uint8_t *acc, size_t acc_len, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    char text[96];
    int n = snprintf(text, sizeof text, "{\"start\":%" PRId64 ",\"end\":%" PRId64 ",\"count\":%" PRIu64 "}", w->start, w->end,
                     count_of(acc, acc_len));
    fh_cbor_put_raw(out, text, (size_t)n);
    return 0;
}

static const fh_aggregator counter = {.add = add, .merge = merge, .result = result};

/* positive reads a required positive integer parameter. */
static int positive(fh_params *p, const char *name, int64_t *v) {
    if (fh_param_int(p, name, v) != 0) {
        return -1;
    }
    if (*v <= 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "parameter \"%s\": must be positive, got %" PRId64, name, *v);
        return fh_params_fail(p, msg);
    }
    return 0;
}

int flowhost_init_params(fh_params *p) {
    const char *kind;
    size_t kind_len;
    if (fh_param_string(p, "kind", &kind, &kind_len) != 0) {
        return -1;
    }
    int64_t size = 0, advance = 0, gap = 0, lateness = 0;
    fh_window_spec spec;
    if (strcmp(kind, "tumbling") == 0) {
        if (positive(p, "size_ns", &size) != 0) {
            return -1;
        }
        spec = fh_tumbling(size);
    } else if (strcmp(kind, "hopping") == 0) {
        if (positive(p, "size_ns", &size) != 0 || positive(p, "advance_ns", &advance) != 0) {
            return -1;
        }
        if (advance > size) {
            return fh_params_fail(p, "parameter \"advance_ns\": must not exceed size_ns");
        }
        spec = fh_hopping(size, advance);
    } else if (strcmp(kind, "session") == 0) {
        if (positive(p, "gap_ns", &gap) != 0) {
            return -1;
        }
        spec = fh_session(gap);
    } else {
        char msg[160];
        char quoted[96];
        fh_quote(quoted, sizeof quoted, kind, kind_len);
        snprintf(msg, sizeof msg, "parameter \"kind\": must be tumbling, hopping or session, got %s", quoted);
        return fh_params_fail(p, msg);
    }
    if (fh_param_has(p, "lateness_ns")) {
        if (fh_param_int(p, "lateness_ns", &lateness) != 0) {
            return -1;
        }
        if (lateness < 0) {
            return fh_params_fail(p, "parameter \"lateness_ns\": must not be negative");
        }
    }
    fh_windows_free(&windows); /* an instance is initialised once; harmless otherwise */
    if (fh_windows_init(&windows, spec, &counter, "windows", "late") != 0 || fh_windows_set_lateness(&windows, lateness) != 0) {
        return fh_params_fail(p, "setting up the windows failed");
    }
    return 0;
}

int flowhost_process_key(fh_key *k) {
    return fh_windows_process(&windows, k); /* a bad state fails the key with its own text */
}
