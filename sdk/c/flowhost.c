//go:build ignore

// (The Go package sdk/c embeds this file; the constraint above keeps the go
// tool from taking it for cgo source of that package.)

/*
 * flowhost.c - the flowhost C guest SDK: the ABI v1 exports, strict
 * envelope decoding, canonical response encoding and the computation API
 * of flowhost.h.
 *
 * One instance runs one call at a time (the host never calls exports
 * concurrently), so the SDK keeps its state in one static struct and
 * takes no locks. Buffers are kept between batches and reused; a buffer
 * that a large batch grew is released when a much smaller one follows.
 */
#include "flowhost.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABI_VERSION 1

/* Buffers larger than this are released when a batch uses less than a
 * quarter of them, so that one large batch does not pin its memory. */
#define SHRINK_ABOVE ((size_t)1 << 20)

/* Room left in front of a response for its head (map, "keys", the count
 * of the keys array), written once the count is known. */
#define RESPONSE_PREFIX 16

static const char no_message[] = "failed (the error has no message)";

/* ------------------------------------------------------------------ */
/* Logging                                                             */
/* ------------------------------------------------------------------ */

#if defined(__wasm__)
__attribute__((import_module("flowhost"), import_name("log"))) extern void fh__host_log(int32_t level, const char *msg,
                                                                                         int32_t len);
#else
/* Outside WebAssembly (native test harnesses) log lines go to stderr. */
static void fh__host_log(int32_t level, const char *msg, int32_t len) {
    fprintf(stderr, "flowhost log %d: %.*s\n", (int)level, (int)len, msg);
}
#endif

void fh_log_n(int level, const char *msg, size_t len) {
    if (msg == NULL) {
        msg = "";
        len = 0;
    }
    if (len > INT32_MAX) {
        len = INT32_MAX;
    }
    fh__host_log(level, msg, (int32_t)len);
}

void fh_log(int level, const char *msg) { fh_log_n(level, msg, msg ? strlen(msg) : 0); }

void fh_logf(int level, const char *format, ...) {
    char small[256];
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(small, sizeof small, format, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n < sizeof small) {
        fh_log_n(level, small, (size_t)n);
        return;
    }
    char *big = (char *)malloc((size_t)n + 1);
    if (big == NULL) {
        fh_log_n(level, small, sizeof small - 1);
        return;
    }
    va_start(ap, format);
    vsnprintf(big, (size_t)n + 1, format, ap);
    va_end(ap);
    fh_log_n(level, big, (size_t)n);
    free(big);
}

/* ------------------------------------------------------------------ */
/* Text building on a writer used as a byte buffer                     */
/* ------------------------------------------------------------------ */

static void tb_bytes(fh_cbor_writer *w, const void *s, size_t n) { fh_cbor_put_raw(w, s, n); }

static void tb_str(fh_cbor_writer *w, const char *s) { fh_cbor_put_raw(w, s, strlen(s)); }

static void tb_byte(fh_cbor_writer *w, char c) { fh_cbor_put_raw(w, &c, 1); }

static void tb_u64(fh_cbor_writer *w, uint64_t v) {
    char digits[20];
    size_t n = 0;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    tb_bytes(w, digits + sizeof digits - n, n);
}

static void tb_i64(fh_cbor_writer *w, int64_t v) {
    if (v < 0) {
        tb_byte(w, '-');
        tb_u64(w, (uint64_t)0 - (uint64_t)v);
        return;
    }
    tb_u64(w, (uint64_t)v);
}

/* tb_cstr NUL-terminates the buffer without counting the NUL, and returns
 * the text (a static empty text when memory ran out). */
static const char *tb_cstr(fh_cbor_writer *w) {
    tb_byte(w, '\0');
    if (w->failed || w->buf == NULL) {
        return "";
    }
    w->len--;
    return (const char *)w->buf;
}

/* tb_sanitized appends text with every invalid UTF-8 byte replaced by
 * U+FFFD, so that an error message never makes the response invalid. */
static void tb_sanitized(fh_cbor_writer *w, const char *s, size_t n) {
    const uint8_t *b = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t r;
        size_t size = fh_cbor_utf8_decode(b + i, n - i, &r);
        if (size == 0) {
            tb_bytes(w, "\xef\xbf\xbd", 3);
            i++;
            continue;
        }
        tb_bytes(w, b + i, size);
        i += size;
    }
}

static const char lowerhex[] = "0123456789abcdef";

/* printable approximates Go's unicode.IsPrint for valid runes: it knows
 * the controls, the spaces other than ASCII space, the format characters
 * in common use, private use and the noncharacters. */
static bool printable(uint32_t r) {
    if (r < 0x20 || r == 0x7f) {
        return false;
    }
    if (r < 0x7f) {
        return true;
    }
    static const uint32_t ranges[][2] = {
        {0x80, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},   {0x6dd, 0x6dd},
        {0x70f, 0x70f},     {0x1680, 0x1680},   {0x180e, 0x180e},   {0x2000, 0x200f}, {0x2028, 0x202f},
        {0x205f, 0x206f},   {0x3000, 0x3000},   {0xe000, 0xf8ff},   {0xfeff, 0xfeff}, {0xfff9, 0xfffb},
        {0xfffe, 0xffff},   {0x110bd, 0x110bd}, {0x1d173, 0x1d17a}, {0xe0000, 0xe007f}, {0xf0000, 0x10ffff},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (r >= ranges[i][0] && r <= ranges[i][1]) {
            return false;
        }
    }
    return true;
}

/* tb_quote appends s quoted as Go's strconv.Quote does. */
static void tb_quote(fh_cbor_writer *w, const void *s, size_t n) {
    const uint8_t *b = (const uint8_t *)s;
    tb_byte(w, '"');
    size_t i = 0;
    while (i < n) {
        uint32_t r;
        size_t size = fh_cbor_utf8_decode(b + i, n - i, &r);
        if (size == 0) {
            char esc[4] = {'\\', 'x', lowerhex[b[i] >> 4], lowerhex[b[i] & 0xf]};
            tb_bytes(w, esc, 4);
            i++;
            continue;
        }
        if (r == '"' || r == '\\') {
            tb_byte(w, '\\');
            tb_byte(w, (char)r);
        } else if (printable(r)) {
            tb_bytes(w, b + i, size);
        } else {
            char esc[10];
            size_t m = 2;
            esc[0] = '\\';
            switch (r) {
            case '\a': esc[1] = 'a'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            case '\v': esc[1] = 'v'; break;
            default: {
                int digits = r < 0x80 ? 2 : r < 0x10000 ? 4 : 8;
                esc[1] = digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
                for (int d = digits - 1; d >= 0; d--) {
                    esc[m++] = lowerhex[(r >> (4 * d)) & 0xf];
                }
                break;
            }
            }
            tb_bytes(w, esc, m);
        }
        i += size;
    }
    tb_byte(w, '"');
}

/* tb_time_quote appends s quoted as package time quotes values in its
 * errors: every byte outside printable ASCII as \xNN. */
static void tb_time_quote(fh_cbor_writer *w, const char *s, size_t n) {
    tb_byte(w, '"');
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c >= 0x80 || c < ' ') {
            char esc[4] = {'\\', 'x', lowerhex[c >> 4], lowerhex[c & 0xf]};
            tb_bytes(w, esc, 4);
            continue;
        }
        if (c == '"' || c == '\\') {
            tb_byte(w, '\\');
        }
        tb_byte(w, (char)c);
    }
    tb_byte(w, '"');
}

size_t fh_quote(char *dst, size_t cap, const void *s, size_t n) {
    fh_cbor_writer w = {0};
    tb_quote(&w, s, n);
    size_t need = w.len;
    if (w.failed) {
        need = 0;
    }
    if (cap > 0) {
        size_t m = need < cap - 1 ? need : cap - 1;
        if (m > 0) {
            memcpy(dst, w.buf, m);
        }
        dst[m] = '\0';
    }
    fh_cbor_writer_free(&w);
    return need;
}

/* ------------------------------------------------------------------ */
/* Growable arrays                                                     */
/* ------------------------------------------------------------------ */

typedef struct vec {
    void *p;
    size_t n, cap;
} vec;

/* vec_push appends a zeroed element of size elem and returns it, or NULL
 * when memory is exhausted. */
static void *vec_push(vec *v, size_t elem) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 8;
        if (cap > SIZE_MAX / elem) {
            return NULL;
        }
        void *p = realloc(v->p, cap * elem);
        if (p == NULL) {
            return NULL;
        }
        v->p = p;
        v->cap = cap;
    }
    void *at = (char *)v->p + v->n++ * elem;
    memset(at, 0, elem);
    return at;
}

/* vec_shrink releases a vector whose capacity a much smaller use left
 * idle; it then starts empty. */
static void vec_shrink(vec *v, size_t elem) {
    if (v->cap * elem > SHRINK_ABOVE && v->n < v->cap / 4) {
        free(v->p);
        v->p = NULL;
        v->cap = 0;
    }
    v->n = 0;
}

static void writer_shrink(fh_cbor_writer *w) {
    if (w->cap > SHRINK_ABOVE && w->len < w->cap / 4) {
        fh_cbor_writer_free(w);
    }
    w->len = 0;
    w->failed = false;
}

/* ------------------------------------------------------------------ */
/* Instance state                                                      */
/* ------------------------------------------------------------------ */

struct fh_key {
    const char *text;
    size_t text_len;
    const uint8_t *state;
    size_t state_len;
    bool has_state;
    const fh_timer *timers;
    size_t timer_count;
    const fh_message *messages;
    size_t message_count;
    size_t index;
    /* iteration */
    size_t next_timer, next_message;
    int64_t current;
    bool failed;
    /* offsets while decoding, resolved once the arrays stop moving */
    size_t text_off, timer_start, message_start;
};

typedef struct param_entry {
    const char *name;
    size_t name_len;
    fh_param_type type;
    const uint8_t *raw; /* the value's encoding, in the params' copy of the init envelope */
    size_t raw_len;
    const char *text; /* FH_PARAM_TEXT: NUL-terminated copy */
    size_t text_len;
    int64_t i;
    double f;
    bool b;
    size_t name_off, text_off; /* while decoding */
} param_entry;

struct fh_params {
    uint8_t *envelope; /* a copy of the init envelope, which values point into */
    size_t envelope_len;
    const char *computation;
    const char *kind;
    uint64_t partition;
    const char **outputs;
    size_t output_count;
    param_entry *params;
    size_t param_count;
    fh_cbor_writer strs; /* NUL-terminated copies of the texts above */
    fh_cbor_writer err;  /* message of the last failed getter */
    bool has_err;
    fh_cbor_writer fail; /* text given to fh_params_fail */
    bool has_fail;
};

typedef struct timer_set {
    int64_t trigger;
    bool has_event_ts;
    int64_t event_ts;
    size_t payload_off, payload_len; /* in g.tbytes */
} timer_set;

typedef enum state_op { STATE_KEEP = 0, STATE_REPLACE = 1, STATE_DELETE = 2 } state_op;

static struct {
    /* the region flowhost_alloc handed out last */
    uint8_t *in;
    size_t in_cap; /* its allocated size */
    size_t in_len; /* the size the host asked for */
    /* the response or init result returned last */
    fh_cbor_writer out;

    bool init_called; /* flowhost_init decoded an envelope: outputs are known */
    bool initialized; /* flowhost_init_params succeeded (or is not defined) */
    fh_params params;

    /* the batch */
    fh_batch batch;
    vec keys, timers, messages; /* fh_key, fh_timer, fh_message */
    fh_cbor_writer strs;        /* NUL-terminated texts of the request */

    /* the key being processed and its effects */
    fh_key *active;
    fh_cbor_writer emits; /* encoded Emit maps */
    size_t emit_count;
    vec tset;              /* timer_set */
    fh_cbor_writer tbytes; /* timer payloads */
    vec cancels;           /* int64_t triggers */
    state_op op;
    fh_cbor_writer state; /* the new state when op is STATE_REPLACE */
    fh_cbor_writer key_err;
    vec bitmap; /* uint8_t, one bit per input, all zero between emits */

    bool batch_failed;
    fh_cbor_writer batch_err;
    bool fatal; /* a usage error: the batch fails with status -2 */
    bool oom;

    fh_cbor_writer msg; /* scratch for log lines */
} g;

/* ------------------------------------------------------------------ */
/* Usage errors                                                        */
/* ------------------------------------------------------------------ */

static fh_cbor_writer *msg_begin(void) {
    g.msg.len = 0;
    g.msg.failed = false;
    return &g.msg;
}

static void msg_log(int level) { fh_log_n(level, (const char *)g.msg.buf, g.msg.failed ? 0 : g.msg.len); }

/* usage_end logs the message built in g.msg as a usage error and makes
 * the batch fail with status -2. */
static int usage_end(void) {
    msg_log(FH_LOG_ERROR);
    g.fatal = true;
    return -1;
}

static int usage(const char *text) {
    tb_str(msg_begin(), text);
    return usage_end();
}

/* usable reports whether fn may act on k: k is the key being processed and
 * no usage error has ended the batch. */
static bool usable(const fh_key *k, const char *fn) {
    if (g.fatal) {
        return false;
    }
    if (k == NULL || k != g.active) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: ");
        tb_str(m, fn);
        tb_str(m, " on a key that is not being processed (keys are valid only during their flowhost_process_key call)");
        usage_end();
        return false;
    }
    return true;
}

/* Typed state (typed_state.c) sets these on the first use of a cell, so
 * that a guest that never uses a cell links none of it. */
void (*fh__ts_begin)(void);
const char *(*fh__ts_end)(fh_key *k);
bool (*fh__ts_raw)(fh_key *k);

static bool require_transform(const char *fn);

/* fh__ts_usable lets typed_state.c refuse misuse the way the key API does. */
bool fh__ts_usable(const fh_key *k, const char *fn, bool write) {
    return usable(k, fn) && (!write || require_transform(fn));
}

/* fh__ts_misuse reports misuse that is not about the key. */
int fh__ts_misuse(const char *text) { return usage(text); }

/* fh__ts_quote quotes as Go's strconv.Quote, for typed state's errors. */
void fh__ts_quote(fh_cbor_writer *w, const void *s, size_t n) { tb_quote(w, s, n); }

static bool require_transform(const char *fn) {
    if (g.batch.is_map) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: ");
        tb_str(m, fn);
        tb_str(m, " in a map computation; only a transform keeps state and timers");
        usage_end();
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Strict decoding                                                     */
/* ------------------------------------------------------------------ */

#define PATH_MAX_DEPTH (FH_CBOR_MAX_DEPTH + 8)

/* dec is a reader plus the field path of what it reads, so that an error
 * names where it is: keys[3].messages[0].id. On an error nothing is
 * popped, so the path still names the place. */
typedef struct dec {
    fh_cbor_reader r;
    int depth;
    struct {
        const char *name; /* NULL for an index */
        size_t len;
        size_t index;
    } path[PATH_MAX_DEPTH];
    bool oom;
} dec;

static void push_name(dec *d, const char *name, size_t len) {
    if (d->depth < PATH_MAX_DEPTH) {
        d->path[d->depth].name = name;
        d->path[d->depth].len = len;
    }
    d->depth++;
}

static void push_index(dec *d, size_t i) {
    if (d->depth < PATH_MAX_DEPTH) {
        d->path[d->depth].name = NULL;
        d->path[d->depth].index = i;
    }
    d->depth++;
}

static void pop(dec *d) { d->depth--; }

static int dec_oom(dec *d) {
    d->oom = true;
    return fh_cbor_fail(&d->r, "out of memory");
}

/* dec_error appends "path: message" to w. */
static void dec_error(const dec *d, fh_cbor_writer *w) {
    int n = d->depth < PATH_MAX_DEPTH ? d->depth : PATH_MAX_DEPTH;
    for (int i = 0; i < n; i++) {
        if (d->path[i].name == NULL) {
            tb_byte(w, '[');
            tb_u64(w, d->path[i].index);
            tb_byte(w, ']');
        } else {
            if (i > 0) {
                tb_byte(w, '.');
            }
            tb_sanitized(w, d->path[i].name, d->path[i].len);
        }
    }
    if (n > 0) {
        tb_str(w, ": ");
    }
    tb_str(w, d->r.err ? d->r.err : "invalid envelope");
}

/* field reads the key of a struct's map entry, pushes its name and
 * returns the index of the field it names in names[0..n), failing on a
 * key that is not text, unknown or repeated. */
static int field(dec *d, const char *const *names, int n, uint32_t *seen) {
    fh_cbor_item it;
    if (fh_cbor_head(&d->r, &it) != 0) {
        return -1;
    }
    if (it.major != FH_CBOR_TEXT) {
        return fh_cbor_fail(&d->r, "map key: expected text string");
    }
    const char *key = (const char *)fh_cbor_string(&d->r, &it);
    size_t len = (size_t)it.arg;
    push_name(d, key, len);
    for (int i = 0; i < n; i++) {
        if (strlen(names[i]) == len && memcmp(names[i], key, len) == 0) {
            if (*seen & (1u << i)) {
                return fh_cbor_fail(&d->r, "duplicate field");
            }
            *seen |= 1u << i;
            return i;
        }
    }
    return fh_cbor_fail(&d->r, "unknown field");
}

/* required fails, naming the first missing field, unless every field of
 * the mask was seen. */
static int required(dec *d, const char *const *names, int n, uint32_t mask, uint32_t seen) {
    for (int i = 0; i < n; i++) {
        if ((mask & (1u << i)) && !(seen & (1u << i))) {
            push_name(d, names[i], strlen(names[i]));
            return fh_cbor_fail(&d->r, "missing required field");
        }
    }
    return 0;
}

/* dec_text reads a text string and copies it, NUL-terminated, into strs;
 * *off receives its offset there. */
static int dec_text(dec *d, fh_cbor_writer *strs, size_t *off, size_t *len) {
    const char *s;
    if (fh_cbor_read_text(&d->r, &s, len) != 0) {
        return -1;
    }
    *off = strs->len;
    fh_cbor_put_raw(strs, s, *len);
    tb_byte(strs, '\0');
    if (strs->failed) {
        return dec_oom(d);
    }
    return 0;
}

static const char *const watermark_fields[] = {"event", "system"};
static const char *const request_fields[] = {"abi", "computation", "kind", "partition", "epoch", "watermarks", "keys"};
static const char *const key_fields[] = {"key", "state", "timers", "messages"};
static const char *const timer_fields[] = {"id", "trigger_ts", "event_ts", "payload"};
static const char *const message_fields[] = {"id", "stream", "event_ts", "system_ts", "alignment_ts", "payload"};
static const char *const init_fields[] = {"abi", "computation", "kind", "partition", "parameters", "output_streams"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int dec_watermarks(dec *d) {
    size_t n;
    uint32_t seen = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int f = field(d, watermark_fields, COUNT(watermark_fields), &seen);
        if (f < 0) {
            return -1;
        }
        if (fh_cbor_read_int(&d->r, f == 0 ? &g.batch.event_watermark : &g.batch.system_watermark) != 0) {
            return -1;
        }
        pop(d);
    }
    return required(d, watermark_fields, COUNT(watermark_fields), 0x3, seen);
}

static const uint8_t empty_bytes[1] = {0};

static int dec_timer(dec *d, size_t input) {
    fh_timer *t = (fh_timer *)vec_push(&g.timers, sizeof(fh_timer));
    if (t == NULL) {
        return dec_oom(d);
    }
    t->input = (uint32_t)input;
    t->payload = empty_bytes;
    size_t n, off;
    uint32_t seen = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int f = field(d, timer_fields, COUNT(timer_fields), &seen);
        int rc = -1;
        switch (f) {
        case 0:
            rc = dec_text(d, &g.strs, &off, &t->id_len);
            t->id = (const char *)(uintptr_t)off; /* resolved later */
            break;
        case 1:
            rc = fh_cbor_read_int(&d->r, &t->trigger_ts);
            break;
        case 2:
            rc = fh_cbor_read_int(&d->r, &t->event_ts);
            break;
        case 3:
            rc = fh_cbor_read_bytes(&d->r, &t->payload, &t->payload_len);
            break;
        }
        if (rc != 0) {
            return -1;
        }
        pop(d);
    }
    return required(d, timer_fields, COUNT(timer_fields), 0x7, seen);
}

