/*
 * window-count, in C: the flowhost example computation of
 * examples/plugins/window-count, written with the C SDK. It is a transform
 * that uses keyed state and timers: it counts each key's messages in
 * tumbling windows of event time and, once the watermark says a window is
 * complete, emits
 *
 *     {"key":"ann","window_start":1714557600000000000,"window_end":1714557660000000000,"count":42}
 *
 * on its output stream, in the same format as the Go version (timestamps
 * in nanoseconds since the Unix epoch; key is the value of the group_by
 * field, or the list of values when there are several, null for none).
 * The parameter window (a duration, default 1m) sets the window length;
 * windows are aligned to the Unix epoch.
 *
 * How it works, and what the host does for it:
 *
 *   - A message with EventTimestamp t belongs to the window
 *     [floor(t/window)*window, +window). The key's state holds the open
 *     windows and their counts, as the JSON the Go version writes
 *     ({"windows":[{"start":...,"count":...}]}), so either version can take
 *     over the other's state.
 *   - Opening a window sets a timer at its end. The host fires it when the
 *     watermark of the computation's timer stream reaches the end: the host
 *     decides when a window is complete, not this code. Its EventTimestamp
 *     is window_end-1, which the emitted count inherits.
 *   - A fired timer emits the windows that ended, removes them from the
 *     state and deletes the state when no window is left open.
 *
 * Build:
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -mbulk-memory -I sdk/c \
 *         -o window-count.wasm main.c sdk/c/flowhost.c sdk/c/cbor.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

static int64_t window_size = 60 * 1000000000LL;
static const char *output;

int flowhost_init_params(fh_params *p) {
    if (fh_param_has(p, "window")) {
        int64_t d;
        if (fh_param_duration(p, "window", &d) != 0) {
            return -1; /* the getter's message: parameter "window": ... */
        }
        if (d <= 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "parameter \"window\": must be positive, got %lldns", (long long)d);
            return fh_params_fail(p, msg);
        }
        window_size = d;
    }
    if (fh_params_output_count(p) != 1) {
        char msg[128];
        snprintf(msg, sizeof msg, "window-count writes exactly one output stream; the pipeline declares %zu",
                 fh_params_output_count(p));
        return fh_params_fail(p, msg);
    }
    output = fh_params_output(p, 0);
    return 0;
}

/* A key's open windows, sorted by start. */
typedef struct window {
    int64_t start, count;
} window;

static window *windows;
static size_t n_windows, cap_windows;

static bool insert_window(size_t at, int64_t start) {
    if (n_windows == cap_windows) {
        size_t cap = cap_windows ? 2 * cap_windows : 8;
        window *w = (window *)realloc(windows, cap * sizeof(window));
        if (w == NULL) {
            return false;
        }
        windows = w;
        cap_windows = cap;
    }
    memmove(windows + at + 1, windows + at, (n_windows - at) * sizeof(window));
    windows[at] = (window){start, 1};
    n_windows++;
    return true;
}

/* parse_int reads a decimal integer at *s. */
static bool parse_int(const char **s, const char *end, int64_t *v) {
    const char *p = *s;
    bool neg = p < end && *p == '-';
    if (neg) {
        p++;
    }
    if (p == end || *p < '0' || *p > '9') {
        return false;
    }
    uint64_t u = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        u = u * 10 + (uint64_t)(*p++ - '0');
    }
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    *s = p;
    return true;
}

static bool expect(const char **s, const char *end, const char *text) {
    size_t n = strlen(text);
    if ((size_t)(end - *s) < n || memcmp(*s, text, n) != 0) {
        return false;
    }
    *s += n;
    return true;
}

/* load_state reads the state written by save_state (or by the Go
 * version): {"windows":[{"start":S,"count":C},...]}. */
static bool load_state(const uint8_t *data, size_t len) {
    const char *s = (const char *)data, *end = s + len;
    n_windows = 0;
    if (!expect(&s, end, "{\"windows\":")) {
        return false;
    }
    if (expect(&s, end, "null}")) {
        return s == end;
    }
    if (!expect(&s, end, "[")) {
        return false;
    }
    while (!expect(&s, end, "]")) {
        int64_t start, count;
        if (n_windows > 0 && !expect(&s, end, ",")) {
            return false;
        }
        if (!expect(&s, end, "{\"start\":") || !parse_int(&s, end, &start) || !expect(&s, end, ",\"count\":") ||
            !parse_int(&s, end, &count) || !expect(&s, end, "}") || !insert_window(n_windows, start)) {
            return false;
        }
        windows[n_windows - 1].count = count;
    }
    return expect(&s, end, "}") && s == end;
}

/* text is a growable buffer for the JSON this computation writes. */
static char *text;
static size_t text_len, text_cap;

static void put(const char *s, size_t n) {
    if (text_cap - text_len < n + 1) {
        size_t cap = text_cap ? text_cap : 256;
        while (cap - text_len < n + 1) {
            cap *= 2;
        }
        char *b = (char *)realloc(text, cap);
        if (b == NULL) {
            abort();
        }
        text = b;
        text_cap = cap;
    }
    memcpy(text + text_len, s, n);
    text_len += n;
    text[text_len] = '\0';
}

