/*
 * The test guest of the C SDK's Go tests. It dispatches on the batch's
 * computation name: each golden vector of abi/testdata/vectors has its own
 * computation name and a script here that implements the vector's
 * description (the C twins of the scripts in sdk/go/golden_test.go); every
 * other name runs the "fuzz" script, which c_test.go also implements with
 * the Go SDK so that the two responses can be compared byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

#define SECOND 1000000000LL

static bool payload_is(const fh_message *m, const char *text) {
    size_t n = strlen(text);
    return m->payload_len == n && memcmp(m->payload, text, n) == 0;
}

/* emit_text emits a NUL-terminated text. */
static int emit_text(fh_key *k, const char *stream, const char *text, const fh_emit_opts *opts) {
    return fh_emit_with(k, stream, text, strlen(text), opts);
}

/* go_atoi parses like Go's strconv.Atoi; on failure it writes Go's error
 * text to err and returns false. */
static bool go_atoi(const uint8_t *s, size_t n, long long *v, char *err, size_t cap) {
    size_t i = 0;
    bool neg = false;
    unsigned long long x = 0;
    const char *why = "invalid syntax";
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n) {
        goto fail;
    }
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            goto fail;
        }
        x = x * 10 + (unsigned)(s[i] - '0');
        if (x > (1ULL << 63)) {
            why = "value out of range";
            goto fail;
        }
    }
    if (!neg && x == (1ULL << 63)) {
        why = "value out of range";
        goto fail;
    }
    *v = neg ? (long long)(0 - x) : (long long)x;
    return true;
fail : {
    char quoted[256];
    fh_quote(quoted, sizeof quoted, s, n);
    snprintf(err, cap, "strconv.Atoi: parsing %s: %s", quoted, why);
    return false;
}
}

/* counter keeps a decimal count of messages in the key's state: "clear"
 * empties the state, "reset" emits the final count and deletes it, "peek"
 * changes nothing. */
static int counter(fh_key *k) {
    const uint8_t *s;
    size_t n;
    long long count = 0;
    char err[300];
    if (fh_state(k, &s, &n) && !go_atoi(s, n, &count, err, sizeof err)) {
        count = 0;
    }
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        char text[32];
        if (payload_is(m, "clear")) {
            fh_set_state(k, "", 0);
        } else if (payload_is(m, "reset")) {
            snprintf(text, sizeof text, "%lld", count);
            emit_text(k, "final", text, NULL);
            fh_delete_state(k);
        } else if (!payload_is(m, "peek")) {
            count++;
            snprintf(text, sizeof text, "%lld", count);
            fh_set_state(k, text, strlen(text));
        }
    }
    return 0;
}

static int noop(fh_key *k) { return fh_emit(k, "out", NULL, 0); }

static int upper(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        char buf[256];
        size_t n = m->payload_len < sizeof buf ? m->payload_len : sizeof buf;
        for (size_t i = 0; i < n; i++) {
            char c = (char)m->payload[i];
            buf[i] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
        }
        fh_emit(k, "out", buf, n);
    }
    return 0;
}

static int click_counter(fh_key *k) {
    size_t n = 0;
    while (fh_next_message(k) != NULL) {
        n++;
    }
    if (n > 1) {
        char text[32];
        snprintf(text, sizeof text, "%zu", n);
        emit_text(k, "counts", text, NULL);
    }
    return 0;
}

static int echo(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        fh_emit_with(k, "echo", m->payload, m->payload_len, &(fh_emit_opts){.key = fh_key_text(k, NULL)});
    }
    return 0;
}

static int sessionizer(fh_key *k) {
    int64_t now = fh_batch_of(k)->event_watermark;
    char text[256];
    const fh_timer *t;
    while ((t = fh_next_timer(k)) != NULL) {
        int n = snprintf(text, sizeof text, "timer:%.*s", (int)t->payload_len, (const char *)t->payload);
        fh_emit(k, "fired", text, (size_t)n);
    }
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        int n = snprintf(text, sizeof text, "message:%.*s", (int)m->payload_len, (const char *)m->payload);
        fh_emit(k, "fired", text, (size_t)n);
    }
    fh_set_timer(k, now + 30 * SECOND);
    fh_set_timer(k, now + 60 * SECOND);
    fh_set_timer_with(k, now + 120 * SECOND,
                      &(fh_timer_opts){.has_event_ts = true, .event_ts = now + 100 * SECOND, .payload = "late", .payload_len = 4});
    fh_cancel_timer(k, now + 30 * SECOND); /* also drops the first set */
    return 0;
}