static int dec_message(dec *d, size_t input) {
    fh_message *m = (fh_message *)vec_push(&g.messages, sizeof(fh_message));
    if (m == NULL) {
        return dec_oom(d);
    }
    m->input = (uint32_t)input;
    size_t n, off;
    uint32_t seen = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int f = field(d, message_fields, COUNT(message_fields), &seen);
        int rc = -1;
        switch (f) {
        case 0:
            rc = dec_text(d, &g.strs, &off, &m->id_len);
            m->id = (const char *)(uintptr_t)off;
            break;
        case 1:
            rc = dec_text(d, &g.strs, &off, &m->stream_len);
            m->stream = (const char *)(uintptr_t)off;
            break;
        case 2:
            rc = fh_cbor_read_int(&d->r, &m->event_ts);
            break;
        case 3:
            rc = fh_cbor_read_int(&d->r, &m->system_ts);
            break;
        case 4:
            rc = fh_cbor_read_int(&d->r, &m->alignment_ts);
            break;
        case 5:
            rc = fh_cbor_read_bytes(&d->r, &m->payload, &m->payload_len);
            break;
        }
        if (rc != 0) {
            return -1;
        }
        pop(d);
    }
    return required(d, message_fields, COUNT(message_fields), 0x3f, seen);
}

/* dec_inputs reads a key's timers or messages array. Timers come
 * first in the input numbering whatever order the fields have, so the
 * message indexes are fixed up once the key is read. */
static int dec_inputs(dec *d, fh_key *k, bool timers) {
    size_t n;
    if (fh_cbor_read_array(&d->r, &n) != 0) {
        return -1;
    }
    if (timers) {
        k->timer_start = g.timers.n;
        k->timer_count = n;
    } else {
        k->message_start = g.messages.n;
        k->message_count = n;
    }
    for (size_t i = 0; i < n; i++) {
        push_index(d, i);
        if ((timers ? dec_timer(d, i) : dec_message(d, i)) != 0) {
            return -1;
        }
        pop(d);
    }
    return 0;
}

static int dec_key(dec *d, size_t index) {
    fh_key *k = (fh_key *)vec_push(&g.keys, sizeof(fh_key));
    if (k == NULL) {
        return dec_oom(d);
    }
    k->index = index;
    k->current = -1;
    size_t n;
    uint32_t seen = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int f = field(d, key_fields, COUNT(key_fields), &seen);
        int rc = -1;
        /* k may move when the keys array grows; only nested keys grow
         * it, and there are none, so k stays valid here. */
        switch (f) {
        case 0:
            rc = dec_text(d, &g.strs, &k->text_off, &k->text_len);
            break;
        case 1:
            rc = fh_cbor_read_bytes(&d->r, &k->state, &k->state_len);
            k->has_state = true;
            break;
        case 2:
        case 3:
            rc = dec_inputs(d, k, f == 2);
            break;
        }
        if (rc != 0) {
            return -1;
        }
        pop(d);
    }
    if (required(d, key_fields, COUNT(key_fields), 0x1, seen) != 0) {
        return -1;
    }
    fh_message *msgs = (fh_message *)g.messages.p;
    for (size_t i = 0; i < k->message_count; i++) {
        msgs[k->message_start + i].input = (uint32_t)(k->timer_count + i);
    }
    return 0;
}

static int dec_keys(dec *d) {
    size_t n;
    if (fh_cbor_read_array(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        push_index(d, i);
        if (dec_key(d, i) != 0) {
            return -1;
        }
        pop(d);
    }
    return 0;
}

static uint64_t request_abi;
static size_t computation_off, kind_off;

static int dec_request(dec *d) {
    size_t n, len;
    uint32_t seen = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int f = field(d, request_fields, COUNT(request_fields), &seen);
        int rc = -1;
        switch (f) {
        case 0:
            rc = fh_cbor_read_uint(&d->r, &request_abi);
            break;
        case 1:
            rc = dec_text(d, &g.strs, &computation_off, &g.batch.computation_len);
            break;
        case 2:
            rc = dec_text(d, &g.strs, &kind_off, &len);
            break;
        case 3:
            rc = fh_cbor_read_uint(&d->r, &g.batch.partition);
            break;
        case 4:
            rc = fh_cbor_read_uint(&d->r, &g.batch.epoch);
            break;
        case 5:
            rc = dec_watermarks(d);
            break;
        case 6:
            rc = dec_keys(d);
            break;
        }
        if (rc != 0) {
            return -1;
        }
        pop(d);
    }
    if (required(d, request_fields, COUNT(request_fields), 0x7f, seen) != 0) {
        return -1;
    }
    if (fh_cbor_remaining(&d->r) > 0) {
        return fh_cbor_fail(&d->r, "trailing bytes after the envelope");
    }
    return 0;
}

/* resolve_request turns the offsets recorded while decoding into
 * pointers, now that the arrays no longer move. */
