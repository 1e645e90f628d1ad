/*
 * The C SDK's conformance guest: a computation that interprets each input
 * message as the script of sdk/conformance/SCRIPT.md, so that the
 * conformance suite can drive every corner of ABI v1 through it and
 * compare its responses with the other languages' guests. Where SCRIPT.md
 * leaves a choice open it does what the Go guest (sdk/conformance/goguest)
 * does, error texts included.
 *
 * Build it with sdk/c.BuildConformanceGuest, or by hand:
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -mbulk-memory -I sdk/c \
 *         -o cguest.wasm sdk/c/conformance/main.c sdk/c/flowhost.c sdk/c/cbor.c
 */
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

/* out is the stream every echo, timer, showstate, param and meta goes to. */
static const char out[] = "out";

/* params are the instance's parameters, kept from init for `param:`. */
static fh_params *params;

/* text is a growable byte buffer for the texts the script emits; it also
 * keeps them NUL-terminated for the SDK calls that take C strings. */
typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static void put(text *t, const void *s, size_t n) {
    if (t->cap - t->len < n + 1) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap - t->len < n + 1) {
            cap *= 2;
        }
        char *b = (char *)realloc(t->buf, cap);
        if (b == NULL) {
            fh_log(FH_LOG_ERROR, "conformance guest: out of memory");
            abort();
        }
        t->buf = b;
        t->cap = cap;
    }
    if (n > 0) {
        memcpy(t->buf + t->len, s, n);
    }
    t->len += n;
    t->buf[t->len] = '\0';
}

static void put_str(text *t, const char *s) { put(t, s, strlen(s)); }

static void put_i64(text *t, int64_t v) {
    char digits[21];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        digits[sizeof digits - 1 - n++] = '-';
    }
    put(t, digits + sizeof digits - n, n);
}

static void put_quoted(text *t, const char *s, size_t n) {
    size_t need = fh_quote(NULL, 0, s, n);
    char *q = (char *)malloc(need + 1);
    if (q == NULL) {
        abort();
    }
    fh_quote(q, need + 1, s, n);
    put(t, q, need);
    free(q);
}

static void reset(text *t) {
    t->len = 0;
    put(t, "", 0);
}

/* A command's pieces: spans of the message payload. */
typedef struct span {
    const char *s;
    size_t n;
} span;

static bool span_is(span a, const char *s) { return a.n == strlen(s) && memcmp(a.s, s, a.n) == 0; }

/* cstr copies a span into t as a C string for the SDK. */
static const char *cstr(text *t, span a) {
    reset(t);
    put(t, a.s, a.n);
    return t->buf;
}

static const struct {
    const char *verb;
    size_t arity; /* the last argument takes the rest, colons included */
} verbs[] = {
    {"emit", 2},  {"emitk", 3},    {"emite", 3},     {"emitall", 2}, {"emitnone", 2}, {"state", 1},
    {"append", 0}, {"delstate", 0}, {"showstate", 0}, {"timer", 1},   {"timerp", 3},   {"cancel", 1},
    {"param", 1}, {"meta", 0},     {"failkey", 1},   {"failbatch", 1},
};

/* Scratch texts, kept between calls. */
static text msg, scratch, scratch2;

/* fail_bad fails the key with `bad command "<cmd>": <why>`. */
static void fail_bad(fh_key *k, span cmd, const char *why) {
    reset(&msg);
    put_str(&msg, "bad command ");
    put_quoted(&msg, cmd.s, cmd.n);
    put_str(&msg, ": ");
    put_str(&msg, why);
    fh_fail_key(k, msg.buf);
}

/* number parses a decimal int64 the way Go's strconv.ParseInt(s, 10, 64)
 * does, failing the key with Go's message when it cannot. */
static bool number(fh_key *k, span cmd, span a, int64_t *v) {
    const char *why = "invalid syntax";
    size_t i = 0;
    bool neg = false;
    uint64_t u = 0;
    if (a.n > 0 && (a.s[0] == '+' || a.s[0] == '-')) {
        neg = a.s[0] == '-';
        i = 1;
    }
    if (i == a.n) {
        goto fail;
    }
    for (; i < a.n; i++) {
        char c = a.s[i];
        if (c < '0' || c > '9') {
            goto fail;
        }
        if (u >= UINT64_MAX / 10 + 1) {
            why = "value out of range";
            goto fail;
        }
        u *= 10;
        uint64_t next = u + (uint64_t)(c - '0');
        if (next < u) {
            why = "value out of range";
            goto fail;
        }
        u = next;
    }
    if ((!neg && u >= (uint64_t)1 << 63) || (neg && u > (uint64_t)1 << 63)) {
        why = "value out of range";
        goto fail;
    }
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
fail:
    reset(&scratch2);
    put_str(&scratch2, "strconv.ParseInt: parsing ");
    put_quoted(&scratch2, a.s, a.n);
    put_str(&scratch2, ": ");
    put_str(&scratch2, why);
    fail_bad(k, cmd, scratch2.buf);
    return false;
}

