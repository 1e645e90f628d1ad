//go:build ignore

/*
 * A window test guest whose aggregator keeps every byte it is given, so
 * that the order of add and merge shows in its results: init "<", add
 * appends the payload and ",", merge appends "|" and b, result is
 * "KEY [S,E) ACC". Parameters as the window guest's (kind, size_ns,
 * advance_ns, gap_ns, lateness_ns), without its checks: window_test.go
 * passes only good ones.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "flowhost.h"

static fh_windows windows;

static int init(fh_cbor_writer *acc, void *ctx) {
    (void)ctx;
    fh_cbor_put_raw(acc, "<", 1);
    return 0;
}

static int add(fh_cbor_writer *acc, const fh_message *m, void *ctx) {
    (void)ctx;
    fh_cbor_put_raw(acc, m->payload, m->payload_len);
    fh_cbor_put_raw(acc, ",", 1);
    return 0;
}

static int merge(fh_cbor_writer *a, const uint8_t *b, size_t b_len, void *ctx) {
    (void)ctx;
    fh_cbor_put_raw(a, "|", 1);
    fh_cbor_put_raw(a, b, b_len);
    return 0;
}

static int result(const fh_window *w, const uint8_t *acc, size_t acc_len, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    char text[64];
    fh_cbor_put_raw(out, w->key, w->key_len);
    int n = snprintf(text, sizeof text, " [%" PRId64 ",%" PRId64 ") ", w->start, w->end);
    fh_cbor_put_raw(out, text, (size_t)n);
    fh_cbor_put_raw(out, acc, acc_len);
    return 0;
}

static const fh_aggregator concat = {.init = init, .add = add, .merge = merge, .result = result};

static int64_t param(fh_params *p, const char *name) {
    int64_t v = 0;
    if (fh_param_has(p, name)) {
        fh_param_int(p, name, &v);
    }
    return v;
}

int flowhost_init_params(fh_params *p) {
    const char *kind;
    if (fh_param_string(p, "kind", &kind, NULL) != 0) {
        return -1;
    }
    fh_window_spec spec = strcmp(kind, "tumbling") == 0  ? fh_tumbling(param(p, "size_ns"))
                          : strcmp(kind, "hopping") == 0 ? fh_hopping(param(p, "size_ns"), param(p, "advance_ns"))
                                                         : fh_session(param(p, "gap_ns"));
    if (fh_windows_init(&windows, spec, &concat, "windows", "late") != 0 ||
        fh_windows_set_lateness(&windows, param(p, "lateness_ns")) != 0) {
        return fh_params_fail(p, "bad window parameters");
    }
    return 0;
}

int flowhost_process_key(fh_key *k) { return fh_windows_process(&windows, k); }