static void resolve_request(void) {
    const char *base = (const char *)g.strs.buf;
    fh_key *keys = (fh_key *)g.keys.p;
    fh_timer *timers = (fh_timer *)g.timers.p;
    fh_message *msgs = (fh_message *)g.messages.p;
    g.batch.computation = base + computation_off;
    g.batch.kind = base + kind_off;
    g.batch.key_count = g.keys.n;
    for (size_t i = 0; i < g.timers.n; i++) {
        timers[i].id = base + (uintptr_t)timers[i].id;
    }
    for (size_t i = 0; i < g.messages.n; i++) {
        msgs[i].id = base + (uintptr_t)msgs[i].id;
        msgs[i].stream = base + (uintptr_t)msgs[i].stream;
    }
    for (size_t i = 0; i < g.keys.n; i++) {
        fh_key *k = &keys[i];
        k->text = base + k->text_off;
        k->timers = k->timer_count ? timers + k->timer_start : NULL;
        k->messages = k->message_count ? msgs + k->message_start : NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Parameter values                                                    */
/* ------------------------------------------------------------------ */

typedef struct key_span {
    const uint8_t *s;
    size_t n;
} key_span;

static int compare_spans(const void *a, const void *b) {
    const key_span *x = (const key_span *)a, *y = (const key_span *)b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->s, y->s, n) : 0;
    if (c != 0) {
        return c;
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

static int any_value(dec *d, const fh_cbor_item *it, int depth);

/* map_any checks a map of text keys to parameter values at nesting level
 * depth: valid UTF-8 keys, no key twice (found by sorting, so a map of n
 * keys costs n log n, not n^2). */
static int map_any(dec *d, size_t count, int depth) {
    if (depth >= FH_CBOR_MAX_DEPTH) {
        return fh_cbor_fail(&d->r, "nesting exceeds 32 levels");
    }
    key_span *keys = NULL;
    if (count > 0) {
        keys = (key_span *)malloc(count * sizeof(key_span));
        if (keys == NULL) {
            return dec_oom(d);
        }
    }
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        fh_cbor_item it;
        if (fh_cbor_head(&d->r, &it) != 0) {
            rc = -1;
            break;
        }
        if (it.major != FH_CBOR_TEXT) {
            rc = fh_cbor_fail(&d->r, "map key: expected text string");
            break;
        }
        keys[i].n = (size_t)it.arg;
        keys[i].s = fh_cbor_string(&d->r, &it);
        if (!fh_cbor_utf8_valid(keys[i].s, keys[i].n)) {
            rc = fh_cbor_fail(&d->r, "map key is not valid UTF-8");
            break;
        }
        push_name(d, (const char *)keys[i].s, keys[i].n);
        if (fh_cbor_head(&d->r, &it) != 0 || any_value(d, &it, depth + 1) != 0) {
            rc = -1;
            break;
        }
        pop(d);
    }
    if (rc == 0 && count > 1) {
        qsort(keys, count, sizeof(key_span), compare_spans);
        for (size_t i = 1; i < count; i++) {
            if (compare_spans(&keys[i - 1], &keys[i]) == 0) {
                push_name(d, (const char *)keys[i].s, keys[i].n);
                rc = fh_cbor_fail(&d->r, "duplicate map key");
                break;
            }
        }
    }
    free(keys);
    return rc;
}

/* any_value checks a parameter value whose head it is given: anything
 * that is an int64, a float, text, bytes, a bool, null, or a list or map
 * of those; no tags, no undefined, no other simple values. */
static int any_value(dec *d, const fh_cbor_item *it, int depth) {
    switch (it->major) {
    case FH_CBOR_UINT:
    case FH_CBOR_NEGINT:
        if (it->arg > (uint64_t)INT64_MAX) {
            return fh_cbor_fail(&d->r, "integer overflows int64");
        }
        return 0;
    case FH_CBOR_BYTES:
        (void)fh_cbor_string(&d->r, it);
        return 0;
    case FH_CBOR_TEXT: {
        const uint8_t *s = fh_cbor_string(&d->r, it);
        if (!fh_cbor_utf8_valid(s, (size_t)it->arg)) {
            return fh_cbor_fail(&d->r, "text string is not valid UTF-8");
        }
        return 0;
    }
    case FH_CBOR_ARRAY:
        if (depth >= FH_CBOR_MAX_DEPTH) {
            return fh_cbor_fail(&d->r, "nesting exceeds 32 levels");
        }
        for (uint64_t i = 0; i < it->arg; i++) {
            fh_cbor_item e;
            push_index(d, (size_t)i);
            if (fh_cbor_head(&d->r, &e) != 0 || any_value(d, &e, depth + 1) != 0) {
                return -1;
            }
            pop(d);
        }
        return 0;
    case FH_CBOR_MAP:
        return map_any(d, (size_t)it->arg, depth);
    case FH_CBOR_TAG:
        return fh_cbor_fail(&d->r, "tags are not allowed");
    default:
        if (it->info < 20 || it->info == 23 || it->info == 24) {
            return fh_cbor_fail(&d->r, it->info == 23 ? "undefined is not allowed" : "simple value is not allowed");
        }
        return 0;
    }
}

/* ------------------------------------------------------------------ */
/* Init                                                                */
/* ------------------------------------------------------------------ */

static void params_reset(fh_params *p) {
    free(p->envelope);
    free(p->outputs);
    free(p->params);
    fh_cbor_writer_free(&p->strs);
    fh_cbor_writer_free(&p->err);
    fh_cbor_writer_free(&p->fail);
    memset(p, 0, sizeof *p);
}

/* collect_params records the top-level parameters of the map that starts
 * at r, which dec_init has checked. */
static int collect_params(fh_params *p, fh_cbor_reader *r, size_t count) {
    p->params = (param_entry *)calloc(count ? count : 1, sizeof(param_entry));
    if (p->params == NULL) {
        return -1;
    }
    p->param_count = count;
    for (size_t i = 0; i < count; i++) {
        param_entry *e = &p->params[i];
        const char *name;
        fh_cbor_read_text(r, &name, &e->name_len);
        e->name_off = p->strs.len;
        fh_cbor_put_raw(&p->strs, name, e->name_len);
        tb_byte(&p->strs, '\0');
        e->raw = r->p;
        fh_cbor_reader v = *r;
        fh_cbor_item it;
        fh_cbor_head(&v, &it);
        switch (it.major) {
        case FH_CBOR_UINT:
            e->type = FH_PARAM_INT;
            e->i = (int64_t)it.arg;
            break;
        case FH_CBOR_NEGINT:
            e->type = FH_PARAM_INT;
            e->i = -(int64_t)it.arg - 1;
            break;
        case FH_CBOR_BYTES:
            e->type = FH_PARAM_BYTES;
            break;
        case FH_CBOR_TEXT: {
            e->type = FH_PARAM_TEXT;
            e->text_len = (size_t)it.arg;
            e->text_off = p->strs.len;
            fh_cbor_put_raw(&p->strs, fh_cbor_string(&v, &it), e->text_len);
            tb_byte(&p->strs, '\0');
            break;
        }
        case FH_CBOR_ARRAY:
            e->type = FH_PARAM_LIST;
            break;
        case FH_CBOR_MAP:
            e->type = FH_PARAM_MAP;
            break;
        default:
            if (it.info == 20 || it.info == 21) {
                e->type = FH_PARAM_BOOL;
                e->b = it.info == 21;
            } else if (it.info == 22) {
                e->type = FH_PARAM_NULL;
            } else {
                e->type = FH_PARAM_FLOAT;
                e->f = fh_cbor_float_value(&it);
            }
            break;
        }
        if (fh_cbor_skip(r, 2) != 0) {
            return -1;
        }
        e->raw_len = (size_t)(r->p - e->raw);
    }
    return 0;
}

static size_t init_computation_off, init_kind_off;

static int dec_init(dec *d, fh_params *p, uint64_t *abi) {
    size_t n, len;
    uint32_t seen = 0;
    const uint8_t *params_at = NULL;
    size_t params_count = 0;
    vec outputs = {0}; /* offsets */
    int rc = 0;
    if (fh_cbor_read_map(&d->r, &n) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        int f = field(d, init_fields, COUNT(init_fields), &seen);
        rc = -1;
        switch (f) {
        case 0:
            rc = fh_cbor_read_uint(&d->r, abi);
            break;
        case 1:
            rc = dec_text(d, &p->strs, &init_computation_off, &len);
            break;
        case 2:
            rc = dec_text(d, &p->strs, &init_kind_off, &len);
            break;
        case 3:
            rc = fh_cbor_read_uint(&d->r, &p->partition);
            break;
        case 4: {
            fh_cbor_item it;
            if (fh_cbor_head(&d->r, &it) != 0) {
                break;
            }
            if (it.major != FH_CBOR_MAP) {
                fh_cbor_fail(&d->r, "expected map");
                break;
            }
            params_at = d->r.p;
            params_count = (size_t)it.arg;
            rc = map_any(d, params_count, 1);
            break;
        }
        case 5: {
            size_t count;
            if (fh_cbor_read_array(&d->r, &count) != 0) {
                break;
            }
            rc = 0;
            for (size_t j = 0; j < count && rc == 0; j++) {
                size_t *off = (size_t *)vec_push(&outputs, sizeof(size_t));
                push_index(d, j);
                rc = off == NULL ? dec_oom(d) : dec_text(d, &p->strs, off, &len);
                if (rc == 0) {
                    pop(d);
                }
            }
            break;
        }
        }
        if (rc == 0) {
            pop(d);
        }
    }
    if (rc == 0) {
        rc = required(d, init_fields, COUNT(init_fields), 0x2f, seen);
    }
    if (rc == 0 && fh_cbor_remaining(&d->r) > 0) {
        rc = fh_cbor_fail(&d->r, "trailing bytes after the envelope");
    }
    if (rc == 0) {
        p->output_count = outputs.n;
        p->outputs = (const char **)calloc(outputs.n ? outputs.n : 1, sizeof(char *));
        if (p->outputs == NULL) {
            rc = dec_oom(d);
        }
    }
    if (rc == 0 && params_at != NULL) {
        fh_cbor_reader r;
        fh_cbor_reader_init(&r, params_at, (size_t)(d->r.end - params_at));
        if (collect_params(p, &r, params_count) != 0) {
            rc = dec_oom(d);
        }
    }
    if (rc == 0 && p->strs.failed) {
        rc = dec_oom(d);
    }
    if (rc == 0) {
        const char *base = (const char *)p->strs.buf;
        p->computation = base + init_computation_off;
        p->kind = base + init_kind_off;
        for (size_t i = 0; i < outputs.n; i++) {
            p->outputs[i] = base + ((size_t *)outputs.p)[i];
        }
        for (size_t i = 0; i < p->param_count; i++) {
            param_entry *e = &p->params[i];
            e->name = base + e->name_off;
            if (e->type == FH_PARAM_TEXT) {
                e->text = base + e->text_off;
            }
        }
    }
    free(outputs.p);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Version peeking                                                     */
/* ------------------------------------------------------------------ */

/* The Go SDK reads the version of an envelope that does not decode with
 * abi.PeekVersion: fxamacker/cbor's default, lenient decoding into a
 * struct with one field, abi. What follows mirrors what that accepts, so
 * that both SDKs answer -3 to the same envelopes: any well-formed CBOR
 * (indefinite lengths and tags included) nesting at most 64 levels, with
 * at most 131072 elements per container; a map (behind tags other than
 * 0-3) whose text keys are valid UTF-8 and whose other keys are
 * integers; and the first key equal to "abi" in any case holding an
 * unsigned integer or a simple value, possibly behind tags (not tags 0
 * and 3; tag 2 holds a big-endian byte string that must fit 64 bits). */
#define LAX_MAX_DEPTH 64
#define LAX_MAX_ELEMENTS 131072

/* lax_head reads a head, allowing what strict decoding refuses:
 * indefinite lengths and breaks (both with info 31). */
static int lax_head(fh_cbor_reader *r, fh_cbor_item *it) {
    if (r->p < r->end && (*r->p & 0x1f) == 31 && (*r->p >> 5) >= FH_CBOR_BYTES && (*r->p >> 5) != FH_CBOR_TAG) {
        it->major = *r->p >> 5;
        it->info = 31;
        it->arg = 0;
        r->p++;
        return 0;
    }
    return fh_cbor_head(r, it);
}

static bool is_break(const fh_cbor_item *it) { return it->major == FH_CBOR_SIMPLE && it->info == 31; }

static bool at_break(const fh_cbor_reader *r) { return r->p < r->end && *r->p == 0xff; }

/* lax_string steps over the rest of a byte or text string whose head was
 * read; an indefinite one's chunks are appended to joined when it is not
 * NULL (a definite one's content too). */
static bool lax_string(fh_cbor_reader *r, const fh_cbor_item *it, fh_cbor_writer *joined) {
    if (it->info != 31) {
        const uint8_t *s = fh_cbor_string(r, it);
        if (joined != NULL) {
            fh_cbor_put_raw(joined, s, (size_t)it->arg);
        }
        return true;
    }
    for (;;) {
        fh_cbor_item chunk;
        if (lax_head(r, &chunk) != 0) {
            return false;
        }
        if (is_break(&chunk)) {
            return true;
        }
        if (chunk.major != it->major || chunk.info == 31) {
            return false;
        }
        const uint8_t *s = fh_cbor_string(r, &chunk);
        if (joined != NULL) {
            fh_cbor_put_raw(joined, s, (size_t)chunk.arg);
        }
    }
}

/* lax_item steps over one well-formed item inside depth levels of
 * containers (a chain of tags counts one level per tag after the first). */
static bool lax_item(fh_cbor_reader *r, int depth) {
    fh_cbor_item it;
    if (lax_head(r, &it) != 0 || is_break(&it)) {
        return false;
    }
    switch (it.major) {
    case FH_CBOR_TAG:
        while (r->p < r->end && (*r->p >> 5) == FH_CBOR_TAG) {
            if (lax_head(r, &it) != 0 || ++depth > LAX_MAX_DEPTH) {
                return false;
            }
        }
        return lax_item(r, depth);
    case FH_CBOR_BYTES:
    case FH_CBOR_TEXT:
        return lax_string(r, &it, NULL);
    case FH_CBOR_ARRAY:
    case FH_CBOR_MAP: {
        if (++depth > LAX_MAX_DEPTH) {
            return false;
        }
        uint64_t per = it.major == FH_CBOR_MAP ? 2 : 1;
        if (it.info != 31) {
            if (it.arg > LAX_MAX_ELEMENTS) {
                return false;
            }
            for (uint64_t i = 0; i < it.arg * per; i++) {
                if (!lax_item(r, depth)) {
                    return false;
                }
            }
            return true;
        }
        uint64_t items = 0;
        while (!at_break(r)) {
            if (!lax_item(r, depth) || ++items > LAX_MAX_ELEMENTS * per) {
                return false;
            }
        }
        r->p++;
        return items % per == 0;
    }
    default:
        return true;
    }
}

/* lax_abi reads the value of the abi field. */
static bool lax_abi(fh_cbor_reader *r, int depth, uint64_t *version) {
    fh_cbor_item it;
    if (lax_head(r, &it) != 0) {
        return false;
    }
    bool first = true, time = false;
    while (it.major == FH_CBOR_TAG) {
        if (!first && ++depth > LAX_MAX_DEPTH) {
            return false;
        }
        first = false;
        time = time || it.arg == 1;
        if (it.arg == 0 || it.arg == 3) {
            return false; /* a time text or a negative bignum */
        }
        if (it.arg == 2) {
            fh_cbor_item b;
            fh_cbor_writer bytes = {0};
            bool ok = lax_head(r, &b) == 0 && b.major == FH_CBOR_BYTES && lax_string(r, &b, &bytes) && !bytes.failed;
            uint64_t v = 0;
            for (size_t i = 0; ok && i < bytes.len; i++) {
                if (v >> 56 != 0) {
                    ok = false;
                }
                v = v << 8 | bytes.buf[i];
            }
            fh_cbor_writer_free(&bytes);
            *version = v;
            return ok;
        }
        if (lax_head(r, &it) != 0) {
            return false;
        }
    }
    /* Simple values other than booleans, null and undefined decode to
     * their number, except as epoch times (tag 1). */
    bool simple = it.major == FH_CBOR_SIMPLE && (it.info < 20 || it.info == 24) && !time;
    if (it.major != FH_CBOR_UINT && !simple) {
        return false;
    }
    *version = it.arg;
    return true;
}

/* peek_version reads the abi field of an envelope that strict decoding
 * refused, as abi.PeekVersion does (see above). */
static bool peek_version(const void *data, size_t len, uint64_t *version) {
    fh_cbor_reader r;
    fh_cbor_item it;
    int depth = 0;
    fh_cbor_reader_init(&r, data, len);
    if (lax_head(&r, &it) != 0) {
        return false;
    }
    for (bool first = true; it.major == FH_CBOR_TAG; first = false) {
        if (it.arg <= 3 || (!first && ++depth > LAX_MAX_DEPTH) || lax_head(&r, &it) != 0) {
            return false;
        }
    }
    if (it.major != FH_CBOR_MAP || ++depth > LAX_MAX_DEPTH || (it.info != 31 && it.arg > LAX_MAX_ELEMENTS)) {
        return false;
    }
    bool found = false, ok = false;
    fh_cbor_writer key = {0};
    for (uint64_t i = 0; it.info == 31 || i < it.arg; i++) {
        if (it.info == 31 && at_break(&r)) {
            r.p++;
            break;
        }
        fh_cbor_item k;
        if (i >= LAX_MAX_ELEMENTS || lax_head(&r, &k) != 0) {
            fh_cbor_writer_free(&key);
            return false;
        }
        bool match = false;
        if (k.major == FH_CBOR_TEXT) {
            key.len = 0;
            if (!lax_string(&r, &k, &key) || key.failed || !fh_cbor_utf8_valid(key.buf, key.len)) {
                fh_cbor_writer_free(&key);
                return false;
            }
            match = key.len == 3 && (key.buf[0] | 0x20) == 'a' && (key.buf[1] | 0x20) == 'b' && (key.buf[2] | 0x20) == 'i';
        } else if (k.major != FH_CBOR_UINT && k.major != FH_CBOR_NEGINT) {
            fh_cbor_writer_free(&key);
            return false;
        }
        if (match && !found) {
            found = true;
            ok = lax_abi(&r, depth, version);
            if (!ok) {
                break;
            }
        } else if (!lax_item(&r, depth)) {
            fh_cbor_writer_free(&key);
            return false;
        }
    }
    fh_cbor_writer_free(&key);
    return ok && fh_cbor_remaining(&r) == 0;
}

/* bad_envelope logs why an envelope did not decode and returns the
 * status: -3 when its abi field names another version, -1 otherwise. */
static int bad_envelope(const char *what, const void *data, size_t len, const dec *d) {
    uint64_t v;
    fh_cbor_writer *m = msg_begin();
    if (peek_version(data, len, &v) && v != ABI_VERSION) {
        tb_str(m, "flowhost: ");
        tb_str(m, what);
        tb_str(m, " speaks ABI version ");
        tb_u64(m, v);
        tb_str(m, "; this SDK speaks 1");
        msg_log(FH_LOG_ERROR);
        return -3;
    }
    tb_str(m, "flowhost: cannot decode the ");
    tb_str(m, what);
    tb_str(m, ": ");
    dec_error(d, m);
    msg_log(FH_LOG_ERROR);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Entry points                                                        */
/* ------------------------------------------------------------------ */

void *fh_entry_alloc(int32_t size) {
    if (size < 0) {
        return NULL;
    }
    size_t n = size > 0 ? (size_t)size : 1;
    if (g.in == NULL || g.in_cap < n || (g.in_cap > SHRINK_ABOVE && g.in_cap / 4 > n)) {
        free(g.in);
        g.in = (uint8_t *)malloc(n);
        g.in_cap = g.in ? n : 0;
    }
    /* The next call may use only what this one asked for. */
    g.in_len = g.in ? n : 0;
    return g.in;
}

/* region_ok checks that ptr/len lies in the region flowhost_alloc handed
 * out, and logs why not. */
static bool region_ok(const char *fn, const void *ptr, int32_t len) {
    if (g.in != NULL && ptr == g.in && len >= 0 && (size_t)len <= g.in_len) {
        return true;
    }
    fh_cbor_writer *m = msg_begin();
    tb_str(m, "flowhost: ");
    tb_str(m, fn);
    tb_str(m, "(");
    tb_u64(m, (uint64_t)(uintptr_t)ptr);
    tb_str(m, ", ");
    tb_i64(m, len);
    tb_str(m, ") names memory that flowhost_alloc did not hand out");
    msg_log(FH_LOG_ERROR);
    return false;
}

static int out_of_memory(void) {
    fh_log(FH_LOG_ERROR, "flowhost: out of memory");
    return -2;
}

/* put_key writes a map key: a short text string. */
static void put_key(fh_cbor_writer *w, const char *name) { fh_cbor_put_text(w, name, strlen(name)); }

/* put_error_text writes an error text, or the generic one when it is empty. */
static void put_error_text(fh_cbor_writer *w, const fh_cbor_writer *text) {
    fh_cbor_put_text(w, text->len ? (const char *)text->buf : no_message, text->len ? text->len : strlen(no_message));
}

/* set_error records msg (sanitized, or the generic text) in w. */
static void set_error(fh_cbor_writer *w, const char *msg) {
    w->len = 0;
    w->failed = false;
    if (msg == NULL || *msg == '\0') {
        tb_str(w, no_message);
    } else {
        tb_sanitized(w, msg, strlen(msg));
    }
    (void)tb_cstr(w);
}

int fh_entry_init(const void *ptr, int32_t len, const uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (!region_ok("flowhost_init", ptr, len)) {
        return -1;
    }
    g.active = NULL;
    g.initialized = false;
    g.init_called = false;
    fh_params *p = &g.params;
    params_reset(p);
    /* The values must outlive the region, which later requests reuse. */
    p->envelope = (uint8_t *)malloc(len > 0 ? (size_t)len : 1);
    if (p->envelope == NULL) {
        return out_of_memory();
    }
    if (len > 0) {
        memcpy(p->envelope, ptr, (size_t)len);
    }
    p->envelope_len = (size_t)len;

    dec d;
    memset(&d, 0, sizeof d);
    fh_cbor_reader_init(&d.r, p->envelope, p->envelope_len);
    uint64_t abi = 0;
    int rc = dec_init(&d, p, &abi);
    if (d.oom) {
        params_reset(p);
        return out_of_memory();
    }
    if (rc != 0) {
        rc = bad_envelope("init envelope", p->envelope, p->envelope_len, &d);
        params_reset(p);
        return rc;
    }
    if (abi != ABI_VERSION) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: init envelope speaks ABI version ");
        tb_u64(m, abi);
        tb_str(m, "; this SDK speaks 1");
        msg_log(FH_LOG_ERROR);
        params_reset(p);
        return -3;
    }
    const char *problem = NULL;
    if (strcmp(p->kind, "transform") != 0 && strcmp(p->kind, "map") != 0) {
        problem = "kind: unknown kind (want transform or map)";
    } else if (*p->computation == '\0') {
        problem = "computation: empty";
    }
    for (size_t i = 0; i < p->output_count && problem == NULL; i++) {
        if (*p->outputs[i] == '\0') {
            problem = "output_streams: an empty stream name";
        }
        for (size_t j = 0; j < i && problem == NULL; j++) {
            if (strcmp(p->outputs[i], p->outputs[j]) == 0) {
                problem = "output_streams: a stream is declared twice";
            }
        }
    }
    if (problem != NULL) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: invalid init envelope: ");
        tb_str(m, problem);
        msg_log(FH_LOG_ERROR);
        params_reset(p);
        return -1;
    }
    g.init_called = true;
    if (flowhost_init_params != NULL) {
        int user = flowhost_init_params(p);
        if (user != 0) {
            writer_shrink(&g.out);
            fh_cbor_writer text = {0};
            if (p->has_fail) {
                tb_bytes(&text, p->fail.buf, p->fail.len);
            } else if (p->has_err) {
                tb_bytes(&text, p->err.buf, p->err.len);
            } else {
                tb_str(&text, "flowhost_init_params returned ");
                tb_i64(&text, user);
            }
            fh_cbor_put_head(&g.out, FH_CBOR_MAP, 1);
            put_key(&g.out, "error");
            put_error_text(&g.out, &text);
            fh_cbor_writer_free(&text);
            if (g.out.failed) {
                return out_of_memory();
            }
            *out = g.out.buf;
            *out_len = g.out.len;
            return 0;
        }
    }
    g.initialized = true;
    return 0;
}

/* begin_key makes k the key being processed, with no effects yet. */
static void begin_key(fh_key *k) {
    g.active = k;
    if (fh__ts_begin != NULL) {
        fh__ts_begin();
    }
    k->next_timer = k->next_message = 0;
    k->current = -1;
    k->failed = false;
    g.emits.len = 0;
    g.emit_count = 0;
    g.tset.n = 0;
    g.tbytes.len = 0;
    g.cancels.n = 0;
    g.op = STATE_KEEP;
    g.state.len = 0;
    g.key_err.len = 0;
}

/* finish_key appends k's entry to the response when it has one, and
 * counts it. */
static void finish_key(fh_key *k, size_t *entries) {
    fh_cbor_writer *w = &g.out;
    if (k->failed) {
        fh_cbor_put_head(w, FH_CBOR_MAP, 2);
        put_key(w, "key");
        fh_cbor_put_text(w, k->text, k->text_len);
        put_key(w, "error");
        put_error_text(w, &g.key_err);
        ++*entries;
        return;
    }
    size_t fields = 1 + (g.emit_count > 0) + (g.op == STATE_REPLACE ? 2 : g.op == STATE_DELETE) + (g.tset.n > 0) +
                    (g.cancels.n > 0);
    if (fields == 1) {
        return;
    }
    fh_cbor_put_head(w, FH_CBOR_MAP, fields);
    put_key(w, "key");
    fh_cbor_put_text(w, k->text, k->text_len);
    if (g.emit_count > 0) {
        put_key(w, "emits");
        fh_cbor_put_head(w, FH_CBOR_ARRAY, g.emit_count);
        fh_cbor_put_raw(w, g.emits.buf, g.emits.len);
    }
    if (g.op == STATE_REPLACE) {
        put_key(w, "state");
        fh_cbor_put_bytes(w, g.state.buf, g.state.len);
    }
    if (g.op != STATE_KEEP) {
        put_key(w, "state_op");
        fh_cbor_put_uint(w, (uint64_t)g.op);
    }
    if (g.tset.n > 0) {
        put_key(w, "timers_set");
        fh_cbor_put_head(w, FH_CBOR_ARRAY, g.tset.n);
        const timer_set *ts = (const timer_set *)g.tset.p;
        for (size_t i = 0; i < g.tset.n; i++) {
            const timer_set *t = &ts[i];
            fh_cbor_put_head(w, FH_CBOR_MAP, 1 + (t->payload_len > 0) + t->has_event_ts);
            if (t->payload_len > 0) {
                put_key(w, "payload");
                fh_cbor_put_bytes(w, g.tbytes.buf + t->payload_off, t->payload_len);
            }
            if (t->has_event_ts) {
                put_key(w, "event_ts");
                fh_cbor_put_int(w, t->event_ts);
            }
            put_key(w, "trigger_ts");
            fh_cbor_put_int(w, t->trigger);
        }
    }
    if (g.cancels.n > 0) {
        put_key(w, "timers_cancel");
        fh_cbor_put_head(w, FH_CBOR_ARRAY, g.cancels.n);
        const int64_t *cs = (const int64_t *)g.cancels.p;
        for (size_t i = 0; i < g.cancels.n; i++) {
            fh_cbor_put_int(w, cs[i]);
        }
    }
    ++*entries;
}

int fh_entry_process(const void *ptr, int32_t len, const uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    g.active = NULL;
    if (!region_ok("flowhost_process", ptr, len)) {
        return -1;
    }
    if (flowhost_init_params != NULL && !g.initialized) {
        fh_log(FH_LOG_ERROR, "flowhost: flowhost_process called before a successful flowhost_init");
        return -2;
    }
    vec_shrink(&g.keys, sizeof(fh_key));
    vec_shrink(&g.timers, sizeof(fh_timer));
    vec_shrink(&g.messages, sizeof(fh_message));
    writer_shrink(&g.strs);
    writer_shrink(&g.out);
    writer_shrink(&g.emits);
    writer_shrink(&g.tbytes);
    writer_shrink(&g.state);
    vec_shrink(&g.tset, sizeof(timer_set));
    vec_shrink(&g.cancels, sizeof(int64_t));
    memset(&g.batch, 0, sizeof g.batch);
    g.batch_failed = g.fatal = g.oom = false;
    g.batch_err.len = 0;

    dec d;
    memset(&d, 0, sizeof d);
    fh_cbor_reader_init(&d.r, ptr, (size_t)len);
    request_abi = 0;
    int rc = dec_request(&d);
    if (d.oom) {
        return out_of_memory();
    }
    if (rc != 0) {
        return bad_envelope("request", ptr, (size_t)len, &d);
    }
    resolve_request();
    if (request_abi != ABI_VERSION) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: request speaks ABI version ");
        tb_u64(m, request_abi);
        tb_str(m, "; this SDK speaks 1");
        msg_log(FH_LOG_ERROR);
        return -3;
    }
    g.batch.is_map = strcmp(g.batch.kind, "map") == 0;
    if (!g.batch.is_map && strcmp(g.batch.kind, "transform") != 0) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: request of unknown kind ");
        tb_quote(m, g.batch.kind, strlen(g.batch.kind));
        msg_log(FH_LOG_ERROR);
        return -1;
    }

    /* The keys array's head goes in front once its count is known. */
    fh_cbor_reserve(&g.out, RESPONSE_PREFIX);
    size_t entries = 0;
    fh_key *keys = (fh_key *)g.keys.p;
    for (size_t i = 0; i < g.keys.n && !g.batch_failed; i++) {
        fh_key *k = &keys[i];
        begin_key(k);
        int user = flowhost_process_key(k);
        if (fh__ts_end != NULL && user == 0 && !k->failed && !g.fatal && !g.batch_failed) {
            const char *fail = fh__ts_end(k);
            if (fail != NULL) {
                fh_fail_key(k, fail);
            }
        }
        g.active = NULL;
        if (g.fatal) {
            return -2;
        }
        if (g.batch_failed) {
            break;
        }
        if (user != 0 && !k->failed) {
            k->failed = true;
            g.key_err.len = 0;
            tb_str(&g.key_err, "flowhost_process_key returned ");
            tb_i64(&g.key_err, user);
            (void)tb_cstr(&g.key_err);
        }
        finish_key(k, &entries);
    }
    if (g.oom || g.out.failed || g.emits.failed || g.tbytes.failed || g.state.failed || g.key_err.failed) {
        return out_of_memory();
    }
    if (g.batch_failed) {
        g.out.len = 0;
        fh_cbor_put_head(&g.out, FH_CBOR_MAP, 2);
        put_key(&g.out, "keys");
        fh_cbor_put_head(&g.out, FH_CBOR_ARRAY, 0);
        put_key(&g.out, "error");
        put_error_text(&g.out, &g.batch_err);
        if (g.out.failed) {
            return out_of_memory();
        }
        *out = g.out.buf;
        *out_len = g.out.len;
        return 0;
    }
    uint8_t head[RESPONSE_PREFIX];
    size_t n = 0;
    head[n++] = 0xa1; /* map of 1 */
    head[n++] = 0x64; /* text of 4 */
    memcpy(head + n, "keys", 4);
    n += 4;
    n += fh_cbor_encode_head(head + n, FH_CBOR_ARRAY, entries);
    uint8_t *start = g.out.buf + RESPONSE_PREFIX - n;
    memcpy(start, head, n);
    *out = start;
    *out_len = g.out.len - (RESPONSE_PREFIX - n);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The key API                                                         */
/* ------------------------------------------------------------------ */

const fh_batch *fh_batch_of(const fh_key *k) {
    (void)k;
    return &g.batch;
}

const char *fh_key_text(const fh_key *k, size_t *len) {
    if (len != NULL) {
        *len = k->text_len;
    }
    return k->text;
}

size_t fh_key_index(const fh_key *k) { return k->index; }

size_t fh_input_count(const fh_key *k) { return k->timer_count + k->message_count; }
size_t fh_timer_count(const fh_key *k) { return k->timer_count; }
size_t fh_message_count(const fh_key *k) { return k->message_count; }

const fh_timer *fh_timer_at(const fh_key *k, size_t i) { return i < k->timer_count ? &k->timers[i] : NULL; }

const fh_message *fh_message_at(const fh_key *k, size_t i) { return i < k->message_count ? &k->messages[i] : NULL; }

const fh_timer *fh_next_timer(fh_key *k) {
    if (k->next_timer < k->timer_count) {
        const fh_timer *t = &k->timers[k->next_timer++];
        k->current = t->input;
        return t;
    }
    fh_clear_current(k);
    return NULL;
}

const fh_message *fh_next_message(fh_key *k) {
    if (k->next_message < k->message_count) {
        const fh_message *m = &k->messages[k->next_message++];
        k->current = m->input;
        return m;
    }
    fh_clear_current(k);
    return NULL;
}

void fh_clear_current(fh_key *k) {
    k->next_timer = k->next_message = 0;
    k->current = -1;
}

int64_t fh_current_input(const fh_key *k) { return k->current; }

bool fh_state(const fh_key *k, const uint8_t **data, size_t *len) {
    const uint8_t *d = NULL;
    size_t n = 0;
    bool has = false;
    if (k == g.active && g.op == STATE_REPLACE) {
        d = g.state.buf ? g.state.buf : empty_bytes;
        n = g.state.len;
        has = true;
    } else if (k != g.active || g.op == STATE_KEEP) {
        if (k->has_state) {
            d = k->state;
            n = k->state_len;
            has = true;
        }
    }
    if (data != NULL) {
        *data = d;
    }
    if (len != NULL) {
        *len = n;
    }
    return has;
}

int fh_set_state(fh_key *k, const void *data, size_t len) {
    if (!usable(k, "fh_set_state") || !require_transform("fh_set_state")) {
        return -1;
    }
    if (fh__ts_raw != NULL && !fh__ts_raw(k)) {
        return usage("flowhost: fh_set_state with unsaved typed state changes; call fh_save_state or fh_discard_state_changes first");
    }
    if (data == NULL && len > 0) {
        return usage("flowhost: fh_set_state with NULL data and a length");
    }
    const uint8_t *src = (const uint8_t *)data;
    bool inside = g.state.buf != NULL && src >= g.state.buf && src < g.state.buf + g.state.cap;
    g.state.len = 0;
    uint8_t *dst = fh_cbor_reserve(&g.state, len);
    if (dst == NULL && len > 0) {
        g.oom = true;
        return -1;
    }
    if (len > 0) {
        /* The new state may be (part of) the current one: fh_state hands
         * out this very buffer, which reserve did not move. */
        if (inside) {
            memmove(dst, src, len);
        } else {
            memcpy(dst, src, len);
        }
    }
    g.op = STATE_REPLACE;
    return 0;
}

int fh_delete_state(fh_key *k) {
    if (!usable(k, "fh_delete_state") || !require_transform("fh_delete_state")) {
        return -1;
    }
    if (fh__ts_raw != NULL && !fh__ts_raw(k)) {
        return usage("flowhost: fh_delete_state with unsaved typed state changes; call fh_save_state or fh_discard_state_changes first");
    }
    g.op = STATE_DELETE;
    g.state.len = 0;
    return 0;
}

/* declared reports whether stream may be emitted to: one of the declared
 * output streams, or, before any init, valid text. */
static bool declared(const char *stream, size_t len) {
    if (!g.init_called) {
        return fh_cbor_utf8_valid((const uint8_t *)stream, len);
    }
    for (size_t i = 0; i < g.params.output_count; i++) {
        if (strcmp(g.params.outputs[i], stream) == 0) {
            return true;
        }
    }
    return false;
}

/* ensure_bitmap makes the parent bitmap cover n inputs. */
static bool ensure_bitmap(size_t inputs) {
    size_t bytes = (inputs + 7) / 8;
    while (g.bitmap.n < bytes) {
        if (vec_push(&g.bitmap, 1) == NULL) {
            return false;
        }
    }
    return true;
}

int fh_emit(fh_key *k, const char *stream, const void *payload, size_t len) {
    return fh_emit_with(k, stream, payload, len, NULL);
}

int fh_emit_with(fh_key *k, const char *stream, const void *payload, size_t len, const fh_emit_opts *opts) {
    static const fh_emit_opts defaults;
    if (!usable(k, "fh_emit")) {
        return -1;
    }
    if (opts == NULL) {
        opts = &defaults;
    }
    if (stream == NULL) {
        return usage("flowhost: fh_emit with a NULL stream");
    }
    size_t stream_len = strlen(stream);
    if (!declared(stream, stream_len)) {
        fh_cbor_writer *m = msg_begin();
        tb_str(m, "flowhost: fh_emit to ");
        tb_quote(m, stream, stream_len);
        if (!g.init_called) {
            tb_str(m, ", which is not valid UTF-8");
        } else {
            tb_str(m, ", which is not a declared output stream (declared: ");
            for (size_t i = 0; i < g.params.output_count; i++) {
                if (i > 0) {
                    tb_str(m, ", ");
                }
                tb_str(m, g.params.outputs[i]);
            }
            tb_str(m, ")");
        }
        return usage_end();
    }
    if (payload == NULL && len > 0) {
        return usage("flowhost: fh_emit with a NULL payload and a length");
    }
    size_t key_len = opts->key ? strlen(opts->key) : 0;
    if (!fh_cbor_utf8_valid((const uint8_t *)opts->key, key_len)) {
        return usage("flowhost: fh_emit_opts.key is not valid UTF-8");
    }
    bool explicit_parents = opts->parents != NULL || opts->parent_count > 0;
    size_t inputs = fh_input_count(k);
    size_t unique = 0;
    uint8_t *bits = NULL;
    if (explicit_parents) {
        if (opts->parents == NULL || opts->parent_count == 0) {
            return usage("flowhost: fh_emit_opts.parents without inputs; use all_parents for every input");
        }
        if (opts->all_parents) {
            return usage("flowhost: fh_emit_opts sets both parents and all_parents");
        }
        for (size_t i = 0; i < opts->parent_count; i++) {
            if (opts->parents[i] >= inputs) {
                fh_cbor_writer *m = msg_begin();
                tb_str(m, "flowhost: fh_emit parent ");
                tb_u64(m, opts->parents[i]);
                tb_str(m, ": key ");
                tb_quote(m, k->text, k->text_len);
                tb_str(m, " has ");
                tb_u64(m, inputs);
                tb_str(m, " inputs");
                return usage_end();
            }
        }
        if (!ensure_bitmap(inputs)) {
            g.oom = true;
            return -1;
        }
        bits = (uint8_t *)g.bitmap.p;
        for (size_t i = 0; i < opts->parent_count; i++) {
            uint32_t p = opts->parents[i];
            if (!(bits[p / 8] & (1u << (p % 8)))) {
                bits[p / 8] |= (uint8_t)(1u << (p % 8));
                unique++;
            }
        }
    }
    if (k->failed) {
        /* The key's effects are dropped; only the checks above matter. */
        if (bits != NULL) {
            for (size_t i = 0; i < opts->parent_count; i++) {
                bits[opts->parents[i] / 8] = 0;
            }
        }
        return 0;
    }
    bool own = !explicit_parents && !opts->all_parents && k->current >= 0;
    fh_cbor_writer *w = &g.emits;
    fh_cbor_put_head(w, FH_CBOR_MAP, 2 + (key_len > 0) + (explicit_parents || own) + opts->has_event_ts);
    if (key_len > 0) {
        put_key(w, "key");
        fh_cbor_put_text(w, opts->key, key_len);
    }
    put_key(w, "stream");
    fh_cbor_put_text(w, stream, stream_len);
    if (explicit_parents) {
        put_key(w, "parents");
        fh_cbor_put_head(w, FH_CBOR_ARRAY, unique);
        for (size_t i = 0; i < opts->parent_count; i++) {
            uint32_t p = opts->parents[i];
            if (bits[p / 8] & (1u << (p % 8))) {
                fh_cbor_put_uint(w, p);
                bits[p / 8] &= (uint8_t) ~(1u << (p % 8));
            }
        }
    } else if (own) {
        put_key(w, "parents");
        fh_cbor_put_head(w, FH_CBOR_ARRAY, 1);
        fh_cbor_put_uint(w, (uint64_t)k->current);
    }
    put_key(w, "payload");
    fh_cbor_put_bytes(w, payload, len);
    if (opts->has_event_ts) {
        put_key(w, "event_ts");
        fh_cbor_put_int(w, opts->event_ts);
    }
    g.emit_count++;
    return 0;
}

int fh_set_timer(fh_key *k, int64_t trigger) { return fh_set_timer_with(k, trigger, NULL); }

int fh_set_timer_with(fh_key *k, int64_t trigger, const fh_timer_opts *opts) {
    if (!usable(k, "fh_set_timer") || !require_transform("fh_set_timer")) {
        return -1;
    }
    if (opts != NULL && opts->payload == NULL && opts->payload_len > 0) {
        return usage("flowhost: fh_timer_opts.payload is NULL with a length");
    }
    if (k->failed) {
        return 0;
    }
    timer_set *t = (timer_set *)vec_push(&g.tset, sizeof(timer_set));
    if (t == NULL) {
        g.oom = true;
        return -1;
    }
    t->trigger = trigger;
    if (opts != NULL) {
        t->has_event_ts = opts->has_event_ts;
        t->event_ts = opts->event_ts;
        t->payload_off = g.tbytes.len;
        t->payload_len = opts->payload_len;
        fh_cbor_put_raw(&g.tbytes, opts->payload, opts->payload_len);
    }
    return 0;
}

int fh_cancel_timer(fh_key *k, int64_t trigger) {
    if (!usable(k, "fh_cancel_timer") || !require_transform("fh_cancel_timer")) {
        return -1;
    }
    if (k->failed) {
        return 0;
    }
    timer_set *ts = (timer_set *)g.tset.p;
    size_t kept = 0;
    for (size_t i = 0; i < g.tset.n; i++) {
        if (ts[i].trigger != trigger) {
            ts[kept++] = ts[i];
        }
    }
    g.tset.n = kept;
    const int64_t *cs = (const int64_t *)g.cancels.p;
    for (size_t i = 0; i < g.cancels.n; i++) {
        if (cs[i] == trigger) {
            return 0;
        }
    }
    int64_t *c = (int64_t *)vec_push(&g.cancels, sizeof(int64_t));
    if (c == NULL) {
        g.oom = true;
        return -1;
    }
    *c = trigger;
    return 0;
}

int fh_fail_key(fh_key *k, const char *msg) {
    if (!usable(k, "fh_fail_key")) {
        return -1;
    }
    if (!k->failed) {
        k->failed = true;
        set_error(&g.key_err, msg);
    }
    return -1;
}

const char *fh_key_error(const fh_key *k) {
    if (k == NULL || k != g.active || !k->failed) {
        return NULL;
    }
    return g.key_err.len ? (const char *)g.key_err.buf : no_message;
}

int fh_fail_batch(fh_key *k, const char *msg) {
    if (!usable(k, "fh_fail_batch")) {
        return -1;
    }
    if (!g.batch_failed) {
        g.batch_failed = true;
        set_error(&g.batch_err, msg);
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Parameters                                                          */
/* ------------------------------------------------------------------ */

const char *fh_params_computation(const fh_params *p) { return p->computation; }
const char *fh_params_kind(const fh_params *p) { return p->kind; }
uint64_t fh_params_partition(const fh_params *p) { return p->partition; }
size_t fh_params_output_count(const fh_params *p) { return p->output_count; }

const char *fh_params_output(const fh_params *p, size_t i) { return i < p->output_count ? p->outputs[i] : NULL; }

size_t fh_param_count(const fh_params *p) { return p->param_count; }

const char *fh_param_name(const fh_params *p, size_t i) { return i < p->param_count ? p->params[i].name : NULL; }

static const param_entry *find_param(const fh_params *p, const char *name) {
    if (name == NULL) {
        return NULL;
    }
    size_t n = strlen(name);
    for (size_t i = 0; i < p->param_count; i++) {
        if (p->params[i].name_len == n && memcmp(p->params[i].name, name, n) == 0) {
            return &p->params[i];
        }
    }
    return NULL;
}

fh_param_type fh_param_type_of(const fh_params *p, const char *name) {
    const param_entry *e = find_param(p, name);
    return e ? e->type : FH_PARAM_MISSING;
}

bool fh_param_has(const fh_params *p, const char *name) { return find_param(p, name) != NULL; }

static const char *const type_names[] = {
    [FH_PARAM_MISSING] = "missing", [FH_PARAM_NULL] = "null",  [FH_PARAM_BOOL] = "bool",
    [FH_PARAM_INT] = "integer",     [FH_PARAM_FLOAT] = "float", [FH_PARAM_TEXT] = "string",
    [FH_PARAM_BYTES] = "bytes",     [FH_PARAM_LIST] = "list",   [FH_PARAM_MAP] = "map",
};

/* param_error starts the message `parameter "name"` in p->err. */
static fh_cbor_writer *param_error(fh_params *p, const char *name) {
    p->err.len = 0;
    p->err.failed = false;
    p->has_err = true;
    tb_str(&p->err, "parameter ");
    tb_quote(&p->err, name, strlen(name));
    return &p->err;
}

/* lookup finds a parameter or records that it is missing. */
static const param_entry *lookup(fh_params *p, const char *name) {
    const param_entry *e = find_param(p, name);
    if (e == NULL) {
        tb_str(param_error(p, name ? name : ""), " is missing");
        (void)tb_cstr(&p->err);
    }
    return e;
}

static int wrong_type(fh_params *p, const char *name, const char *want, const param_entry *e) {
    fh_cbor_writer *w = param_error(p, name);
    tb_str(w, ": expected ");
    tb_str(w, want);
    tb_str(w, ", got ");
    tb_str(w, type_names[e->type]);
    (void)tb_cstr(w);
    return FH_PARAM_ERR_TYPE;
}

int fh_param_string(fh_params *p, const char *name, const char **value, size_t *len) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    if (e->type != FH_PARAM_TEXT) {
        return wrong_type(p, name, "string", e);
    }
    *value = e->text;
    if (len != NULL) {
        *len = e->text_len;
    }
    return 0;
}

int fh_param_int(fh_params *p, const char *name, int64_t *value) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    if (e->type == FH_PARAM_INT) {
        *value = e->i;
        return 0;
    }
    /* 2^63 as a double: the first value past int64. */
    if (e->type == FH_PARAM_FLOAT && e->f == __builtin_trunc(e->f) && e->f >= -9223372036854775808.0 &&
        e->f < 9223372036854775808.0) {
        *value = (int64_t)e->f;
        return 0;
    }
    return wrong_type(p, name, "integer", e);
}

int fh_param_float(fh_params *p, const char *name, double *value) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    if (e->type == FH_PARAM_FLOAT) {
        *value = e->f;
        return 0;
    }
    if (e->type == FH_PARAM_INT) {
        *value = (double)e->i;
        return 0;
    }
    return wrong_type(p, name, "number", e);
}