/* param_text renders a parameter the way `param:` reports it. */
static void param_text(text *t, const char *name) {
    const char *s;
    size_t n;
    int64_t i;
    bool b;
    switch (fh_param_type_of(params, name)) {
    case FH_PARAM_MISSING:
        put_str(t, "missing");
        break;
    case FH_PARAM_TEXT:
        fh_param_string(params, name, &s, &n);
        put(t, s, n);
        break;
    case FH_PARAM_INT:
        fh_param_int(params, name, &i);
        put_i64(t, i);
        break;
    case FH_PARAM_BOOL:
        fh_param_bool(params, name, &b);
        put_str(t, b ? "true" : "false");
        break;
    default:
        put_str(t, "?");
        break;
    }
}

/* run executes one command of message m on key k. It returns false only
 * for failbatch; every other failure fails the key and lets the script go
 * on (the key's first failure is the one reported). */
static bool run(fh_key *k, const fh_message *m, span cmd) {
    span verb = cmd, rest = {cmd.s + cmd.n, 0};
    const char *colon = (const char *)memchr(cmd.s, ':', cmd.n);
    bool has_args = colon != NULL;
    if (has_args) {
        verb.n = (size_t)(colon - cmd.s);
        rest.s = colon + 1;
        rest.n = cmd.n - verb.n - 1;
    }
    size_t arity = 0;
    bool known = false;
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0] && !known; i++) {
        if (span_is(verb, verbs[i].verb)) {
            known = true;
            arity = verbs[i].arity;
        }
    }
    if (!known) {
        reset(&msg);
        put_str(&msg, "unknown command ");
        put(&msg, verb.s, verb.n);
        fh_fail_key(k, msg.buf);
        return true;
    }
    span args[3];
    if (arity > 0) {
        size_t got = 0;
        if (has_args) {
            span left = rest;
            while (got < arity - 1) {
                const char *c = (const char *)memchr(left.s, ':', left.n);
                if (c == NULL) {
                    break;
                }
                args[got].s = left.s;
                args[got++].n = (size_t)(c - left.s);
                left.n -= (size_t)(c - left.s) + 1;
                left.s = c + 1;
            }
            args[got++] = left;
        }
        if (got != arity) {
            reset(&scratch);
            put(&scratch, verb.s, verb.n);
            put_str(&scratch, " takes ");
            put_i64(&scratch, (int64_t)arity);
            put_str(&scratch, " arguments");
            fail_bad(k, cmd, scratch.buf);
            return true;
        }
    }
    uint32_t own[1] = {m->input};
    fh_emit_opts parent = {.parents = own, .parent_count = 1};
    int64_t a, b;
    if (span_is(verb, "emit")) {
        fh_emit_with(k, cstr(&scratch, args[0]), args[1].s, args[1].n, &parent);
    } else if (span_is(verb, "emitk")) {
        fh_emit_opts o = parent;
        o.key = cstr(&scratch2, args[1]);
        fh_emit_with(k, cstr(&scratch, args[0]), args[2].s, args[2].n, &o);
    } else if (span_is(verb, "emite")) {
        if (number(k, cmd, args[1], &a)) {
            fh_emit_opts o = parent;
            o.has_event_ts = true;
            o.event_ts = a;
            fh_emit_with(k, cstr(&scratch, args[0]), args[2].s, args[2].n, &o);
        }
    } else if (span_is(verb, "emitall")) {
        size_t n = fh_input_count(k);
        uint32_t *every = (uint32_t *)malloc((n ? n : 1) * sizeof(uint32_t));
        if (every == NULL) {
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            every[i] = (uint32_t)i;
        }
        fh_emit_with(k, cstr(&scratch, args[0]), args[1].s, args[1].n, &(fh_emit_opts){.parents = every, .parent_count = n});
        free(every);
    } else if (span_is(verb, "emitnone")) {
        fh_emit_with(k, cstr(&scratch, args[0]), args[1].s, args[1].n, &(fh_emit_opts){.all_parents = true});
    } else if (span_is(verb, "state")) {
        fh_set_state(k, args[0].s, args[0].n);
    } else if (span_is(verb, "append")) {
        const uint8_t *old;
        size_t n;
        reset(&scratch);
        if (fh_state(k, &old, &n)) {
            put(&scratch, old, n);
        }
        put(&scratch, m->id, m->id_len);
        put_str(&scratch, ",");
        fh_set_state(k, scratch.buf, scratch.len);
    } else if (span_is(verb, "delstate")) {
        fh_delete_state(k);
    } else if (span_is(verb, "showstate")) {
        const uint8_t *s;
        size_t n;
        reset(&scratch);
        if (fh_state(k, &s, &n)) {
            put_str(&scratch, "state:");
            put(&scratch, s, n);
        } else {
            put_str(&scratch, "state:none");
        }
        fh_emit_with(k, out, scratch.buf, scratch.len, &parent);
    } else if (span_is(verb, "timer")) {
        if (number(k, cmd, args[0], &a)) {
            fh_set_timer(k, a);
        }
    } else if (span_is(verb, "timerp")) {
        if (number(k, cmd, args[0], &a) && number(k, cmd, args[1], &b)) {
            fh_set_timer_with(k, a, &(fh_timer_opts){.has_event_ts = true, .event_ts = b, .payload = args[2].s, .payload_len = args[2].n});
        }
    } else if (span_is(verb, "cancel")) {
        if (number(k, cmd, args[0], &a)) {
            fh_cancel_timer(k, a);
        }
    } else if (span_is(verb, "param")) {
        const char *name = cstr(&scratch2, args[0]);
        reset(&scratch);
        put_str(&scratch, "param:");
        put(&scratch, args[0].s, args[0].n);
        put_str(&scratch, "=");
        param_text(&scratch, name);
        fh_emit_with(k, out, scratch.buf, scratch.len, &parent);
    } else if (span_is(verb, "meta")) {
        const fh_batch *bt = fh_batch_of(k);
        size_t key_len;
        const char *key = fh_key_text(k, &key_len);
        reset(&scratch);
        put_str(&scratch, "meta:key=");
        put(&scratch, key, key_len);
        put_str(&scratch, ",stream=");
        put(&scratch, m->stream, m->stream_len);
        put_str(&scratch, ",id=");
        put(&scratch, m->id, m->id_len);
        put_str(&scratch, ",event=");
        put_i64(&scratch, m->event_ts);
        put_str(&scratch, ",system=");
        put_i64(&scratch, m->system_ts);
        put_str(&scratch, ",alignment=");
        put_i64(&scratch, m->alignment_ts);
        put_str(&scratch, ",wm=");
        put_i64(&scratch, bt->event_watermark);
        put_str(&scratch, "/");
        put_i64(&scratch, bt->system_watermark);
        put_str(&scratch, ",partition=");
        /* Go prints the uint64 partition and epoch in decimal. */
        char digits[21];
        size_t n = 0;
        uint64_t u = bt->partition;
        do {
            digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        put(&scratch, digits + sizeof digits - n, n);
        put_str(&scratch, ",epoch=");
        n = 0;
        u = bt->epoch;
        do {
            digits[sizeof digits - 1 - n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        put(&scratch, digits + sizeof digits - n, n);
        put_str(&scratch, ",computation=");
        put(&scratch, bt->computation, bt->computation_len);
        put_str(&scratch, ",kind=");
        put_str(&scratch, bt->kind);
        fh_emit_with(k, out, scratch.buf, scratch.len, &parent);
    } else if (span_is(verb, "failkey")) {
        fh_fail_key(k, cstr(&scratch, args[0]));
    } else if (span_is(verb, "failbatch")) {
        fh_fail_batch(k, cstr(&scratch, args[0]));
        return false;
    }
    return true;
}

int flowhost_init_params(fh_params *p) {
    params = p;
    const char *s;
    if (fh_param_type_of(p, "fail_init") == FH_PARAM_TEXT && fh_param_string(p, "fail_init", &s, NULL) == 0) {
        return fh_params_fail(p, s);
    }
    return 0;
}

int flowhost_process_key(fh_key *k) {
    const fh_timer *t;
    while ((t = fh_next_timer(k)) != NULL) {
        reset(&scratch);
        put_str(&scratch, "timer:");
        put_i64(&scratch, t->trigger_ts);
        put_str(&scratch, ":");
        put(&scratch, t->payload, t->payload_len);
        uint32_t own[1] = {t->input};
        fh_emit_with(k, out, scratch.buf, scratch.len, &(fh_emit_opts){.parents = own, .parent_count = 1});
    }
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        uint32_t own[1] = {m->input};
        if (m->payload_len == 0 || m->payload[0] != '!') {
            fh_emit_with(k, out, m->payload, m->payload_len, &(fh_emit_opts){.parents = own, .parent_count = 1});
            continue;
        }
        /* Commands are separated by ';' with no escaping; like Go's
         * strings.Split, n separators make n+1 commands, empty ones too. */
        span script = {(const char *)m->payload + 1, m->payload_len - 1};
        for (;;) {
            const char *semi = (const char *)memchr(script.s, ';', script.n);
            span cmd = {script.s, semi ? (size_t)(semi - script.s) : script.n};
            if (!run(k, m, cmd)) {
                return -1;
            }
            if (semi == NULL) {
                break;
            }
            script.n -= cmd.n + 1;
            script.s = semi + 1;
        }
    }
    return 0;
}