static int join(fh_key *k) {
    uint32_t orders[16], payments[16];
    size_t n_orders = 0, n_payments = 0;
    char joined[256];
    size_t joined_len = 0;
    const fh_message *payment = NULL;
    int64_t last = 0;
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        if (strcmp(m->stream, "orders") == 0 && n_orders < 16 && joined_len + m->payload_len + 1 <= sizeof joined) {
            if (n_orders > 0) {
                joined[joined_len++] = '+';
            }
            memcpy(joined + joined_len, m->payload, m->payload_len);
            joined_len += m->payload_len;
            orders[n_orders++] = m->input;
        } else if (strcmp(m->stream, "payments") == 0 && n_payments < 16) {
            payments[n_payments++] = m->input;
            payment = m;
        }
        last = m->alignment_ts;
    }
    if (n_orders == 0 || payment == NULL) {
        return fh_fail_key(k, "join needs an order and a payment");
    }
    fh_emit_with(k, "joined", joined, joined_len, &(fh_emit_opts){.parents = orders, .parent_count = n_orders});
    fh_emit_with(k, "joined", payment->payload, payment->payload_len,
                 &(fh_emit_opts){.key = "customer-1", .has_event_ts = true, .event_ts = -1000, .parents = payments,
                                 .parent_count = n_payments});
    char text[32];
    snprintf(text, sizeof text, "%zu inputs", fh_input_count(k));
    return emit_text(k, "audit", text, &(fh_emit_opts){.has_event_ts = true, .event_ts = last + SECOND});
}

static int length(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        char text[32];
        snprintf(text, sizeof text, "%zu", m->payload_len);
        emit_text(k, "lengths", text, NULL);
    }
    return 0;
}

static int doubler(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        long long n;
        char err[300];
        if (!go_atoi(m->payload, m->payload_len, &n, err, sizeof err)) {
            fh_fail_key(k, err);
            continue;
        }
        char text[32];
        snprintf(text, sizeof text, "%lld", 2 * n);
        emit_text(k, "doubled", text, NULL);
    }
    return 0;
}

static int lookup(fh_key *k) {
    emit_text(k, "out", "dropped with the batch", NULL);
    return fh_fail_batch(k, "lookup table not loaded");
}

/* fuzz exercises every part of the API from a payload's first byte; c_test.go
 * has its Go twin. */
static int fuzz(fh_key *k) {
    bool transform = !fh_batch_of(k)->is_map;
    char text[64];
    const fh_timer *t;
    while ((t = fh_next_timer(k)) != NULL) {
        int n = snprintf(text, sizeof text, "t:%lld:", (long long)t->trigger_ts);
        char *buf = (char *)malloc((size_t)n + t->payload_len);
        memcpy(buf, text, (size_t)n);
        memcpy(buf + n, t->payload, t->payload_len);
        fh_emit(k, "out", buf, (size_t)n + t->payload_len);
        free(buf);
    }
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        /* Texts that the SDK takes as C strings end at a NUL; the Go twin
         * cuts them there too. */
        fh_emit_with(k, "out", m->payload, m->payload_len, &(fh_emit_opts){.key = m->stream});
        char op = m->payload_len > 0 ? (char)m->payload[0] : 0;
        if (op == 'E') {
            uint32_t parents[2] = {m->input, 0};
            emit_text(k, "out", "e", &(fh_emit_opts){.has_event_ts = true, .event_ts = m->event_ts, .parents = parents, .parent_count = 2});
        }
        if (op == 'A') {
            emit_text(k, "out", "a", &(fh_emit_opts){.all_parents = true});
        }
        if (transform) {
            const uint8_t *old;
            size_t old_len = 0;
            fh_state(k, &old, &old_len);
            char *state = (char *)malloc(old_len + m->id_len + 1);
            if (old_len > 0) {
                memcpy(state, old, old_len);
            }
            memcpy(state + old_len, m->id, m->id_len);
            state[old_len + m->id_len] = ',';
            fh_set_state(k, state, old_len + m->id_len + 1);
            free(state);
            if (op == 'T') {
                fh_set_timer_with(k, m->event_ts,
                                  &(fh_timer_opts){.has_event_ts = m->payload_len > 1, .event_ts = m->alignment_ts,
                                                   .payload = m->id, .payload_len = m->id_len});
            }
            if (op == 'C') {
                fh_cancel_timer(k, m->event_ts);
            }
            if (op == 'D') {
                fh_delete_state(k);
            }
        }
        if (op == 'F') {
            fh_fail_key(k, m->id);
        }
        if (op == 'B') {
            return fh_fail_batch(k, m->id);
        }
    }
    snprintf(text, sizeof text, "n=%zu", fh_input_count(k));
    return emit_text(k, "out", text, NULL);
}