int fh_param_bool(fh_params *p, const char *name, bool *value) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    if (e->type != FH_PARAM_BOOL) {
        return wrong_type(p, name, "bool", e);
    }
    *value = e->b;
    return 0;
}

int fh_param_raw(fh_params *p, const char *name, const uint8_t **cbor, size_t *len) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    *cbor = e->raw;
    *len = e->raw_len;
    return 0;
}

/* parse_duration is Go's time.ParseDuration; on failure it appends Go's
 * message to err and returns -1. */
static int parse_duration(const char *s, size_t n, int64_t *out, fh_cbor_writer *err) {
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        {"ns", 1ull},
        {"us", 1000ull},
        {"\xc2\xb5s", 1000ull}, /* U+00B5 micro sign */
        {"\xce\xbcs", 1000ull}, /* U+03BC Greek mu */
        {"ms", 1000000ull},
        {"s", 1000000000ull},
        {"m", 60000000000ull},
        {"h", 3600000000000ull},
    };
    const uint64_t limit = (uint64_t)1 << 63;
    const char *orig = s;
    size_t orig_n = n;
    uint64_t d = 0;
    bool neg = false;
    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        s++;
        n--;
    }
    if (n == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (n == 0) {
        goto invalid;
    }
    while (n > 0) {
        uint64_t v = 0, f = 0;
        double scale = 1;
        if (!(s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) {
            goto invalid;
        }
        size_t i = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (v > limit / 10) {
                goto invalid;
            }
            v = v * 10 + (uint64_t)(s[i] - '0');
            if (v > limit) {
                goto invalid;
            }
        }
        bool pre = i > 0;
        s += i;
        n -= i;
        bool post = false;
        if (n > 0 && s[0] == '.') {
            s++;
            n--;
            bool overflow = false;
            for (i = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
                if (overflow) {
                    continue;
                }
                if (f > (limit - 1) / 10) {
                    overflow = true;
                    continue;
                }
                uint64_t y = f * 10 + (uint64_t)(s[i] - '0');
                if (y > limit) {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10;
            }
            post = i > 0;
            s += i;
            n -= i;
        }
        if (!pre && !post) {
            goto invalid;
        }
        for (i = 0; i < n && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9'); i++) {
        }
        if (i == 0) {
            tb_str(err, "time: missing unit in duration ");
            tb_time_quote(err, orig, orig_n);
            return -1;
        }
        uint64_t unit = 0;
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            if (strlen(units[u].name) == i && memcmp(units[u].name, s, i) == 0) {
                unit = units[u].ns;
            }
        }
        if (unit == 0) {
            tb_str(err, "time: unknown unit ");
            tb_time_quote(err, s, i);
            tb_str(err, " in duration ");
            tb_time_quote(err, orig, orig_n);
            return -1;
        }
        s += i;
        n -= i;
        if (v > limit / unit) {
            goto invalid;
        }
        v *= unit;
        if (f > 0) {
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > limit) {
                goto invalid;
            }
        }
        d += v;
        if (d > limit) {
            goto invalid;
        }
    }
    if (neg) {
        *out = (int64_t)(0 - d);
        return 0;
    }
    if (d > limit - 1) {
        goto invalid;
    }
    *out = (int64_t)d;
    return 0;
