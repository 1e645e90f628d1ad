//go:build ignore

/*
 * The join test guest (join_test.go runs it against the Go helpers).
 * Parameters: kind "interval" (left "orders", right "payments", lower_ns,
 * upper_ns, outputs "joined" and "unmatched", expired_fn: whether the
 * expired callback is set) or "enrich" (table "customers", events
 * "orders", outputs "enriched" and "no-customer"). Every callback writes
 * each field it is given, so that a field passed wrongly shows in the
 * payload; "#" starts the part that depends on batching (the inputs).
 * With fail_payload set, a callback given a record with that payload
 * fails (returns -1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "flowhost.h"

static fh_interval_join ij;
static fh_enrich_join ej;
static bool interval;
static char fail_payload[64];
static size_t fail_len;

static bool fails(const uint8_t *payload, size_t len) {
    return fail_len > 0 && len == fail_len && memcmp(payload, fail_payload, len) == 0;
}

static void put_str(fh_cbor_writer *out, const char *s) { fh_cbor_put_raw(out, s, strlen(s)); }

static void put_i64(fh_cbor_writer *out, int64_t v) {
    char b[32];
    int n = snprintf(b, sizeof b, "%" PRId64, v);
    fh_cbor_put_raw(out, b, (size_t)n);
}

/* put_rec writes TAG(id,stream,ts,payload) */
static void put_rec(fh_cbor_writer *out, const char *tag, const char *id, size_t id_len, const char *stream, size_t stream_len,
                    int64_t ts, const uint8_t *payload, size_t payload_len) {
    put_str(out, tag);
    put_str(out, "(");
    fh_cbor_put_raw(out, id, id_len);
    put_str(out, ",");
    fh_cbor_put_raw(out, stream, stream_len);
    put_str(out, ",");
    put_i64(out, ts);
    put_str(out, ",");
    fh_cbor_put_raw(out, payload, payload_len);
    put_str(out, ")");
}

static void put_jrec(fh_cbor_writer *out, const char *tag, const fh_join_record *r) {
    put_rec(out, tag, r->id, r->id_len, r->stream, r->stream_len, r->event_ts, r->payload, r->payload_len);
}

static int join(const fh_join_pair *p, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    if (fails(p->left.payload, p->left.payload_len) || fails(p->right.payload, p->right.payload_len)) {
        return -1;
    }
    fh_cbor_put_raw(out, p->key, p->key_len);
    put_jrec(out, " L", &p->left);
    put_jrec(out, " R", &p->right);
    put_str(out, "#");
    put_i64(out, p->left.input);
    put_str(out, ",");
    put_i64(out, p->right.input);
    return 0;
}

static int expired(const fh_join_record *r, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    if (fails(r->payload, r->payload_len)) {
        return -1;
    }
    put_jrec(out, "X", r);
    put_str(out, "#");
    put_i64(out, r->input);
    return 0;
}

static int enrich(const fh_message *ev, const fh_join_record *v, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    if (fails(ev->payload, ev->payload_len)) {
        return -1;
    }
    put_rec(out, "E", ev->id, ev->id_len, ev->stream, ev->stream_len, ev->event_ts, ev->payload, ev->payload_len);
    put_jrec(out, " V", v);
    put_str(out, "#");
    put_i64(out, ev->input);
    put_str(out, ",");
    put_i64(out, v->input);
    return 0;
}

int flowhost_init_params(fh_params *p) {
    const char *kind;
    size_t kind_len;
    if (fh_param_string(p, "kind", &kind, &kind_len) != 0) {
        return -1;
    }
    interval = strcmp(kind, "interval") == 0;
    fail_len = 0;
    if (fh_param_has(p, "fail_payload")) {
        const char *f;
        if (fh_param_string(p, "fail_payload", &f, &fail_len) != 0) {
            return -1;
        }
        if (fail_len > sizeof fail_payload) {
            return fh_params_fail(p, "parameter \"fail_payload\": too long");
        }
        memcpy(fail_payload, f, fail_len);
    }
    if (interval) {
        int64_t lower = 0, upper = 0;
        bool with_expired = false;
        if (fh_param_int(p, "lower_ns", &lower) != 0 || fh_param_int(p, "upper_ns", &upper) != 0 ||
            fh_param_bool(p, "expired_fn", &with_expired) != 0) {
            return -1;
        }
        fh_interval_funcs f = {.join = join, .expired = with_expired ? expired : NULL};
        fh_interval_join_free(&ij);
        if (fh_interval_join_init(&ij, "orders", "payments", lower, upper, &f, "joined", "unmatched") != 0) {
            return fh_params_fail(p, "setting up the interval join failed");
        }
        return 0;
    }
    fh_enrich_funcs f = {.enrich = enrich};
    fh_enrich_join_free(&ej);
    if (fh_enrich_join_init(&ej, "customers", "orders", &f, "enriched", "no-customer") != 0) {
        return fh_params_fail(p, "setting up the enrichment join failed");
    }
    return 0;
}

int flowhost_process_key(fh_key *k) {
    return interval ? fh_interval_join_process(&ij, k) : fh_enrich_join_process(&ej, k);
}