/* kept are the parameters of the last init, for the "params" probe. */
static fh_params *kept;

/* probe answers each message "getter:name" with the getter's result,
 * "ok:<value>" or "err:<code>:<message>", for api_test.go to compare with
 * the Go SDK's Params. */
static int probe(fh_key *k) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        char getter[16] = "", name[256] = "", out[512];
        const char *colon = memchr(m->payload, ':', m->payload_len);
        if (colon == NULL || colon - (const char *)m->payload >= (long)sizeof getter ||
            m->payload_len - (size_t)(colon - (const char *)m->payload) > sizeof name) {
            return fh_fail_key(k, "bad probe");
        }
        size_t gl = (size_t)(colon - (const char *)m->payload);
        memcpy(getter, m->payload, gl);
        memcpy(name, colon + 1, m->payload_len - gl - 1);
        int rc = 0;
        const char *s;
        size_t n;
        int64_t i;
        double f;
        bool b;
        if (strcmp(getter, "string") == 0 && (rc = fh_param_string(kept, name, &s, &n)) == 0) {
            n = n < sizeof out - 4 ? n : sizeof out - 4;
            memcpy(out, "ok:", 3);
            memcpy(out + 3, s, n);
            fh_emit(k, "out", out, n + 3); /* the text may hold NULs */
            continue;
        } else if (strcmp(getter, "int") == 0 && (rc = fh_param_int(kept, name, &i)) == 0) {
            snprintf(out, sizeof out, "ok:%lld", (long long)i);
        } else if (strcmp(getter, "float") == 0 && (rc = fh_param_float(kept, name, &f)) == 0) {
            uint64_t bits;
            memcpy(&bits, &f, sizeof bits);
            snprintf(out, sizeof out, "ok:%016llx", (unsigned long long)bits);
        } else if (strcmp(getter, "bool") == 0 && (rc = fh_param_bool(kept, name, &b)) == 0) {
            snprintf(out, sizeof out, "ok:%s", b ? "true" : "false");
        } else if (strcmp(getter, "duration") == 0 && (rc = fh_param_duration(kept, name, &i)) == 0) {
            snprintf(out, sizeof out, "ok:%lld", (long long)i);
        } else if (strcmp(getter, "has") == 0) {
            snprintf(out, sizeof out, "ok:%s", fh_param_has(kept, name) ? "true" : "false");
        }
        if (rc != 0) {
            snprintf(out, sizeof out, "err:%d:%s", rc, fh_params_error(kept));
        }
        emit_text(k, "out", out, NULL);
    }
    return 0;
}

/* misuse breaks one rule of the API per message, named by its payload;
 * each must fail the batch with status -2 and a log line. */
static fh_key *stale;
static int misuse(fh_key *k) {
    const fh_message *m = fh_next_message(k);
    static const uint32_t beyond[1] = {99};
    if (m == NULL) {
        return 0;
    }
    if (payload_is(m, "keep")) {
        stale = k;
    } else if (payload_is(m, "stale")) {
        fh_emit(stale, "out", "x", 1);
    } else if (payload_is(m, "parent")) {
        fh_emit_with(k, "out", "x", 1, &(fh_emit_opts){.parents = beyond, .parent_count = 1});
    } else if (payload_is(m, "no parents")) {
        fh_emit_with(k, "out", "x", 1, &(fh_emit_opts){.parents = beyond, .parent_count = 0});
    } else if (payload_is(m, "both parents")) {
        fh_emit_with(k, "out", "x", 1, &(fh_emit_opts){.parents = beyond, .parent_count = 1, .all_parents = true});
    } else if (payload_is(m, "null stream")) {
        fh_emit(k, NULL, "x", 1);
    } else if (payload_is(m, "null payload")) {
        fh_emit(k, "out", NULL, 1);
    } else if (payload_is(m, "bad key")) {
        fh_emit_with(k, "out", "x", 1, &(fh_emit_opts){.key = "\xff"});
    } else if (payload_is(m, "timer in map")) {
        fh_set_timer(k, 1);
    } else if (payload_is(m, "log")) {
        fh_log(FH_LOG_DEBUG, "debug line");
        fh_log_n(FH_LOG_WARN, "warn line and more", 9);
        fh_logf(FH_LOG_ERROR, "error %d of %s", 7, fh_key_text(k, NULL));
        fh_logf(3, "%0600d", 1);
    } else if (payload_is(m, "return")) {
        return 42;
    } else if (payload_is(m, "fail then return")) {
        fh_fail_key(k, "first");
        fh_fail_key(k, "second");
        if (strcmp(fh_key_error(k), "first") != 0) {
            return fh_fail_batch(k, "fh_key_error does not return the first failure");
        }
        return 1;
    } else if (payload_is(m, "invalid utf8 failure")) {
        return fh_fail_key(k, "bad \xff byte");
    } else if (payload_is(m, "state roundtrip")) {
        const uint8_t *s;
        size_t n;
        fh_set_state(k, "abcdef", 6);
        fh_state(k, &s, &n);
        fh_set_state(k, s + 2, n - 2); /* from its own buffer */
        fh_state(k, &s, &n);
        fh_emit(k, "out", s, n);
        fh_delete_state(k);
        if (fh_state(k, NULL, NULL)) {
            return fh_fail_batch(k, "state after delete");
        }
    }
    return 0;
}