invalid:
    tb_str(err, "time: invalid duration ");
    tb_time_quote(err, orig, orig_n);
    return -1;
}

int fh_param_duration(fh_params *p, const char *name, int64_t *nanoseconds) {
    const param_entry *e = lookup(p, name);
    if (e == NULL) {
        return FH_PARAM_ERR_MISSING;
    }
    if (e->type == FH_PARAM_INT) {
        *nanoseconds = e->i;
        return 0;
    }
    if (e->type != FH_PARAM_TEXT) {
        return wrong_type(p, name, "duration", e);
    }
    fh_cbor_writer why = {0};
    if (parse_duration(e->text, e->text_len, nanoseconds, &why) != 0) {
        fh_cbor_writer *w = param_error(p, name);
        tb_str(w, ": ");
        tb_bytes(w, why.buf, why.len);
        (void)tb_cstr(w);
        fh_cbor_writer_free(&why);
        return FH_PARAM_ERR_TYPE;
    }
    fh_cbor_writer_free(&why);
    return 0;
}

const char *fh_params_error(const fh_params *p) {
    if (!p->has_err) {
        return NULL;
    }
    return p->err.failed || p->err.buf == NULL ? "" : (const char *)p->err.buf;
}

int fh_params_fail(fh_params *p, const char *msg) {
    set_error(&p->fail, msg);
    p->has_fail = true;
    return -1;
}

/* ------------------------------------------------------------------ */
/* Exports                                                             */
/* ------------------------------------------------------------------ */

#if defined(__wasm__)

static int64_t pack(int status, const uint8_t *out, size_t len) {
    if (status != 0) {
        return status;
    }
    if (out == NULL) {
        return 0;
    }
    return (int64_t)(((uint64_t)(uintptr_t)out << 32) | (uint64_t)(uint32_t)len);
}

/* The exports: thin shims over the entry points. */
void fh__abi_v1(void);
int32_t fh__alloc(int32_t size);
int64_t fh__init(int32_t ptr, int32_t len);
int64_t fh__process(int32_t ptr, int32_t len);

__attribute__((export_name("flowhost_abi_v1"))) void fh__abi_v1(void) {}

__attribute__((export_name("flowhost_alloc"))) int32_t fh__alloc(int32_t size) {
    return (int32_t)(uintptr_t)fh_entry_alloc(size);
}

__attribute__((export_name("flowhost_init"))) int64_t fh__init(int32_t ptr, int32_t len) {
    const uint8_t *out;
    size_t n;
    int status = fh_entry_init((const void *)(uintptr_t)(uint32_t)ptr, len, &out, &n);
    return pack(status, out, n);
}

__attribute__((export_name("flowhost_process"))) int64_t fh__process(int32_t ptr, int32_t len) {
    const uint8_t *out;
    size_t n;
    int status = fh_entry_process((const void *)(uintptr_t)(uint32_t)ptr, len, &out, &n);
    return pack(status, out, n);
}

#endif

/* ------------------------------------------------------------------ */
/* Event-time windows (sdk/WINDOWS.md, a port of sdk/go/window.go)     */
/* ------------------------------------------------------------------ */

enum { WIN_TUMBLING = 1, WIN_HOPPING = 2, WIN_SESSION = 3 };

/* The window state's first byte (sdk/WINDOWS.md, "State encoding"). */
#define WIN_STATE_VERSION 1

static const char win_state_error[] = "flowhost: the key's state is not a window state: ";

/* Go's int64 arithmetic wraps; C's signed overflow is undefined, so the
 * window bounds are computed in uint64 to give the same values. */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

fh_window_spec fh_tumbling(int64_t size) {
    fh_window_spec s = {0};
    if (size > 0) {
        s.kind = WIN_TUMBLING;
        s.size = size;
    }
    return s;
}

fh_window_spec fh_hopping(int64_t size, int64_t advance) {
    fh_window_spec s = {0};
    if (advance > 0 && size >= advance) {
        s.kind = WIN_HOPPING;
        s.size = size;
        s.advance = advance;
    }
    return s;
}

fh_window_spec fh_session(int64_t gap) {
    fh_window_spec s = {0};
    if (gap > 0) {
        s.kind = WIN_SESSION;
        s.gap = gap;
    }
    return s;
}

static int win_misuse(const char *why) {
    fh_log(FH_LOG_ERROR, why);
    return -1;
}

int fh_windows_init(fh_windows *w, fh_window_spec spec, const fh_aggregator *agg, const char *output, const char *late) {
    if (w == NULL) {
        return win_misuse("flowhost: fh_windows_init needs an fh_windows");
    }
    memset(w, 0, sizeof *w);
    if (spec.kind < WIN_TUMBLING || spec.kind > WIN_SESSION) {
        return win_misuse("flowhost: fh_windows_init needs a spec from fh_tumbling, fh_hopping or fh_session with valid arguments");
    }
    if (agg == NULL || agg->add == NULL) {
        return win_misuse("flowhost: fh_windows_init needs an aggregator with add");
    }
    if (spec.kind == WIN_SESSION && agg->merge == NULL) {
        return win_misuse("flowhost: session windows need an aggregator with merge");
    }
    if (output == NULL || late == NULL || *output == 0 || *late == 0) {
        return win_misuse("flowhost: fh_windows_init needs an output stream and a late stream");
    }
    w->output = strdup(output);
    w->late = strdup(late);
    if (w->output == NULL || w->late == NULL) {
        fh_windows_free(w);
        return win_misuse("flowhost: fh_windows_init: out of memory");
    }
    w->spec = spec;
    w->agg = *agg;
    return 0;
}

int fh_windows_set_lateness(fh_windows *w, int64_t lateness) {
    if (w == NULL || lateness < 0) {
        return win_misuse("flowhost: allowed lateness must not be negative");
    }
    w->lateness = lateness;
    return 0;
}

void fh_windows_free(fh_windows *w) {
    if (w == NULL) {
        return;
    }
    free(w->output);
    free(w->late);
    free(w->set_here);
    memset(w, 0, sizeof *w);
}

/* open_window is one window still waiting for its timer. */
typedef struct open_window {
    int64_t start, end;
    fh_cbor_writer acc;
} open_window;

/* win_state is what fh_windows keeps in a key's state. */
typedef struct win_state {
    int64_t fired_through; /* INT64_MIN: none */
    open_window *open;
    size_t n, cap;
} win_state;

static void win_state_free(win_state *s) {
    for (size_t i = 0; i < s->n; i++) {
        fh_cbor_writer_free(&s->open[i].acc);
    }
    free(s->open);
    s->open = NULL;
    s->n = s->cap = 0;
}

/* win_push appends a window (taking its accumulator), or returns NULL. */
static open_window *win_push(win_state *s, int64_t start, int64_t end) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4;
        open_window *o = realloc(s->open, cap * sizeof *o);
        if (o == NULL) {
            return NULL;
        }
        s->open = o;
        s->cap = cap;
    }
    open_window *o = &s->open[s->n++];
    memset(o, 0, sizeof *o);
    o->start = start;
    o->end = end;
    return o;
}

/* get_uvarint and get_varint read Go's encoding/binary varints with Go's
 * result: n > 0 bytes read, 0 when the buffer ends first, < 0 overflow. */
static int get_uvarint(const uint8_t *p, size_t len, uint64_t *v) {
    uint64_t x = 0;
    unsigned s = 0;
    for (size_t i = 0; i < len; i++) {
        if (i == 10) {
            return -(int)(i + 1);
        }
        uint8_t b = p[i];
        if (b < 0x80) {
            if (i == 9 && b > 1) {
                return -(int)(i + 1);
            }
            *v = x | (uint64_t)b << s;
            return (int)(i + 1);
        }
        x |= (uint64_t)(b & 0x7f) << s;
        s += 7;
    }
    return 0;
}

static int get_varint(const uint8_t *p, size_t len, int64_t *v) {
    uint64_t ux = 0;
    int n = get_uvarint(p, len, &ux);
    int64_t x = (int64_t)(ux >> 1);
    if (ux & 1) {
        x = ~x;
    }
    *v = x;
    return n;
}

static void put_uvarint(fh_cbor_writer *w, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)v | 0x80;
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    fh_cbor_put_raw(w, b, n);
}

static void put_varint(fh_cbor_writer *w, int64_t v) {
    uint64_t ux = (uint64_t)v << 1;
    if (v < 0) {
        ux = ~ux;
    }
    put_uvarint(w, ux);
}

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int by_end_start(const void *x, const void *y) {
    const open_window *a = x, *b = y;
    int c = cmp_i64(a->end, b->end);
    return c ? c : cmp_i64(a->start, b->start);
}

/* win_decode reads a state (has: the key has one) into s, or returns the
 * reason it is not a window state (Go's texts). NULL with s->open NULL
 * and no memory is "out of memory". */
static const char *win_decode(bool has, const uint8_t *b, size_t len, win_state *s, bool *oom) {
    memset(s, 0, sizeof *s);
    s->fired_through = INT64_MIN;
    *oom = false;
    if (!has) {
        return NULL;
    }
    if (len == 0 || b[0] != WIN_STATE_VERSION) {
        return "missing or unknown version byte";
    }
    b++, len--;
    int n = get_varint(b, len, &s->fired_through);
    if (n <= 0) {
        return "bad fired-through";
    }
    b += n, len -= (size_t)n;
    uint64_t count;
    n = get_uvarint(b, len, &count);
    if (n <= 0 || count > len) {
        return "bad window count";
    }
    b += n, len -= (size_t)n;
    for (uint64_t i = 0; i < count; i++) {
        int64_t start, end;
        if ((n = get_varint(b, len, &start)) <= 0) {
            win_state_free(s);
            return "bad window start";
        }
        b += n, len -= (size_t)n;
        if ((n = get_varint(b, len, &end)) <= 0) {
            win_state_free(s);
            return "bad window end";
        }
        b += n, len -= (size_t)n;
        uint64_t size;
        n = get_uvarint(b, len, &size);
        if (n <= 0 || size > len - (size_t)n) {
            win_state_free(s);
            return "bad accumulator length";
        }
        b += n, len -= (size_t)n;
        /* Sorted and distinct, as win_encode writes them (Go's windowBefore). */
        if (s->n > 0 && by_end_start(&s->open[s->n - 1], &(open_window){.start = start, .end = end}) >= 0) {
            win_state_free(s);
            return "windows out of (end, start) order or repeated";
        }
        open_window *o = win_push(s, start, end);
        if (o == NULL) {
            win_state_free(s);
            *oom = true;
            return NULL;
        }
        fh_cbor_put_raw(&o->acc, b, (size_t)size);
        if (o->acc.failed) {
            win_state_free(s);
            *oom = true;
            return NULL;
        }
        b += size, len -= (size_t)size;
    }
    if (len != 0) {
        win_state_free(s);
        return "trailing bytes";
    }
    return NULL;
}

static void win_encode(const win_state *s, fh_cbor_writer *out) {
    uint8_t v = WIN_STATE_VERSION;
    fh_cbor_put_raw(out, &v, 1);
    put_varint(out, s->fired_through);
    put_uvarint(out, s->n);
    for (size_t i = 0; i < s->n; i++) {
        put_varint(out, s->open[i].start);
        put_varint(out, s->open[i].end);
        put_uvarint(out, s->open[i].acc.len);
        fh_cbor_put_raw(out, s->open[i].acc.buf, s->open[i].acc.len);
    }
}

