//go:build ignore

// (The Go package sdk/c embeds this file; the constraint above keeps the go
// tool from taking it for cgo source of that package.)

/*
 * cbor.c - the flowhost C SDK's CBOR reader and writer; see cbor.h.
 */
#include "cbor.h"

#include <stdlib.h>
#include <string.h>

void fh_cbor_reader_init(fh_cbor_reader *r, const void *data, size_t len) {
    r->p = (const uint8_t *)data;
    r->end = r->p + len;
    r->err = NULL;
    if (data == NULL) {
        r->p = r->end = (const uint8_t *)"";
    }
}

size_t fh_cbor_remaining(const fh_cbor_reader *r) { return (size_t)(r->end - r->p); }

int fh_cbor_fail(fh_cbor_reader *r, const char *msg) {
    if (r->err == NULL) {
        r->err = msg;
    }
    return -1;
}

int fh_cbor_head(fh_cbor_reader *r, fh_cbor_item *it) {
    if (r->err != NULL) {
        return -1;
    }
    if (r->p >= r->end) {
        return fh_cbor_fail(r, "unexpected end of data");
    }
    uint8_t b = *r->p++;
    it->major = b >> 5;
    it->info = b & 0x1f;
    if (it->info < 24) {
        it->arg = it->info;
    } else if (it->info <= 27) {
        size_t n = (size_t)1 << (it->info - 24);
        if (fh_cbor_remaining(r) < n) {
            return fh_cbor_fail(r, "unexpected end of data");
        }
        uint64_t arg = 0;
        for (size_t i = 0; i < n; i++) {
            arg = arg << 8 | r->p[i];
        }
        r->p += n;
        it->arg = arg;
        if (it->major == FH_CBOR_SIMPLE && it->info == 24 && arg < 32) {
            return fh_cbor_fail(r, "malformed simple value");
        }
    } else if (it->info == 31) {
        if (it->major >= FH_CBOR_BYTES && it->major <= FH_CBOR_MAP) {
            return fh_cbor_fail(r, "indefinite-length item is not allowed");
        }
        return fh_cbor_fail(r, it->major == FH_CBOR_SIMPLE ? "unexpected break" : "malformed item head");
    } else {
        return fh_cbor_fail(r, "malformed item head");
    }
    size_t left = fh_cbor_remaining(r);
    switch (it->major) {
    case FH_CBOR_BYTES:
    case FH_CBOR_TEXT:
        if (it->arg > left) {
            return fh_cbor_fail(r, "string runs past the end of the data");
        }
        break;
    case FH_CBOR_ARRAY:
        if (it->arg > left) {
            return fh_cbor_fail(r, "array runs past the end of the data");
        }
        break;
    case FH_CBOR_MAP:
        if (it->arg > left / 2) {
            return fh_cbor_fail(r, "map runs past the end of the data");
        }
        break;
    }
    return 0;
}

const uint8_t *fh_cbor_string(fh_cbor_reader *r, const fh_cbor_item *it) {
    /* fh_cbor_head has checked that the content fits. */
    const uint8_t *s = r->p;
    r->p += (size_t)it->arg;
    return s;
}

size_t fh_cbor_utf8_decode(const uint8_t *s, size_t n, uint32_t *rune) {
    if (n == 0) {
        return 0;
    }
    uint8_t c = s[0];
    if (c < 0x80) {
        *rune = c;
        return 1;
    }
    size_t size;
    uint8_t lo = 0x80, hi = 0xbf; /* range of the second byte */
    uint32_t r;
    if (c >= 0xc2 && c <= 0xdf) {
        size = 2;
        r = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        size = 3;
        r = c & 0x0f;
        if (c == 0xe0) {
            lo = 0xa0; /* overlong */
        } else if (c == 0xed) {
            hi = 0x9f; /* surrogates */
        }
    } else if (c >= 0xf0 && c <= 0xf4) {
        size = 4;
        r = c & 0x07;
        if (c == 0xf0) {
            lo = 0x90; /* overlong */
        } else if (c == 0xf4) {
            hi = 0x8f; /* above U+10FFFF */
        }
    } else {
        return 0;
    }
    if (n < size || s[1] < lo || s[1] > hi) {
        return 0;
    }
    r = r << 6 | (s[1] & 0x3f);
    for (size_t j = 2; j < size; j++) {
        if ((s[j] & 0xc0) != 0x80) {
            return 0;
        }
        r = r << 6 | (s[j] & 0x3f);
    }
    *rune = r;
    return size;
}

bool fh_cbor_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t r;
        size_t size = fh_cbor_utf8_decode(s + i, n - i, &r);
        if (size == 0) {
            return false;
        }
        i += size;
    }
    return true;
}