static const struct {
    const char *computation;
    int (*process)(fh_key *k);
} scripts[] = {
    {"params", probe},      {"misuse", misuse},
    {"noop", noop},         {"upper", upper},     {"click-counter", click_counter}, {"echo", echo},
    {"counter", counter},   {"sessionizer", sessionizer}, {"join", join},       {"length", length},
    {"doubler", doubler},   {"lookup", lookup},
};

int flowhost_process_key(fh_key *k) {
    const char *name = fh_batch_of(k)->computation;
    for (size_t i = 0; i < sizeof scripts / sizeof scripts[0]; i++) {
        if (strcmp(scripts[i].computation, name) == 0) {
            return scripts[i].process(k);
        }
    }
    return fuzz(k);
}

/* require_parameters reads every parameter of the init_parameters vector
 * and fails on the first missing or mistyped one. */
static int require_parameters(fh_params *p) {
    int64_t window, threshold, offset;
    double ratio;
    bool enabled;
    const uint8_t *raw;
    size_t raw_len;
    if (fh_param_duration(p, "window", &window) || fh_param_int(p, "threshold", &threshold) ||
        fh_param_int(p, "offset", &offset) || fh_param_float(p, "ratio", &ratio) ||
        fh_param_bool(p, "enabled", &enabled)) {
        return -1;
    }
    /* tags: a list of text. */
    char tags[64] = "";
    size_t count;
    fh_cbor_reader r;
    if (fh_param_raw(p, "tags", &raw, &raw_len)) {
        return -1;
    }
    fh_cbor_reader_init(&r, raw, raw_len);
    if (fh_cbor_read_array(&r, &count) != 0) {
        return fh_params_fail(p, "parameter \"tags\": expected list of strings");
    }
    for (size_t i = 0; i < count; i++) {
        const char *s;
        size_t n;
        if (fh_cbor_read_text(&r, &s, &n) != 0 || strlen(tags) + n + 2 > sizeof tags) {
            return fh_params_fail(p, "parameter \"tags\": expected list of strings");
        }
        if (i > 0) {
            strcat(tags, ",");
        }
        strncat(tags, s, n);
    }
    /* sink: a map with name and retries. */
    if (fh_param_raw(p, "sink", &raw, &raw_len)) {
        return -1;
    }
    fh_cbor_reader_init(&r, raw, raw_len);
    if (fh_cbor_read_map(&r, &count) != 0) {
        return fh_params_fail(p, "parameter \"sink\": expected map");
    }
    bool name_ok = false;
    int64_t retries = -1;
    for (size_t i = 0; i < count; i++) {
        const char *key, *s;
        size_t key_len, n;
        if (fh_cbor_read_text(&r, &key, &key_len) != 0) {
            return fh_params_fail(p, "parameter \"sink\": bad key");
        }
        if (key_len == 4 && memcmp(key, "name", 4) == 0 && fh_cbor_read_text(&r, &s, &n) == 0) {
            name_ok = n == 6 && memcmp(s, "alerts", 6) == 0;
        } else if (key_len == 7 && memcmp(key, "retries", 7) == 0 && fh_cbor_read_int(&r, &retries) == 0) {
        } else if (fh_cbor_skip(&r, 1) != 0) {
            return fh_params_fail(p, "parameter \"sink\": bad value");
        }
    }
    if (fh_param_type_of(p, "fallback") != FH_PARAM_NULL) {
        return fh_params_fail(p, "fallback: want a null parameter");
    }
    if (window != 5 * 60 * SECOND || threshold != 10 || offset != -3 || ratio != 0.25 || !enabled ||
        strcmp(tags, "a,b") != 0 || !name_ok || retries != 3) {
        return fh_params_fail(p, "parameters read back wrong");
    }
    return 0;
}

int flowhost_init_params(fh_params *p) {
    kept = p;
    if (strcmp(fh_params_computation(p), "windowed-sum") == 0) {
        return require_parameters(p);
    }
    return 0;
}
