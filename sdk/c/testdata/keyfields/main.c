/* The native driver of the Go tests of keyfields_test.go: each stdin line
 * is `<hex key> <hex names joined by ,>`; each stdout line is the answer
 * of line.h, the code the WebAssembly test guest runs. */
#include "line.h"

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin) != NULL) {
        size_t l = strcspn(line, "\n");
        line[l] = 0;
        char *sp = strchr(line, ' ');
        size_t kl = sp ? (size_t)(sp - line) : l;
        char *spec = sp ? sp + 1 : line + l;
        char *key = (char *)malloc(kl / 2 + 1);
        size_t key_len = kfl_unhex(line, kl, key);
        size_t n;
        char *out = kfl_line(key, key_len, spec, strlen(spec), &n);
        if (out == NULL) return 1;
        fwrite(out, 1, n, stdout);
        putchar('\n');
        fflush(stdout);
        free(out);
        free(key);
    }
    return 0;
}