static void put_int(int64_t v) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    put(digits, (size_t)n);
}

static void save_state(fh_key *k) {
    text_len = 0;
    put("{\"windows\":[", 12);
    for (size_t i = 0; i < n_windows; i++) {
        put(i > 0 ? ",{\"start\":" : "{\"start\":", i > 0 ? 10 : 9);
        put_int(windows[i].start);
        put(",\"count\":", 9);
        put_int(windows[i].count);
        put("}", 1);
    }
    put("]}", 2);
    fh_set_state(k, text, text_len);
}

/* put_key_value writes what the output's "key" holds: the host's key text
 * is a compact JSON array of the group_by values; one value is written as
 * itself, several as the array, none as null. Go's encoder, which the Go
 * version re-encodes the key with, escapes <, >, & and U+2028/U+2029 in
 * strings; the host's canonical text does not, so they are escaped here
 * (they can only occur inside strings). */
static bool put_key_value(const char *key, size_t len) {
    if (len == 0) {
        put("null", 4);
        return true;
    }
    if (len < 2 || key[0] != '[' || key[len - 1] != ']') {
        return false;
    }
    /* Count the array's top-level elements. */
    size_t elements = 0, depth = 0;
    bool in_string = false, any = false;
    for (size_t i = 1; i + 1 < len; i++) {
        char c = key[i];
        if (in_string) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        any = true;
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',' && depth == 0) {
            elements++;
        }
    }
    if (any) {
        elements++;
    }
    const char *v = key;
    size_t n = len;
    if (elements == 1) {
        v++;
        n -= 2;
    }
    for (size_t i = 0; i < n; i++) {
        switch (v[i]) {
        case '<': put("\\u003c", 6); break;
        case '>': put("\\u003e", 6); break;
        case '&': put("\\u0026", 6); break;
        default:
            if (i + 2 < n && (unsigned char)v[i] == 0xe2 && (unsigned char)v[i + 1] == 0x80 &&
                ((unsigned char)v[i + 2] == 0xa8 || (unsigned char)v[i + 2] == 0xa9)) {
                put((unsigned char)v[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
                i += 2;
            } else {
                put(v + i, 1);
            }
        }
    }
    return true;
}

/* floor_div rounds toward negative infinity, so that windows before 1970
 * are aligned the same way as those after. */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) {
        q--;
    }
    return q;
}

int flowhost_process_key(fh_key *k) {
    const uint8_t *raw;
    size_t raw_len;
    size_t key_len;
    const char *key = fh_key_text(k, &key_len);
    n_windows = 0;
    bool had = fh_state(k, &raw, &raw_len);
    if (had && !load_state(raw, raw_len)) {
        text_len = 0;
        put("state of key ", 13);
        put(key, key_len);
        put(" is not the JSON window-count writes", 36);
        return fh_fail_key(k, text);
    }
    text_len = 0;
    if (!put_key_value(key, key_len)) {
        text_len = 0;
        put("key ", 4);
        put(key, key_len);
        put(" is not a JSON array", 20);
        return fh_fail_key(k, text);
    }
    /* The key's JSON value, kept while text is reused for results. */
    char *key_value = strdup(text);
    if (key_value == NULL) {
        abort();
    }
    const fh_timer *t;
    while ((t = fh_next_timer(k)) != NULL) {
        /* Every window that ended by the trigger is complete; normally
         * exactly the one the timer was set for. */
        size_t done = 0;
        while (done < n_windows && windows[done].start + window_size <= t->trigger_ts) {
            const window *w = &windows[done];
            text_len = 0;
            put("{\"key\":", 7);
            put(key_value, strlen(key_value));
            put(",\"window_start\":", 16);
            put_int(w->start);
            put(",\"window_end\":", 14);
            put_int(w->start + window_size);
            put(",\"count\":", 9);
            put_int(w->count);
            put("}", 1);
            fh_emit(k, output, text, text_len); /* parent: this timer */
            done++;
        }
        memmove(windows, windows + done, (n_windows - done) * sizeof(window));
        n_windows -= done;
    }
    free(key_value);
    const fh_message *m;
    while ((m = fh_next_message(k)) != NULL) {
        int64_t start = floor_div(m->event_ts, window_size) * window_size;
        size_t lo = 0, hi = n_windows;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (windows[mid].start < start) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < n_windows && windows[lo].start == start) {
            windows[lo].count++;
            continue;
        }
        if (!insert_window(lo, start)) {
            return fh_fail_key(k, "out of memory");
        }
        int64_t end = start + window_size;
        fh_set_timer_with(k, end, &(fh_timer_opts){.has_event_ts = true, .event_ts = end - 1});
    }
    if (n_windows == 0) {
        if (had) {
            fh_delete_state(k);
        }
        return 0;
    }
    save_state(k);
    return 0;
}