/* floor_div is t/d rounded towards minus infinity (d > 0), for windows
 * before 1970. */
static int64_t floor_div(int64_t t, int64_t d) {
    int64_t q = t / d;
    if (t % d != 0 && t < 0) {
        q--;
    }
    return q;
}

static int by_start_end(const void *x, const void *y) {
    const open_window *a = x, *b = y;
    int c = cmp_i64(a->start, b->start);
    return c ? c : cmp_i64(a->end, b->end);
}

static void sort_open(win_state *s) {
    if (s->n > 1) {
        qsort(s->open, s->n, sizeof *s->open, by_end_start);
    }
}

/* win_closed reports whether a window ending at end has fired for the key. */
static bool win_closed(const fh_windows *w, const win_state *s, int64_t end) {
    return s->fired_through != INT64_MIN && wadd(end, w->lateness) <= s->fired_through;
}

static int win_set_timer(fh_windows *w, fh_key *k, int64_t trigger) {
    if (w->set_here_len == w->set_here_cap) {
        size_t cap = w->set_here_cap ? w->set_here_cap * 2 : 8;
        int64_t *t = realloc(w->set_here, cap * sizeof *t);
        if (t == NULL) {
            return -1;
        }
        w->set_here = t;
        w->set_here_cap = cap;
    }
    w->set_here[w->set_here_len++] = trigger;
    return fh_set_timer(k, trigger);
}

static bool set_here(const fh_windows *w, int64_t trigger) {
    for (size_t i = 0; i < w->set_here_len; i++) {
        if (w->set_here[i] == trigger) {
            return true;
        }
    }
    return false;
}

/* win_init_acc fills a new window's accumulator; -1 fails the key. */
static int win_init_acc(fh_windows *w, fh_cbor_writer *acc) {
    if (w->agg.init != NULL && w->agg.init(acc, w->agg.ctx) != 0) {
        return -1;
    }
    return acc->failed ? -1 : 0;
}

static int win_add_acc(fh_windows *w, fh_cbor_writer *acc, const fh_message *m) {
    if (w->agg.add(acc, m, w->agg.ctx) != 0) {
        return -1;
    }
    return acc->failed ? -1 : 0;
}

/* win_add puts m into its windows: 1 added, 0 late, -1 failed. */
static int win_add(fh_windows *w, fh_key *k, win_state *s, const fh_message *m) {
    int64_t t = m->event_ts;
    int64_t size = w->spec.size, advance = w->spec.kind == WIN_TUMBLING ? size : w->spec.advance;
    int added = 0;
    for (int64_t start = wmul(floor_div(t, advance), advance); start > wsub(t, size); start = wsub(start, advance)) {
        int64_t end = wadd(start, size);
        if (win_closed(w, s, end)) {
            break; /* earlier windows end earlier: closed too */
        }
        open_window *o = NULL;
        for (size_t i = 0; i < s->n; i++) {
            if (s->open[i].start == start) {
                o = &s->open[i];
                break;
            }
        }
        if (o == NULL) {
            if ((o = win_push(s, start, end)) == NULL || win_init_acc(w, &o->acc) != 0 ||
                win_set_timer(w, k, wadd(end, w->lateness)) != 0) {
                return -1;
            }
        }
        if (win_add_acc(w, &o->acc, m) != 0) {
            return -1;
        }
        added = 1;
    }
    sort_open(s);
    return added;
}

static int win_add_session(fh_windows *w, fh_key *k, win_state *s, const fh_message *m) {
    int64_t t = m->event_ts;
    open_window n = {.start = t, .end = wadd(t, w->spec.gap)};
    if (win_closed(w, s, n.end)) {
        return 0;
    }
    if (win_init_acc(w, &n.acc) != 0 || win_add_acc(w, &n.acc, m) != 0) {
        fh_cbor_writer_free(&n.acc);
        return -1;
    }
    /* Move the windows n overlaps to the end of s->open, n after them. */
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++) {
        open_window o = s->open[i];
        if (!(o.start < n.end && n.start < o.end)) {
            s->open[i] = s->open[kept];
            s->open[kept++] = o;
        }
    }
    size_t old = s->n - kept;
    open_window *slot = win_push(s, n.start, n.end);
    if (slot == NULL) {
        fh_cbor_writer_free(&n.acc);
        return -1;
    }
    *slot = n;
    open_window *merged = &s->open[kept];
    size_t count = old + 1;
    /* The cancels look at the overlapped windows as they were. */
    int64_t end = n.end;
    for (size_t i = 0; i < old; i++) {
        if (merged[i].end > end) {
            end = merged[i].end;
        }
    }
    for (size_t i = 0; i < old; i++) {
        int64_t trigger = wadd(merged[i].end, w->lateness);
        if (merged[i].end != end && !set_here(w, trigger) && fh_cancel_timer(k, trigger) != 0) {
            return -1;
        }
    }
    /* Stable, like Go's sort of these few windows (insertion sort below
     * 13 elements), so that a merge that is not commutative folds in the
     * Go helper's order; at most three windows meet here. */
    for (size_t i = 1; i < count; i++) {
        for (size_t j = i; j > 0 && by_start_end(&merged[j - 1], &merged[j]) > 0; j--) {
            open_window x = merged[j];
            merged[j] = merged[j - 1];
            merged[j - 1] = x;
        }
    }
    open_window *into = &merged[0];
    int rc = 0;
    for (size_t i = 1; i < count; i++) {
        if (rc == 0 && (w->agg.merge(&into->acc, merged[i].acc.buf, merged[i].acc.len, w->agg.ctx) != 0 || into->acc.failed)) {
            rc = -1;
        }
        if (merged[i].start < into->start) {
            into->start = merged[i].start;
        }
        if (merged[i].end > into->end) {
            into->end = merged[i].end;
        }
        fh_cbor_writer_free(&merged[i].acc);
    }
    s->n = kept + 1;
    if (rc != 0 || win_set_timer(w, k, wadd(end, w->lateness)) != 0) {
        return -1;
    }
    sort_open(s);
    return 1;
}

static int win_emit(fh_windows *w, fh_key *k, const open_window *o, const fh_timer *t, fh_cbor_writer *out) {
    const uint8_t *payload = o->acc.buf;
    size_t len = o->acc.len;
    if (w->agg.result != NULL) {
        out->len = 0;
        fh_window win = {.start = o->start, .end = o->end};
        win.key = fh_key_text(k, &win.key_len);
        if (w->agg.result(&win, o->acc.buf, o->acc.len, out, w->agg.ctx) != 0 || out->failed) {
            return -1;
        }
        payload = out->buf, len = out->len;
    }
    fh_emit_opts opts = {.has_event_ts = true, .event_ts = wsub(o->end, 1), .parents = &t->input, .parent_count = 1};
    return fh_emit_with(k, w->output, payload, len, &opts);
}

int fh_windows_process(fh_windows *w, fh_key *k) {
    if (w == NULL || w->output == NULL) {
        return win_misuse("flowhost: fh_windows_process needs windows set up by fh_windows_init");
    }
    const uint8_t *data = NULL;
    size_t len = 0;
    bool has = fh_state(k, &data, &len);
    win_state s;
    bool oom;
    const char *bad = win_decode(has, data, len, &s, &oom);
    if (bad != NULL || oom) {
        fh_cbor_writer msg = {0};
        fh_cbor_put_raw(&msg, oom ? "flowhost: windows: out of memory" : win_state_error, strlen(oom ? "flowhost: windows: out of memory" : win_state_error));
        if (bad != NULL) {
            fh_cbor_put_raw(&msg, bad, strlen(bad));
        }
        fh_cbor_put_raw(&msg, "", 1);
        fh_fail_key(k, msg.failed ? win_state_error : (const char *)msg.buf);
        fh_cbor_writer_free(&msg);
        return -1;
    }
    w->set_here_len = 0;
    fh_cbor_writer out = {0};
    int rc = 0;
    const fh_timer *t;
    while (rc == 0 && (t = fh_next_timer(k)) != NULL) {
        size_t kept = 0;
        for (size_t i = 0; i < s.n; i++) {
            open_window o = s.open[i];
            if (rc == 0 && wadd(o.end, w->lateness) <= t->trigger_ts) {
                /* Only a timer that closes a window counts: a session's
                 * stale timer closes nothing. */
                if (t->trigger_ts > s.fired_through) {
                    s.fired_through = t->trigger_ts;
                }
                rc = win_emit(w, k, &o, t, &out);
                fh_cbor_writer_free(&o.acc);
            } else {
                s.open[kept++] = o;
            }
        }
        s.n = kept;
    }
    fh_clear_current(k);
    const fh_message *m;
    while (rc == 0 && (m = fh_next_message(k)) != NULL) {
        int added = w->spec.kind == WIN_SESSION ? win_add_session(w, k, &s, m) : win_add(w, k, &s, m);
        if (added < 0) {
            rc = -1;
            if (fh_key_error(k) == NULL) {
                fh_fail_key(k, "flowhost: windows: the aggregator failed or memory ran out");
            }
        } else if (added == 0) {
            fh_emit_opts opts = {.parents = &m->input, .parent_count = 1};
            rc = fh_emit_with(k, w->late, m->payload, m->payload_len, &opts);
        }
    }
    fh_clear_current(k);
    if (rc == 0) {
        if (s.n == 0 && s.fired_through == INT64_MIN) {
            rc = fh_delete_state(k);
        } else {
            out.len = 0;
            win_encode(&s, &out);
            rc = out.failed ? fh_fail_key(k, "flowhost: windows: out of memory") : fh_set_state(k, out.buf, out.len);
        }
    }
    fh_cbor_writer_free(&out);
    win_state_free(&s);
    return rc;
}

/* ---------------------------------------------------------------------
 * Joins (sdk/JOINS.md), ports of sdk/go/join.go.
 * ------------------------------------------------------------------ */

#define JOIN_STATE_VERSION 1
#define JOIN_KIND_INTERVAL 'I'
#define JOIN_KIND_ENRICH 'E'

static const char join_state_error[] = "flowhost: the key's state is not a join state";

/* join_reader reads a join state like the Go SDK's stateReader: the first
 * failure is kept, with its field and byte offset, and later reads do
 * nothing. */
typedef struct join_reader {
    const uint8_t *b;
    size_t len, off;
    bool failed;
    char err[160];
} join_reader;

static void jr_fail(join_reader *r, const char *field) {
    if (!r->failed) {
        r->failed = true;
        snprintf(r->err, sizeof r->err, "%s: %s at byte %zu", join_state_error, field, r->off);
    }
}

static uint8_t jr_byte(join_reader *r, const char *field) {
    if (r->failed) {
        return 0;
    }
    if (r->off >= r->len) {
        char f[64];
        snprintf(f, sizeof f, "missing %s", field);
        jr_fail(r, f);
        return 0;
    }
    return r->b[r->off++];
}

static int64_t jr_varint(join_reader *r, const char *field) {
    int64_t v = 0;
    if (r->failed) {
        return 0;
    }
    int n = get_varint(r->b + r->off, r->len - r->off, &v);
    if (n <= 0) {
        char f[64];
        snprintf(f, sizeof f, "bad %s", field);
        jr_fail(r, f);
        return 0;
    }
    r->off += (size_t)n;
    return v;
}

static uint64_t jr_uvarint(join_reader *r, const char *field) {
    uint64_t v = 0;
    if (r->failed) {
        return 0;
    }
    int n = get_uvarint(r->b + r->off, r->len - r->off, &v);
    if (n <= 0) {
        char f[64];
        snprintf(f, sizeof f, "bad %s", field);
        jr_fail(r, f);
        return 0;
    }
    r->off += (size_t)n;
    return v;
}

/* jr_bytes points *p at a length-prefixed field inside the state. */
static size_t jr_bytes(join_reader *r, const char *field, const uint8_t **p) {
    static const uint8_t none[1];
    *p = none;
    size_t start = r->off;
    char f[64];
    snprintf(f, sizeof f, "%s length", field);
    uint64_t size = jr_uvarint(r, f);
    if (r->failed) {
        return 0;
    }
    if (size > r->len - r->off) {
        r->off = start; /* name the length, not what follows it */
        snprintf(f, sizeof f, "%s length past the end", field);
        jr_fail(r, f);
        return 0;
    }
    *p = r->b + r->off;
    r->off += (size_t)size;
    return (size_t)size;
}

/* quote_byte writes Go's %q of a byte (a rune literal) into dst. */
static void quote_byte(char *dst, size_t cap, uint8_t c) {
    static const char esc[] = "\a\b\f\n\r\t\v";
    static const char name[] = "abfnrtv";
    const char *e = c != 0 ? strchr(esc, c) : NULL;
    if (c == '\'' || c == '\\') {
        snprintf(dst, cap, "'\\%c'", c);
    } else if (e != NULL) {
        snprintf(dst, cap, "'\\%c'", name[e - esc]);
    } else if (c >= 0x20 && c < 0x7f) {
        snprintf(dst, cap, "'%c'", c);
    } else if (c < 0x80) {
        snprintf(dst, cap, "'\\x%02x'", c);
    } else if (c <= 0xa0 || c == 0xad) {
        snprintf(dst, cap, "'\\u%04x'", c);
    } else {
        snprintf(dst, cap, "'%c%c'", 0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    }
}

/* jr_start starts r on the state b of len bytes and reads its header:
 * the version, and the kind a decoder of that kind expects. */
static void jr_start(join_reader *r, const uint8_t *b, size_t len, uint8_t kind) {
    memset(r, 0, sizeof *r);
    r->b = b;
    r->len = len;
    char f[64];
    uint8_t v = jr_byte(r, "version");
    if (!r->failed && v != JOIN_STATE_VERSION) {
        r->off--;
        snprintf(f, sizeof f, "unknown version %u", (unsigned)v);
        jr_fail(r, f);
    }
    uint8_t k = jr_byte(r, "kind");
    if (!r->failed && k != kind) {
        char got[16], want[16];
        r->off--;
        quote_byte(got, sizeof got, k);
        quote_byte(want, sizeof want, kind);
        snprintf(f, sizeof f, "kind %s, want %s", got, want);
        jr_fail(r, f);
    }
}

static void jr_end(join_reader *r) {
    if (!r->failed && r->off != r->len) {
        jr_fail(r, "trailing bytes");
    }
}

static void put_len_bytes(fh_cbor_writer *w, const void *b, size_t n) {
    put_uvarint(w, n);
    fh_cbor_put_raw(w, b, n);
}

static int join_misuse(const char *why) {
    fh_log(FH_LOG_ERROR, why);
    return -1;
}

/* join_fail fails k with the text in msg, which may hold NUL bytes (a
 * message_id is any text), or fallback when memory ran out building it. */
static int join_fail(fh_key *k, fh_cbor_writer *msg, const char *fallback) {
    if (msg->failed || msg->len == 0 || !usable(k, "fh_fail_key")) {
        fh_fail_key(k, fallback);
    } else if (!k->failed) {
        k->failed = true;
        g.key_err.len = 0;
        g.key_err.failed = false;
        tb_sanitized(&g.key_err, (const char *)msg->buf, msg->len);
        (void)tb_cstr(&g.key_err);
    }
    fh_cbor_writer_free(msg);
    return -1;
}

/* join_other_stream fails k for message m of neither stream a nor b, with
 * the Go SDK's text. */
static int join_other_stream(fh_key *k, const fh_message *m, const char *what_a, const char *a, const char *what_b,
                             const char *b) {
    fh_cbor_writer msg = {0};
    fh_cbor_put_raw(&msg, "message ", 8);
    fh_cbor_put_raw(&msg, m->id, m->id_len);
    fh_cbor_put_raw(&msg, ": stream ", 9);
    const char *parts[] = {NULL, " is neither the ", what_a, " stream ", a, " nor the ", what_b, " stream ", b, " of the join"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char *s = i == 0 ? m->stream : parts[i];
        size_t n = i == 0 ? m->stream_len : strlen(s);
        if (i == 0 || i == 4 || i == 8) {
            size_t need = fh_quote(NULL, 0, s, n);
            uint8_t *dst = fh_cbor_reserve(&msg, need + 1); /* advances len */
            if (dst != NULL) {
                fh_quote((char *)dst, need + 1, s, n);
                msg.len--; /* drop fh_quote's NUL */
            }
        } else {
            fh_cbor_put_raw(&msg, s, n);
        }
    }
    return join_fail(k, &msg, "flowhost: join: a message of another stream");
}

static bool stream_is(const fh_message *m, const char *s) {
    size_t n = strlen(s);
    return m->stream_len == n && memcmp(m->stream, s, n) == 0;
}

/* held_record is one record waiting in an interval join's state. */
typedef struct held_record {
    bool right, matched;
    fh_join_record rec;
} held_record;

typedef struct held_list {
    held_record *r;
    size_t n, cap;
} held_list;

static held_record *held_push(held_list *h) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        held_record *r = realloc(h->r, cap * sizeof *r);
        if (r == NULL) {
            return NULL;
        }
        h->r = r;
        h->cap = cap;
    }
    held_record *r = &h->r[h->n++];
    memset(r, 0, sizeof *r);
    return r;
}