/* expect reads a head and requires its major type. */
static int expect(fh_cbor_reader *r, fh_cbor_item *it, int major, const char *msg) {
    if (fh_cbor_head(r, it) != 0) {
        return -1;
    }
    if (it->major != major) {
        return fh_cbor_fail(r, msg);
    }
    return 0;
}

int fh_cbor_read_uint(fh_cbor_reader *r, uint64_t *v) {
    fh_cbor_item it;
    if (expect(r, &it, FH_CBOR_UINT, "expected uint") != 0) {
        return -1;
    }
    *v = it.arg;
    return 0;
}

int fh_cbor_read_int(fh_cbor_reader *r, int64_t *v) {
    fh_cbor_item it;
    if (fh_cbor_head(r, &it) != 0) {
        return -1;
    }
    if (it.major != FH_CBOR_UINT && it.major != FH_CBOR_NEGINT) {
        return fh_cbor_fail(r, "expected int");
    }
    if (it.arg > (uint64_t)INT64_MAX) {
        return fh_cbor_fail(r, "integer overflows int64");
    }
    /* -1 - arg, without overflowing for arg = INT64_MAX. */
    *v = it.major == FH_CBOR_UINT ? (int64_t)it.arg : -(int64_t)it.arg - 1;
    return 0;
}

int fh_cbor_read_bytes(fh_cbor_reader *r, const uint8_t **s, size_t *len) {
    fh_cbor_item it;
    if (expect(r, &it, FH_CBOR_BYTES, "expected byte string") != 0) {
        return -1;
    }
    *len = (size_t)it.arg;
    *s = fh_cbor_string(r, &it);
    return 0;
}

int fh_cbor_read_text(fh_cbor_reader *r, const char **s, size_t *len) {
    fh_cbor_item it;
    if (expect(r, &it, FH_CBOR_TEXT, "expected text string") != 0) {
        return -1;
    }
    const uint8_t *t = fh_cbor_string(r, &it);
    if (!fh_cbor_utf8_valid(t, (size_t)it.arg)) {
        return fh_cbor_fail(r, "text string is not valid UTF-8");
    }
    *s = (const char *)t;
    *len = (size_t)it.arg;
    return 0;
}

int fh_cbor_read_bool(fh_cbor_reader *r, bool *v) {
    fh_cbor_item it;
    if (fh_cbor_head(r, &it) != 0) {
        return -1;
    }
    if (it.major != FH_CBOR_SIMPLE || (it.info != 20 && it.info != 21)) {
        return fh_cbor_fail(r, "expected bool");
    }
    *v = it.info == 21;
    return 0;
}

double fh_cbor_float_value(const fh_cbor_item *it) {
    switch (it->info) {
    case 25: {
        /* IEEE 754 half precision, widened by hand: wasm32 has no
         * half-float instructions. */
        uint32_t h = (uint32_t)it->arg;
        uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
        double v;
        if (exp == 0) {
            v = (double)mant / 16777216.0; /* mant * 2^-24 */
        } else if (exp == 31) {
            v = mant == 0 ? __builtin_inf() : __builtin_nan("");
        } else {
            v = (double)(mant | 0x400) * (double)((uint64_t)1 << exp) / 33554432.0; /* 2^(exp-25) */
        }
        return sign ? -v : v;
    }
    case 26: {
        uint32_t bits = (uint32_t)it->arg;
        float f;
        memcpy(&f, &bits, sizeof f);
        return (double)f;
    }
    default: {
        uint64_t bits = it->arg;
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    }
}

int fh_cbor_read_float(fh_cbor_reader *r, double *v) {
    fh_cbor_item it;
    if (fh_cbor_head(r, &it) != 0) {
        return -1;
    }
    if (it.major != FH_CBOR_SIMPLE || it.info < 25 || it.info > 27) {
        return fh_cbor_fail(r, "expected float");
    }
    *v = fh_cbor_float_value(&it);
    return 0;
}

int fh_cbor_read_array(fh_cbor_reader *r, size_t *count) {
    fh_cbor_item it;
    if (expect(r, &it, FH_CBOR_ARRAY, "expected array") != 0) {
        return -1;
    }
    *count = (size_t)it.arg;
    return 0;
}

int fh_cbor_read_map(fh_cbor_reader *r, size_t *count) {
    fh_cbor_item it;
    if (expect(r, &it, FH_CBOR_MAP, "expected map") != 0) {
        return -1;
    }
    *count = (size_t)it.arg;
    return 0;
}

int fh_cbor_skip(fh_cbor_reader *r, int depth) {
    /* pending[level] counts the items still to read at each open level;
     * a container opens a level, a tag adds one item to its own. */
    uint64_t pending[FH_CBOR_MAX_DEPTH + 1];
    int level = 0;
    if (depth < 0 || depth > FH_CBOR_MAX_DEPTH) {
        return fh_cbor_fail(r, "nesting too deep");
    }
    pending[0] = 1;
    while (level >= 0) {
        if (pending[level] == 0) {
            level--;
            continue;
        }
        pending[level]--;
        fh_cbor_item it;
        if (fh_cbor_head(r, &it) != 0) {
            return -1;
        }
        switch (it.major) {
        case FH_CBOR_BYTES:
        case FH_CBOR_TEXT:
            (void)fh_cbor_string(r, &it);
            break;
        case FH_CBOR_ARRAY:
        case FH_CBOR_MAP:
            if (depth + level >= FH_CBOR_MAX_DEPTH) {
                return fh_cbor_fail(r, "nesting exceeds 32 levels");
            }
            /* The head check bounds the count by the bytes left, so the
             * doubling of a map's count cannot overflow. */
            pending[++level] = it.major == FH_CBOR_MAP ? 2 * it.arg : it.arg;
            break;
        case FH_CBOR_TAG:
            pending[level]++;
            break;
        default:
            break;
        }
    }
    return 0;
}

uint8_t *fh_cbor_reserve(fh_cbor_writer *w, size_t n) {
    if (w->failed) {
        return NULL;
    }
    if (w->cap - w->len < n) {
        if (n > SIZE_MAX / 2 - w->len) {
            w->failed = true;
            return NULL;
        }
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n) {
            cap *= 2;
        }
        uint8_t *b = (uint8_t *)realloc(w->buf, cap);
        if (b == NULL) {
            w->failed = true;
            return NULL;
        }
        w->buf = b;
        w->cap = cap;
    }
    uint8_t *at = w->buf + w->len;
    w->len += n;
    return at;
}

