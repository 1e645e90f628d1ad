/* The native driver of the Go test TestParseKeyLikeGo (keyfields_test.go):
 * each stdin line is `<hex key> <hex names joined by ,>`; each stdout line
 * is `E <hex error>` when fh_parse_key fails, else for every name and the
 * unknown field `zz` the five accessors' results, `o<hex value>` or
 * `e<hex error>` (raw, string, int, float as its bits, bool). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

static void hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static size_t unhex(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        sscanf(s + i, "%2x", &v);
        out[k++] = (char)v;
    }
    return k;
}

static void res(fh_key_fields *kf, int rc, const char *v, size_t n) {
    if (rc != 0) {
        putchar('e');
        hex(fh_key_fields_error(kf), kf->error_len);
    } else {
        putchar('o');
        hex(v, n);
    }
}

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin) != NULL) {
        size_t l = strcspn(line, "\n");
        line[l] = 0;
        char *sp = strchr(line, ' ');
        char *namesHex = sp ? sp + 1 : line + l;
        size_t kl = sp ? (size_t)(sp - line) : l;
        char *key = malloc(kl / 2 + 1);
        size_t keyLen = unhex(line, kl, key);
        const char *names[16];
        size_t count = 0;
        for (char *p = namesHex; *p && count < 16;) {
            size_t nl = strcspn(p, ",");
            char *name = malloc(nl / 2 + 1);
            name[unhex(p, nl, name)] = 0;
            names[count++] = name;
            p += nl;
            if (*p == ',') p++;
        }
        fh_key_fields kf;
        if (fh_parse_key(&kf, key, keyLen, names, count) != 0) {
            printf("E ");
            hex(fh_key_fields_error(&kf), kf.error_len);
            printf("\n");
        } else {
            for (size_t i = 0; i <= count; i++) {
                const char *name = i < count ? names[i] : "zz";
                const char *v;
                size_t n;
                char num[64];
                int64_t iv;
                double fv;
                bool bv;
                if (i > 0) putchar(' ');
                res(&kf, fh_key_raw(&kf, name, &v, &n), v, n);
                putchar(' ');
                int rc = fh_key_string(&kf, name, &v, &n);
                res(&kf, rc, v, n);
                putchar(' ');
                rc = fh_key_int(&kf, name, &iv);
                snprintf(num, sizeof num, "%" PRId64, rc == 0 ? iv : 0);
                res(&kf, rc, num, strlen(num));
                putchar(' ');
                rc = fh_key_float(&kf, name, &fv);
                uint64_t bits = 0;
                if (rc == 0) memcpy(&bits, &fv, 8);
                snprintf(num, sizeof num, "%" PRIu64, bits);
                res(&kf, rc, num, strlen(num));
                putchar(' ');
                rc = fh_key_bool(&kf, name, &bv);
                const char *bs = rc == 0 && bv ? "true" : "false";
                res(&kf, rc, bs, strlen(bs));
            }
            printf("\n");
        }
        fflush(stdout);
        fh_key_fields_free(&kf);
        for (size_t i = 0; i < count; i++) free((void *)names[i]);
        free(key);
    }
    return 0;
}