int fh_interval_join_init(fh_interval_join *j, const char *left, const char *right, int64_t lower, int64_t upper,
                          const fh_interval_funcs *f, const char *output, const char *expired) {
    if (j == NULL) {
        return join_misuse("flowhost: fh_interval_join_init needs an fh_interval_join");
    }
    memset(j, 0, sizeof *j);
    if (lower > upper) {
        return join_misuse("flowhost: fh_interval_join_init needs lower <= upper");
    }
    if (lower == INT64_MIN) {
        // -lower must exist for a right record's expiry.
        return join_misuse("flowhost: fh_interval_join_init needs lower > INT64_MIN");
    }
    if (f == NULL || f->join == NULL) {
        return join_misuse("flowhost: fh_interval_join_init needs a join function");
    }
    if (left == NULL || right == NULL || output == NULL || expired == NULL || !*left || !*right || !*output || !*expired) {
        return join_misuse("flowhost: fh_interval_join_init needs left, right, output and expired streams");
    }
    if (strcmp(left, right) == 0) {
        return join_misuse("flowhost: fh_interval_join_init needs two different input streams");
    }
    j->left = strdup(left);
    j->right = strdup(right);
    j->output = strdup(output);
    j->expired = strdup(expired);
    if (j->left == NULL || j->right == NULL || j->output == NULL || j->expired == NULL) {
        fh_interval_join_free(j);
        return join_misuse("flowhost: fh_interval_join_init: out of memory");
    }
    j->lower = lower;
    j->upper = upper;
    j->f = *f;
    return 0;
}

void fh_interval_join_free(fh_interval_join *j) {
    if (j == NULL) {
        return;
    }
    free(j->left);
    free(j->right);
    free(j->output);
    free(j->expired);
    memset(j, 0, sizeof *j);
}

/* interval_decode reads an interval state into h (records pointing into
 * b), or returns false with r->err set (r->failed) or, when memory ran
 * out, r->failed false. */
static bool interval_decode(const uint8_t *b, size_t len, held_list *h, join_reader *r) {
    jr_start(r, b, len, JOIN_KIND_INTERVAL);
    uint64_t n = jr_uvarint(r, "record count");
    if (!r->failed && n > len) {
        jr_fail(r, "record count larger than the state");
    }
    for (uint64_t i = 0; !r->failed && i < n; i++) {
        held_record *x = held_push(h);
        if (x == NULL) {
            return false;
        }
        char f[64];
        uint8_t s = jr_byte(r, "side");
        if (!r->failed && s > 1) {
            r->off--;
            snprintf(f, sizeof f, "record %" PRIu64 ": side %u, want 0 or 1", i, (unsigned)s);
            jr_fail(r, f);
        }
        x->right = s == 1;
        uint8_t m = jr_byte(r, "matched");
        if (!r->failed && m > 1) {
            r->off--;
            snprintf(f, sizeof f, "record %" PRIu64 ": matched %u, want 0 or 1", i, (unsigned)m);
            jr_fail(r, f);
        }
        x->matched = m == 1;
        x->rec.event_ts = jr_varint(r, "ts");
        const uint8_t *id;
        x->rec.id_len = jr_bytes(r, "message_id", &id);
        x->rec.id = (const char *)id;
        x->rec.payload_len = jr_bytes(r, "payload", &x->rec.payload);
        x->rec.input = -1;
    }
    jr_end(r);
    return !r->failed;
}

static void interval_encode(const held_list *h, fh_cbor_writer *out) {
    uint8_t head[2] = {JOIN_STATE_VERSION, JOIN_KIND_INTERVAL};
    fh_cbor_put_raw(out, head, 2);
    put_uvarint(out, h->n);
    for (size_t i = 0; i < h->n; i++) {
        const held_record *x = &h->r[i];
        uint8_t flags[2] = {x->right, x->matched};
        fh_cbor_put_raw(out, flags, 2);
        put_varint(out, x->rec.event_ts);
        put_len_bytes(out, x->rec.id, x->rec.id_len);
        put_len_bytes(out, x->rec.payload, x->rec.payload_len);
    }
}

/* sat_add1 is Go's satAdd: a+b+1 clamped to int64 (wrapping where Go
 * wraps, so that the values are the Go helper's). */
static int64_t sat_add1(int64_t a, int64_t b) {
    int64_t s = wadd(a, b);
    if (b > 0 && s < a) {
        return INT64_MAX;
    }
    if (b < 0 && s > a) {
        return INT64_MIN;
    }
    if (s == INT64_MAX) {
        return s;
    }
    return s + 1;
}

static int64_t join_expiry(const fh_interval_join *j, const held_record *h) {
    if (h->right) {
        return sat_add1(h->rec.event_ts, wsub(0, j->lower));
    }
    return sat_add1(h->rec.event_ts, j->upper);
}

static bool join_in_range(const fh_interval_join *j, int64_t tl, int64_t tr) {
    int64_t d = wsub(tr, tl);
    if ((tr >= tl) != (d >= 0)) {
        return false; /* the difference overflows int64: out of any range */
    }
    return j->lower <= d && d <= j->upper;
}

// triggers is a growable list of expiry triggers.
typedef struct {
    int64_t *v;
    size_t n, cap;
} triggers;

static bool triggers_add(triggers *t, int64_t x) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        int64_t *v = realloc(t->v, cap * sizeof *v);
        if (v == NULL) {
            return false;
        }
        t->v = v, t->cap = cap;
    }
    t->v[t->n++] = x;
    return true;
}

static bool triggers_has(const triggers *t, int64_t x) {
    for (size_t i = 0; i < t->n; i++) {
        if (t->v[i] == x) {
            return true;
        }
    }
    return false;
}

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

// interval_set_timers sets the timer of each touched trigger with the event
// time it must hold the output watermark at: the oldest held record of that
// expiry that has not matched (sdk/go/join.go, setTimers). A timer from an
// earlier call (in reset) is cancelled first, since the host keeps the
// smallest event time of one trigger; setting it again at the same trigger
// does not move where it fires.
static int interval_set_timers(fh_interval_join *j, fh_key *k, const held_list *held, triggers *touched,
                               const triggers *reset) {
    if (touched->n > 1) {
        qsort(touched->v, touched->n, sizeof *touched->v, cmp_int64);
    }
    for (size_t i = 0; i < touched->n; i++) {
        int64_t trigger = touched->v[i];
        if (i > 0 && touched->v[i - 1] == trigger) {
            continue;
        }
        if (triggers_has(reset, trigger) && fh_cancel_timer(k, trigger) != 0) {
            return -1;
        }
        int64_t hold = 0;
        bool holds = false;
        for (size_t h = 0; h < held->n; h++) {
            const held_record *r = &held->r[h];
            if (!r->matched && join_expiry(j, r) == trigger && (!holds || r->rec.event_ts < hold)) {
                hold = r->rec.event_ts, holds = true;
            }
        }
        int rc;
        if (holds) {
            fh_timer_opts topts = {.has_event_ts = true, .event_ts = hold};
            rc = fh_set_timer_with(k, trigger, &topts);
        } else {
            rc = fh_set_timer(k, trigger); // event_ts = trigger: in the future, it holds nothing back
        }
        if (rc != 0) {
            return -1;
        }
    }
    return 0;
}

static int interval_messages(fh_interval_join *j, fh_key *k, held_list *held, bool *changed, fh_cbor_writer *out,
                             triggers *touched, triggers *reset);

static int interval_run(fh_interval_join *j, fh_key *k, held_list *held, bool *changed, fh_cbor_writer *out) {
    const fh_timer *t;
    while ((t = fh_next_timer(k)) != NULL) {
        size_t kept = 0;
        for (size_t i = 0; i < held->n; i++) {
            held_record h = held->r[i];
            if (join_expiry(j, &h) > t->trigger_ts) {
                held->r[kept++] = h;
                continue;
            }
            *changed = true;
            if (!h.matched) {
                const uint8_t *payload = h.rec.payload;
                size_t len = h.rec.payload_len;
                if (j->f.expired != NULL) {
                    out->len = 0;
                    if (j->f.expired(&h.rec, out, j->f.ctx) != 0 || out->failed) {
                        fh_clear_current(k);
                        return -1;
                    }
                    payload = out->buf, len = out->len;
                }
                fh_emit_opts opts = {.has_event_ts = true, .event_ts = h.rec.event_ts, .parents = &t->input, .parent_count = 1};
                if (fh_emit_with(k, j->expired, payload, len, &opts) != 0) {
                    fh_clear_current(k);
                    return -1;
                }
            }
        }
        held->n = kept;
    }
    // touched are the expiry triggers whose hold this call changed; reset
    // those of them that have a timer from an earlier call.
    triggers touched = {0}, reset = {0};
    int rc = interval_messages(j, k, held, changed, out, &touched, &reset);
    if (rc == 0 && interval_set_timers(j, k, held, &touched, &reset) != 0) {
        fh_clear_current(k);
        rc = -1;
    }
    free(touched.v);
    free(reset.v);
    return rc;
}

static int interval_messages(fh_interval_join *j, fh_key *k, held_list *held, bool *changed, fh_cbor_writer *out,
                             triggers *touched, triggers *reset) {
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        bool right;
        if (stream_is(m, j->left)) {
            right = false;
        } else if (stream_is(m, j->right)) {
            right = true;
        } else {
            fh_clear_current(k);
            return join_other_stream(k, m, "left", j->left, "right", j->right);
        }
        held_record n = {.right = right,
                         .rec = {.id = m->id, .id_len = m->id_len, .stream = m->stream, .stream_len = m->stream_len,
                                 .event_ts = m->event_ts, .payload = m->payload, .payload_len = m->payload_len, .input = m->input}};
        for (size_t i = 0; i < held->n; i++) {
            held_record *h = &held->r[i];
            if (h->right == right) {
                continue;
            }
            fh_join_pair p = {.left = right ? h->rec : n.rec, .right = right ? n.rec : h->rec};
            if (!join_in_range(j, p.left.event_ts, p.right.event_ts)) {
                continue;
            }
            if (!h->matched) {
                if (!triggers_add(touched, join_expiry(j, h)) ||
                    (h->rec.input < 0 && !triggers_add(reset, join_expiry(j, h)))) { // its pending timer still holds h's time
                    fh_clear_current(k);
                    return -1;
                }
            }
            h->matched = n.matched = true;
            uint32_t parents[2] = {m->input, 0};
            size_t np = 1;
            if (h->rec.input >= 0) {
                parents[1] = (uint32_t)h->rec.input;
                np = 2;
                if (parents[1] < parents[0]) {
                    parents[1] = parents[0];
                    parents[0] = (uint32_t)h->rec.input;
                }
            }
            p.key = fh_key_text(k, &p.key_len);
            out->len = 0;
            if (j->f.join(&p, out, j->f.ctx) != 0 || out->failed) {
                fh_clear_current(k);
                return -1;
            }
            int64_t ts = p.left.event_ts > p.right.event_ts ? p.left.event_ts : p.right.event_ts;
            fh_emit_opts opts = {.has_event_ts = true, .event_ts = ts, .parents = parents, .parent_count = np};
            if (fh_emit_with(k, j->output, out->buf, out->len, &opts) != 0) {
                fh_clear_current(k);
                return -1;
            }
        }
        held_record *x = held_push(held);
        if (x == NULL) {
            fh_clear_current(k);
            return -1;
        }
        *x = n;
        *changed = true;
        if (!triggers_add(touched, join_expiry(j, x))) {
            fh_clear_current(k);
            return -1;
        }
    }
    return 0;
}

int fh_interval_join_process(fh_interval_join *j, fh_key *k) {
    if (j == NULL || j->left == NULL) {
        return join_misuse("flowhost: fh_interval_join_process needs a join set up by fh_interval_join_init");
    }
    const uint8_t *data = NULL;
    size_t len = 0;
    bool had = fh_state(k, &data, &len);
    held_list held = {0};
    if (had) {
        join_reader r;
        if (!interval_decode(data, len, &held, &r)) {
            free(held.r);
            return fh_fail_key(k, r.failed ? r.err : "flowhost: interval join: out of memory"), -1;
        }
        for (size_t i = 0; i < held.n; i++) {
            const char *s = held.r[i].right ? j->right : j->left;
            held.r[i].rec.stream = s;
            held.r[i].rec.stream_len = strlen(s);
        }
    }
    fh_cbor_writer out = {0};
    bool changed = false;
    int rc = interval_run(j, k, &held, &changed, &out);
    if (rc != 0 && fh_key_error(k) == NULL) {
        fh_fail_key(k, "flowhost: interval join: a callback failed or memory ran out");
    }
    if (rc == 0 && changed) {
        if (held.n == 0) {
            if (had) {
                rc = fh_delete_state(k);
            }
        } else {
            out.len = 0;
            interval_encode(&held, &out);
            rc = out.failed ? fh_fail_key(k, "flowhost: interval join: out of memory") : fh_set_state(k, out.buf, out.len);
        }
    }
    fh_cbor_writer_free(&out);
    free(held.r);
    return rc;
}

int fh_enrich_join_init(fh_enrich_join *e, const char *table, const char *events, const fh_enrich_funcs *f,
                        const char *output, const char *unmatched) {
    if (e == NULL) {
        return join_misuse("flowhost: fh_enrich_join_init needs an fh_enrich_join");
    }
    memset(e, 0, sizeof *e);
    if (f == NULL || f->enrich == NULL) {
        return join_misuse("flowhost: fh_enrich_join_init needs an enrich function");
    }
    if (table == NULL || events == NULL || output == NULL || unmatched == NULL || !*table || !*events || !*output || !*unmatched) {
        return join_misuse("flowhost: fh_enrich_join_init needs table, events, output and unmatched streams");
    }
    if (strcmp(table, events) == 0) {
        return join_misuse("flowhost: fh_enrich_join_init needs two different input streams");
    }
    e->table = strdup(table);
    e->events = strdup(events);
    e->output = strdup(output);
    e->unmatched = strdup(unmatched);
    if (e->table == NULL || e->events == NULL || e->output == NULL || e->unmatched == NULL) {
        fh_enrich_join_free(e);
        return join_misuse("flowhost: fh_enrich_join_init: out of memory");
    }
    e->f = *f;
    return 0;
}

void fh_enrich_join_free(fh_enrich_join *e) {
    if (e == NULL) {
        return;
    }
    free(e->table);
    free(e->events);
    free(e->output);
    free(e->unmatched);
    memset(e, 0, sizeof *e);
}

/* enrich_decode reads an enrichment state into v (pointing into b), or
 * returns false with r->err set. */
static bool enrich_decode(const uint8_t *b, size_t len, fh_join_record *v, join_reader *r) {
    jr_start(r, b, len, JOIN_KIND_ENRICH);
    memset(v, 0, sizeof *v);
    v->input = -1;
    v->event_ts = jr_varint(r, "ts");
    const uint8_t *id;
    v->id_len = jr_bytes(r, "message_id", &id);
    v->id = (const char *)id;
    size_t start = r->off;
    v->payload_len = jr_bytes(r, "payload", &v->payload);
    if (!r->failed && v->payload_len == 0) {
        r->off = start;
        jr_fail(r, "empty payload (a tombstone is no state)");
    }
    jr_end(r);
    return !r->failed;
}

int fh_enrich_join_process(fh_enrich_join *e, fh_key *k) {
    if (e == NULL || e->table == NULL) {
        return join_misuse("flowhost: fh_enrich_join_process needs a join set up by fh_enrich_join_init");
    }
    const uint8_t *data = NULL;
    size_t len = 0;
    bool had = fh_state(k, &data, &len);
    fh_join_record value;
    bool has_value = false;
    if (had) {
        join_reader r;
        if (!enrich_decode(data, len, &value, &r)) {
            return fh_fail_key(k, r.err), -1;
        }
        has_value = true;
        value.stream = e->table;
        value.stream_len = strlen(e->table);
    }
    fh_cbor_writer out = {0};
    bool changed = false;
    int rc = 0;
    const fh_message *m;
    while (rc == 0 && (m = fh_next_message(k)) != NULL) {
        if (stream_is(m, e->table)) {
            changed = true;
            has_value = m->payload_len > 0;
            value = (fh_join_record){.id = m->id, .id_len = m->id_len, .stream = m->stream, .stream_len = m->stream_len,
                                     .event_ts = m->event_ts, .payload = m->payload, .payload_len = m->payload_len, .input = m->input};
        } else if (stream_is(m, e->events)) {
            if (!has_value) {
                fh_emit_opts opts = {.parents = &m->input, .parent_count = 1};
                rc = fh_emit_with(k, e->unmatched, m->payload, m->payload_len, &opts);
                continue;
            }
            uint32_t parents[2] = {m->input, 0};
            size_t np = 1;
            if (value.input >= 0) {
                parents[0] = (uint32_t)value.input;
                parents[1] = m->input;
                np = 2;
            }
            out.len = 0;
            if (e->f.enrich(m, &value, &out, e->f.ctx) != 0 || out.failed) {
                rc = -1;
                break;
            }
            fh_emit_opts opts = {.has_event_ts = true, .event_ts = m->event_ts, .parents = parents, .parent_count = np};
            rc = fh_emit_with(k, e->output, out.buf, out.len, &opts);
        } else {
            rc = join_other_stream(k, m, "table", e->table, "events", e->events);
        }
    }
    fh_clear_current(k);
    if (rc != 0 && fh_key_error(k) == NULL) {
        fh_fail_key(k, "flowhost: enrichment join: a callback failed or memory ran out");
    }
    if (rc == 0 && changed) {
        if (!has_value) {
            if (had) {
                rc = fh_delete_state(k);
            }
        } else {
            out.len = 0;
            uint8_t head[2] = {JOIN_STATE_VERSION, JOIN_KIND_ENRICH};
            fh_cbor_put_raw(&out, head, 2);
            put_varint(&out, value.event_ts);
            put_len_bytes(&out, value.id, value.id_len);
            put_len_bytes(&out, value.payload, value.payload_len);
            rc = out.failed ? fh_fail_key(k, "flowhost: enrichment join: out of memory") : fh_set_state(k, out.buf, out.len);
        }
    }
    fh_cbor_writer_free(&out);
    return rc;
}