size_t fh_cbor_head_size(uint64_t arg) {
    if (arg < 24) {
        return 1;
    }
    if (arg <= 0xff) {
        return 2;
    }
    if (arg <= 0xffff) {
        return 3;
    }
    if (arg <= 0xffffffffu) {
        return 5;
    }
    return 9;
}

size_t fh_cbor_encode_head(uint8_t *out, int major, uint64_t arg) {
    size_t n = fh_cbor_head_size(arg);
    uint8_t m = (uint8_t)(major << 5);
    switch (n) {
    case 1:
        out[0] = m | (uint8_t)arg;
        return 1;
    case 2:
        out[0] = m | 24;
        break;
    case 3:
        out[0] = m | 25;
        break;
    case 5:
        out[0] = m | 26;
        break;
    default:
        out[0] = m | 27;
        break;
    }
    for (size_t i = n - 1; i >= 1; i--) {
        out[i] = (uint8_t)arg;
        arg >>= 8;
    }
    return n;
}

void fh_cbor_put_head(fh_cbor_writer *w, int major, uint64_t arg) {
    uint8_t head[9];
    size_t n = fh_cbor_encode_head(head, major, arg);
    uint8_t *at = fh_cbor_reserve(w, n);
    if (at != NULL) {
        memcpy(at, head, n);
    }
}

void fh_cbor_put_uint(fh_cbor_writer *w, uint64_t v) { fh_cbor_put_head(w, FH_CBOR_UINT, v); }

void fh_cbor_put_int(fh_cbor_writer *w, int64_t v) {
    if (v >= 0) {
        fh_cbor_put_head(w, FH_CBOR_UINT, (uint64_t)v);
    } else {
        fh_cbor_put_head(w, FH_CBOR_NEGINT, ~(uint64_t)v); /* -1 - v */
    }
}

void fh_cbor_put_raw(fh_cbor_writer *w, const void *data, size_t n) {
    if (n == 0) {
        return;
    }
    uint8_t *at = fh_cbor_reserve(w, n);
    if (at != NULL) {
        memcpy(at, data, n);
    }
}

void fh_cbor_put_bytes(fh_cbor_writer *w, const void *s, size_t len) {
    fh_cbor_put_head(w, FH_CBOR_BYTES, len);
    fh_cbor_put_raw(w, s, len);
}

void fh_cbor_put_text(fh_cbor_writer *w, const char *s, size_t len) {
    fh_cbor_put_head(w, FH_CBOR_TEXT, len);
    fh_cbor_put_raw(w, s, len);
}

void fh_cbor_put_cstr(fh_cbor_writer *w, const char *s) { fh_cbor_put_text(w, s, strlen(s)); }

void fh_cbor_writer_free(fh_cbor_writer *w) {
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    w->failed = false;
}
