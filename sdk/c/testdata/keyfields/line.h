/* What the key fields tests compare with Go (keyfields_test.go), shared by
 * the native driver (main.c) and the WebAssembly test guest
 * (testdata/keyguest/main.c). kfl_line answers for key and spec (hex names
 * joined by ","): `E <hex error>` when fh_parse_key fails, else for every
 * name and the unknown field `zz` the five accessors' results, `o<hex
 * value>` or `e<hex error>` (raw, string, int, float as its bits, bool),
 * space-separated. The text is malloc'd (NULL when memory runs out). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

typedef struct kfl_buf {
    char *p;
    size_t n, cap;
    bool failed;
} kfl_buf;

static void kfl_put(kfl_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
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

static void kfl_hex(kfl_buf *b, const char *s, size_t n) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char h[2] = {digits[(unsigned char)s[i] >> 4], digits[(unsigned char)s[i] & 15]};
        kfl_put(b, h, 2);
    }
}

static int kfl_nibble(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : 0;
}

static size_t kfl_unhex(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) out[k++] = (char)(kfl_nibble(s[i]) << 4 | kfl_nibble(s[i + 1]));
    return k;
}

static void kfl_res(kfl_buf *b, fh_key_fields *kf, int rc, const char *v, size_t n) {
    if (rc != 0) {
        kfl_put(b, "e", 1);
        kfl_hex(b, fh_key_fields_error(kf), kf->error_len);
    } else {
        kfl_put(b, "o", 1);
        kfl_hex(b, v, n);
    }
}

static char *kfl_line(const char *key, size_t key_len, const char *spec, size_t spec_len, size_t *out_len) {
    enum { MAX = 16 };
    const char *names[MAX];
    size_t count = 0;
    for (size_t i = 0; i < spec_len && count < MAX;) {
        size_t nl = 0;
        while (i + nl < spec_len && spec[i + nl] != ',') nl++;
        char *name = (char *)malloc(nl / 2 + 1);
        if (name == NULL) break;
        name[kfl_unhex(spec + i, nl, name)] = 0;
        names[count++] = name;
        i += nl + 1;
    }
    kfl_buf b = {0};
    fh_key_fields kf;
    if (fh_parse_key(&kf, key, key_len, names, count) != 0) {
        kfl_put(&b, "E ", 2);
        kfl_hex(&b, fh_key_fields_error(&kf), kf.error_len);
    } else {
        for (size_t i = 0; i <= count; i++) {
            const char *name = i < count ? names[i] : "zz";
            const char *v;
            size_t n;
            char num[64];
            int64_t iv;
            double fv;
            bool bv;
            if (i > 0) kfl_put(&b, " ", 1);
            kfl_res(&b, &kf, fh_key_raw(&kf, name, &v, &n), v, n);
            kfl_put(&b, " ", 1);
            int rc = fh_key_string(&kf, name, &v, &n);
            kfl_res(&b, &kf, rc, v, n);
            kfl_put(&b, " ", 1);
            rc = fh_key_int(&kf, name, &iv);
            snprintf(num, sizeof num, "%" PRId64, rc == 0 ? iv : 0);
            kfl_res(&b, &kf, rc, num, strlen(num));
            kfl_put(&b, " ", 1);
            rc = fh_key_float(&kf, name, &fv);
            uint64_t bits = 0;
            if (rc == 0) memcpy(&bits, &fv, 8);
            snprintf(num, sizeof num, "%" PRIu64, bits);
            kfl_res(&b, &kf, rc, num, strlen(num));
            kfl_put(&b, " ", 1);
            rc = fh_key_bool(&kf, name, &bv);
            const char *bs = rc == 0 && bv ? "true" : "false";
            kfl_res(&b, &kf, rc, bs, strlen(bs));
        }
    }
    kfl_put(&b, "", 0);
    fh_key_fields_free(&kf);
    for (size_t i = 0; i < count; i++) free((void *)names[i]);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *out_len = b.n;
    return b.p;
}
