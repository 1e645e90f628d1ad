/*
 * A native driver of the SDK's entry points, built by native_test.go with
 * clang -fsanitize=address,undefined together with the SDK and the test
 * guest. It reads records from stdin, each a kind byte ('I' init, 'P'
 * process), a little-endian uint32 length and that many bytes, and answers
 * each with a little-endian int32 status, a uint32 length and the result
 * bytes. The part of the fh_entry_alloc buffer beyond each envelope is
 * poisoned while the SDK runs, so AddressSanitizer catches any read past
 * the envelope's end even when the buffer is reused.
 */
#include <malloc.h>
#include <sanitizer/asan_interface.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flowhost.h"

static void put_u32(uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fwrite(b, 1, 4, stdout);
}

int main(void) {
    for (;;) {
        int kind = getchar();
        if (kind == EOF) {
            return 0;
        }
        uint8_t b[4];
        if (fread(b, 1, 4, stdin) != 4) {
            fprintf(stderr, "harness: truncated record\n");
            return 2;
        }
        uint32_t len = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        uint8_t *in = (uint8_t *)fh_entry_alloc((int32_t)len);
        if (in == NULL || fread(in, 1, len, stdin) != len) {
            fprintf(stderr, "harness: cannot read %u bytes\n", len);
            return 2;
        }
        size_t usable = malloc_usable_size(in);
        ASAN_POISON_MEMORY_REGION(in + len, usable - len);
        const uint8_t *out = NULL;
        size_t n = 0;
        int status = kind == 'I' ? fh_entry_init(in, (int32_t)len, &out, &n) : fh_entry_process(in, (int32_t)len, &out, &n);
        ASAN_UNPOISON_MEMORY_REGION(in + len, usable - len);
        put_u32((uint32_t)status);
        put_u32((uint32_t)n);
        if (n > 0) {
            fwrite(out, 1, n, stdout);
        }
        fflush(stdout);
    }
}
