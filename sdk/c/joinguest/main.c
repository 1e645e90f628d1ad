//go:build ignore

/*
 * The C SDK's join conformance guest (sdk/conformance, "The join guest";
 * the behaviour is the same in every SDK): the parameter join chooses the
 * interval join (streams "left" and "right", bounds lower_ns and
 * upper_ns, matches on "joined" as <left payload>|<right payload>,
 * never-matched records on "expired" unchanged) or the enrichment join
 * (streams "table" and "events", enriched events on "enriched" as
 * <event payload>|<table payload>, events without a value on "unmatched"
 * unchanged). Every key of a batch goes to the helper; nothing else is
 * done.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "flowhost.h"

static fh_interval_join ij;
static fh_enrich_join ej;
static bool interval;

/* pipe writes a, one '|' byte, b. */
static void pipe(fh_cbor_writer *out, const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
    fh_cbor_put_raw(out, a, a_len);
    fh_cbor_put_raw(out, "|", 1);
    fh_cbor_put_raw(out, b, b_len);
}

static int join(const fh_join_pair *p, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    pipe(out, p->left.payload, p->left.payload_len, p->right.payload, p->right.payload_len);
    return 0;
}

static int enrich(const fh_message *ev, const fh_join_record *v, fh_cbor_writer *out, void *ctx) {
    (void)ctx;
    pipe(out, ev->payload, ev->payload_len, v->payload, v->payload_len);
    return 0;
}

int flowhost_init_params(fh_params *p) {
    const char *kind;
    size_t kind_len;
    if (fh_param_string(p, "join", &kind, &kind_len) != 0) {
        return -1;
    }
    if (strcmp(kind, "interval") == 0) {
        int64_t lower = 0, upper = 0;
        if (fh_param_int(p, "lower_ns", &lower) != 0 || fh_param_int(p, "upper_ns", &upper) != 0) {
            return -1;
        }
        if (lower == INT64_MIN) {
            return fh_params_fail(p, "parameter \"lower_ns\": must be above the smallest int64");
        }
        if (lower > upper) {
            return fh_params_fail(p, "parameter \"lower_ns\": must not exceed upper_ns");
        }
        fh_interval_funcs f = {.join = join};
        fh_interval_join_free(&ij); /* an instance is initialised once; harmless otherwise */
        if (fh_interval_join_init(&ij, "left", "right", lower, upper, &f, "joined", "expired") != 0) {
            return fh_params_fail(p, "setting up the interval join failed");
        }
        interval = true;
        return 0;
    }
    if (strcmp(kind, "enrich") == 0) {
        fh_enrich_funcs f = {.enrich = enrich};
        fh_enrich_join_free(&ej);
        if (fh_enrich_join_init(&ej, "table", "events", &f, "enriched", "unmatched") != 0) {
            return fh_params_fail(p, "setting up the enrichment join failed");
        }
        interval = false;
        return 0;
    }
    char msg[160];
    char quoted[96];
    fh_quote(quoted, sizeof quoted, kind, kind_len);
    snprintf(msg, sizeof msg, "parameter \"join\": must be interval or enrich, got %s", quoted);
    return fh_params_fail(p, msg);
}

int flowhost_process_key(fh_key *k) {
    /* a bad state or another stream fails the key with the helper's text */
    return interval ? fh_interval_join_process(&ij, k) : fh_enrich_join_process(&ej, k);
}