/* ---------------------------------------------------------------------
 * The group_by key as typed fields: the port of sdk/go/state_key.go. The
 * JSON reading follows Go's encoding/json (nesting depth 10000, invalid
 * UTF-8 and lone surrogates in strings become U+FFFD), since the texts and
 * results must be Go's.
 * ------------------------------------------------------------------ */

#include <math.h>

#define KF_MAX_DEPTH 10000

static size_t kf_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) {
        i++;
    }
    return i;
}

static int kf_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* kf_string_end is the end of the string literal at i, or 0. */
static size_t kf_string_end(const char *s, size_t n, size_t i) {
    for (i++; i < n;) {
        uint8_t c = (uint8_t)s[i];
        if (c == '"') return i + 1;
        if (c < 0x20) return 0;
        if (c != '\\') {
            i++;
            continue;
        }
        if (i + 1 >= n) return 0;
        switch (s[i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            i += 2;
            break;
        case 'u':
            if (i + 6 > n) return 0;
            for (size_t j = i + 2; j < i + 6; j++) {
                if (kf_hex(s[j]) < 0) return 0;
            }
            i += 6;
            break;
        default:
            return 0;
        }
    }
    return 0;
}

static size_t kf_digits(const char *s, size_t n, size_t i) {
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    return i;
}

/* kf_number_end is the end of the number at i, or 0. */
static size_t kf_number_end(const char *s, size_t n, size_t i) {
    if (i < n && s[i] == '-') i++;
    if (i >= n) return 0;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        i = kf_digits(s, n, i);
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        size_t j = kf_digits(s, n, i + 1);
        if (j == i + 1) return 0;
        i = j;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t j = kf_digits(s, n, i);
        if (j == i) return 0;
        i = j;
    }
    return i;
}

static bool kf_valid_number(const char *s, size_t n) {
    return n > 0 && kf_number_end(s, n, 0) == n;
}

static size_t kf_lit(const char *s, size_t n, size_t i, const char *w) {
    size_t l = strlen(w);
    return i + l <= n && memcmp(s + i, w, l) == 0 ? i + l : 0;
}

/* kf_member_key reads `"name" :` at i and returns where the value starts,
 * or 0. */
static size_t kf_member_key(const char *s, size_t n, size_t i) {
    if (i >= n || s[i] != '"') return 0;
    i = kf_string_end(s, n, i);
    if (i == 0) return 0;
    i = kf_ws(s, n, i);
    if (i >= n || s[i] != ':') return 0;
    return kf_ws(s, n, i + 1);
}

/* kf_value is the end of the value at i, or 0; iterative, so that deep
 * nesting cannot exhaust the guest's stack. depth counts the containers
 * already open. */
static size_t kf_value(const char *s, size_t n, size_t i, size_t depth) {
    uint8_t *stack = NULL; /* 1 for an object */
    size_t sp = 0, cap = 0, r = 0;
    for (;;) {
        if (i >= n) goto out;
        if (s[i] == '{' || s[i] == '[') {
            uint8_t obj = s[i] == '{';
            if (depth + sp > KF_MAX_DEPTH) goto out;
            if (sp == cap) {
                cap = cap ? 2 * cap : 16;
                uint8_t *ns = (uint8_t *)realloc(stack, cap);
                if (ns == NULL) goto out;
                stack = ns;
            }
            stack[sp++] = obj;
            i = kf_ws(s, n, i + 1);
            if (i < n && s[i] == (obj ? '}' : ']')) {
                sp--;
                i++;
            } else {
                if (obj && (i = kf_member_key(s, n, i)) == 0) goto out;
                continue;
            }
        } else if (s[i] == '"') {
            i = kf_string_end(s, n, i);
        } else if (s[i] == 't') {
            i = kf_lit(s, n, i, "true");
        } else if (s[i] == 'f') {
            i = kf_lit(s, n, i, "false");
        } else if (s[i] == 'n') {
            i = kf_lit(s, n, i, "null");
        } else {
            i = kf_number_end(s, n, i);
        }
        if (i == 0) goto out;
        for (;;) {
            if (sp == 0) {
                r = i;
                goto out;
            }
            uint8_t obj = stack[sp - 1];
            i = kf_ws(s, n, i);
            if (i >= n) goto out;
            if (s[i] == ',') {
                i = kf_ws(s, n, i + 1);
                if (obj && (i = kf_member_key(s, n, i)) == 0) goto out;
                break;
            }
            if (s[i] == (obj ? '}' : ']')) {
                sp--;
                i++;
                continue;
            }
            goto out;
        }
    }
out:
    free(stack);
    return r;
}

/* kf_sb is a growing text; a failed allocation marks it failed. */
typedef struct kf_sb {
    char *p;
    size_t n, cap;
    bool failed;
} kf_sb;

static void kf_put(kf_sb *b, const void *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 64;
        while (c < b->n + n + 1) c *= 2;
        char *np = (char *)realloc(b->p, c);
        if (np == NULL) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void kf_puts(kf_sb *b, const char *s) { kf_put(b, s, strlen(s)); }

static void kf_quote(kf_sb *b, const char *s, size_t n) {
    size_t need = fh_quote(NULL, 0, s, n);
    char *q = (char *)malloc(need + 1);
    if (q == NULL) {
        b->failed = true;
        return;
    }
    fh_quote(q, need + 1, s, n);
    kf_put(b, q, need);
    free(q);
}

/* kf_names is Go's %q of the names: ["a" "b"]. */
static void kf_names(kf_sb *b, const fh_key_fields *kf) {
    kf_puts(b, "[");
    for (size_t i = 0; i < kf->count; i++) {
        if (i > 0) kf_puts(b, " ");
        kf_quote(b, kf->names[i], strlen(kf->names[i]));
    }
    kf_puts(b, "]");
}

/* kf_begin starts a failure's text: `key K: ` or `key K: field "f": `. */
static void kf_begin(kf_sb *b, const fh_key_fields *kf, const char *field) {
    kf_puts(b, "key ");
    kf_put(b, kf->key, kf->key_len);
    kf_puts(b, ": ");
    if (field != NULL) {
        kf_puts(b, "field ");
        kf_quote(b, field, strlen(field));
        kf_puts(b, ": ");
    }
}

/* kf_end makes b the failure of kf and returns -1. */
static int kf_end(fh_key_fields *kf, kf_sb *b) {
    free(kf->error);
    kf->error = b->failed ? NULL : b->p;
    kf->error_len = b->n;
    if (b->failed) {
        free(b->p);
        kf->error = (char *)malloc(sizeof "out of memory");
        kf->error_len = 0;
        if (kf->error) {
            memcpy(kf->error, "out of memory", sizeof "out of memory");
            kf->error_len = sizeof "out of memory" - 1;
        }
    }
    return -1;
}

/* kf_expected fails field with `expected <want>, got <got>`. */
static int kf_expected(fh_key_fields *kf, const char *field, const char *want, const char *got, size_t n) {
    kf_sb b = {0};
    kf_begin(&b, kf, field);
    kf_puts(&b, "expected ");
    kf_puts(&b, want);
    kf_puts(&b, ", got ");
    kf_put(&b, got, n);
    return kf_end(kf, &b);
}

int fh_parse_key(fh_key_fields *kf, const char *key, size_t len, const char *const *names, size_t count) {
    memset(kf, 0, sizeof *kf);
    kf->key = key;
    kf->key_len = len;
    kf->names = names;
    kf->count = count;
    kf_sb b = {0};
    char num[64];
    if (len == 0) {
        if (count == 0) return 0;
        /* Go names the unkeyed key "" here alone. */
        kf_puts(&b, "key \"\": ");
        snprintf(num, sizeof num, "%zu", count);
        kf_puts(&b, "the key is empty (an unkeyed computation), expected ");
        kf_puts(&b, num);
        kf_puts(&b, " group_by fields");
        return kf_end(kf, &b);
    }
    size_t got = 0, cap = 0;
    size_t *spans = NULL;
    bool ok = false;
    size_t i = kf_ws(key, len, 0);
    if (i < len && key[i] == '[') {
        size_t j = kf_ws(key, len, i + 1);
        if (j < len && key[j] == ']') {
            j++;
            ok = true;
        } else {
            for (;;) {
                size_t end = kf_value(key, len, j, 2);
                if (end == 0) break;
                if (got == cap) {
                    cap = cap ? 2 * cap : 8;
                    size_t *ns = (size_t *)realloc(spans, 2 * cap * sizeof(size_t));
                    if (ns == NULL) break;
                    spans = ns;
                }
                spans[2 * got] = j;
                spans[2 * got + 1] = end;
                got++;
                j = kf_ws(key, len, end);
                if (j < len && key[j] == ',') {
                    j = kf_ws(key, len, j + 1);
                    continue;
                }
                if (j < len && key[j] == ']') {
                    j++;
                    ok = true;
                }
                break;
            }
        }
        if (ok && kf_ws(key, len, j) != len) ok = false;
    }
    if (!ok) {
        free(spans);
        kf_begin(&b, kf, NULL);
        kf_puts(&b, "not a JSON array of group_by values");
        return kf_end(kf, &b);
    }
    if (got != count) {
        free(spans);
        kf_begin(&b, kf, NULL);
        snprintf(num, sizeof num, "has %zu values, expected %zu (group_by ", got, count);
        kf_puts(&b, num);
        kf_names(&b, kf);
        kf_puts(&b, ")");
        return kf_end(kf, &b);
    }
    kf->spans = spans;
    return 0;
}

int fh_key_raw(fh_key_fields *kf, const char *name, const char **raw, size_t *len) {
    for (size_t i = 0; kf->spans != NULL && i < kf->count; i++) {
        if (strcmp(kf->names[i], name) == 0) {
            *raw = kf->key + kf->spans[2 * i];
            *len = kf->spans[2 * i + 1] - kf->spans[2 * i];
            return 0;
        }
    }
    kf_sb b = {0};
    kf_begin(&b, kf, name);
    kf_puts(&b, "not a group_by field (fields: ");
    kf_names(&b, kf);
    kf_puts(&b, ")");
    return kf_end(kf, &b);
}

static void kf_rune(kf_sb *b, uint32_t r) {
    char u[4];
    size_t n;
    if (r < 0x80) {
        u[0] = (char)r, n = 1;
    } else if (r < 0x800) {
        u[0] = (char)(0xc0 | r >> 6), u[1] = (char)(0x80 | (r & 0x3f)), n = 2;
    } else if (r < 0x10000) {
        u[0] = (char)(0xe0 | r >> 12), u[1] = (char)(0x80 | (r >> 6 & 0x3f)), u[2] = (char)(0x80 | (r & 0x3f)), n = 3;
    } else {
        u[0] = (char)(0xf0 | r >> 18), u[1] = (char)(0x80 | (r >> 12 & 0x3f)), u[2] = (char)(0x80 | (r >> 6 & 0x3f)),
        u[3] = (char)(0x80 | (r & 0x3f)), n = 4;
    }
    kf_put(b, u, n);
}

/* kf_utf8 is the length of the valid UTF-8 rune at s (Go's rules:
 * shortest form, no surrogates, at most U+10FFFF), or 0. */
static size_t kf_utf8(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    size_t l;
    uint32_t r, min;
    if (c >= 0xc2 && c <= 0xdf) {
        l = 2, r = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        l = 3, r = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        l = 4, r = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < l) return 0;
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        r = r << 6 | (s[i] & 0x3f);
    }
    if (r < min || r > 0x10ffff || (r >= 0xd800 && r < 0xe000)) return 0;
    return l;
}

static int32_t kf_u4(const char *s, size_t n, size_t i) {
    if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u') return -1;
    int32_t r = 0;
    for (size_t j = i + 2; j < i + 6; j++) {
        int h = kf_hex(s[j]);
        if (h < 0) return -1;
        r = r * 16 + h;
    }
    return r;
}

/* kf_unquote appends the text of the valid string literal s[0..n) to b. */
static void kf_unquote(kf_sb *b, const char *s, size_t n) {
    size_t i = 1, end = n - 1;
    while (i < end) {
        uint8_t c = (uint8_t)s[i];
        if (c == '\\') {
            char e = s[i + 1];
            switch (e) {
            case 'b': kf_puts(b, "\b"); i += 2; break;
            case 'f': kf_puts(b, "\f"); i += 2; break;
            case 'n': kf_puts(b, "\n"); i += 2; break;
            case 'r': kf_puts(b, "\r"); i += 2; break;
            case 't': kf_puts(b, "\t"); i += 2; break;
            case 'u': {
                int32_t r = kf_u4(s, end, i);
                i += 6;
                if (r >= 0xd800 && r < 0xe000) {
                    int32_t r2 = r < 0xdc00 ? kf_u4(s, end, i) : -1;
                    if (r2 >= 0xdc00 && r2 < 0xe000) {
                        r = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
                        i += 6;
                    } else {
                        r = 0xfffd;
                    }
                }
                kf_rune(b, (uint32_t)r);
                break;
            }
            default: kf_put(b, &e, 1); i += 2; break;
            }
        } else if (c < 0x80) {
            kf_put(b, &s[i], 1);
            i++;
        } else {
            size_t l = kf_utf8((const uint8_t *)s + i, end - i);
            if (l == 0) {
                kf_rune(b, 0xfffd);
                i++;
            } else {
                kf_put(b, s + i, l);
                i += l;
            }
        }
    }
    kf_put(b, "", 0);
}

int fh_key_string(fh_key_fields *kf, const char *name, const char **value, size_t *len) {
    const char *raw;
    size_t n;
    if (fh_key_raw(kf, name, &raw, &n) != 0) return -1;
    if (raw[0] != '"') return kf_expected(kf, name, "a string", raw, n);
    kf_sb b = {0};
    kf_unquote(&b, raw, n);
    if (b.failed) return kf_end(kf, &b);
    free(kf->buf);
    kf->buf = b.p;
    *value = b.p ? b.p : "";
    *len = b.n;
    return 0;
}

/* kf_number is the text of a number as Go's json.Number holds it: a
 * number literal, a string holding a valid number, or "" for null; or
 * NULL after failing with `expected <want>`. */
static char *kf_number(fh_key_fields *kf, const char *name, const char *want, size_t *len) {
    const char *raw;
    size_t n;
    if (fh_key_raw(kf, name, &raw, &n) != 0) return NULL;
    kf_sb b = {0};
    if (n == 4 && memcmp(raw, "null", 4) == 0) {
        kf_put(&b, "", 0);
    } else if (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
        kf_put(&b, raw, n);
    } else if (raw[0] == '"') {
        kf_unquote(&b, raw, n);
        if (!b.failed && !kf_valid_number(b.p, b.n)) {
            free(b.p);
            kf_expected(kf, name, want, raw, n);
            return NULL;
        }
    } else {
        kf_expected(kf, name, want, raw, n);
        return NULL;
    }
    if (b.failed) {
        kf_end(kf, &b);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

int fh_key_int(fh_key_fields *kf, const char *name, int64_t *value) {
    size_t n;
    char *t = kf_number(kf, name, "an integer", &n);
    if (t == NULL) return -1;
    bool ok = n > 0;
    for (size_t i = 0; i < n; i++) {
        if (!(t[i] >= '0' && t[i] <= '9') && !(i == 0 && t[i] == '-' && n > 1)) ok = false;
    }
    if (ok) {
        /* By hand: wasi-libc's errno is a thread-local that clang cannot
         * compile for this target. Accumulate negatively, as -2^63 has no
         * positive twin. */
        bool neg = t[0] == '-';
        int64_t v = 0;
        for (size_t i = neg ? 1 : 0; ok && i < n; i++) {
            int d = t[i] - '0';
            if (v < (INT64_MIN + d) / 10) {
                ok = false;
            } else {
                v = v * 10 - d;
            }
        }
        if (ok && !neg && v == INT64_MIN) ok = false;
        if (ok) {
            *value = neg ? v : -v;
            free(t);
            return 0;
        }
    }
    int r = kf_expected(kf, name, "an int64 integer", t, n);
    free(t);
    return r;
}

int fh_key_float(fh_key_fields *kf, const char *name, double *value) {
    size_t n;
    char *t = kf_number(kf, name, "a number", &n);
    if (t == NULL) return -1;
    if (n > 0) {
        double v = strtod(t, NULL);
        if (!isinf(v)) {
            *value = v;
            free(t);
            return 0;
        }
    }
    int r = kf_expected(kf, name, "a float64 number", t, n);
    free(t);
    return r;
}

int fh_key_bool(fh_key_fields *kf, const char *name, bool *value) {
    const char *raw;
    size_t n;
    if (fh_key_raw(kf, name, &raw, &n) != 0) return -1;
    if (n == 4 && memcmp(raw, "true", 4) == 0) {
        *value = true;
        return 0;
    }
    if (n == 5 && memcmp(raw, "false", 5) == 0) {
        *value = false;
        return 0;
    }
    return kf_expected(kf, name, "a boolean", raw, n);
}

const char *fh_key_fields_error(const fh_key_fields *kf) { return kf->error; }

void fh_key_fields_free(fh_key_fields *kf) {
    free(kf->spans);
    free(kf->buf);
    free(kf->error);
    kf->spans = NULL;
    kf->buf = kf->error = NULL;
}
