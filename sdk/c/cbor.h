/*
 * cbor.h - the compact CBOR (RFC 8949) reader and writer of the flowhost C
 * SDK. No packaged CBOR library targets wasm32-wasi, so the SDK carries its
 * own; it is public because list and map parameters reach a computation as
 * raw CBOR (fh_param_raw) that this reader walks.
 *
 * The reader is strict the way flowhost envelopes are (abi/ABI.md, section
 * 3): definite lengths only, no reads past the end of the data, every
 * container count checked against the bytes left before anything loops on
 * it, and nesting bounded by the caller's depth. It accepts integer and
 * length heads in any width (the host's decoder does too); only the writer
 * insists on the shortest form.
 *
 * The writer produces RFC 8949 section 4.2.1 Core Deterministic Encoding
 * for everything it is given: shortest heads, definite lengths. Map keys
 * are written in the order the caller writes them; flowhost's encoders
 * write the envelope keys in the canonical order (shorter key first, then
 * bytewise), so their output matches the golden vectors byte for byte.
 */
#ifndef FLOWHOST_CBOR_H
#define FLOWHOST_CBOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Major types. */
enum {
    FH_CBOR_UINT = 0,
    FH_CBOR_NEGINT = 1,
    FH_CBOR_BYTES = 2,
    FH_CBOR_TEXT = 3,
    FH_CBOR_ARRAY = 4,
    FH_CBOR_MAP = 5,
    FH_CBOR_TAG = 6,
    FH_CBOR_SIMPLE = 7 /* false, true, null, undefined, floats */
};

/* FH_CBOR_MAX_DEPTH is the deepest nesting of arrays and maps any flowhost
 * envelope may have (abi/ABI.md): a container at depth 32 (the envelope
 * itself being depth 0) is rejected. */
#define FH_CBOR_MAX_DEPTH 32

/* One item head. */
typedef struct fh_cbor_item {
    uint8_t major; /* FH_CBOR_UINT ... FH_CBOR_SIMPLE */
    uint8_t info;  /* the head's additional information (low 5 bits) */
    /* The value (uint), -1-value (negative int), length (bytes, text),
     * count (array, map: pairs), tag number, or for simple values the
     * simple value or the raw bits of a float. */
    uint64_t arg;
} fh_cbor_item;

/* fh_cbor_reader reads items from a byte range it never writes. After the
 * first error every call fails and err keeps the first message. */
typedef struct fh_cbor_reader {
    const uint8_t *p;   /* next byte to read */
    const uint8_t *end; /* one past the last byte */
    const char *err;    /* NULL, or why reading stopped (static text) */
} fh_cbor_reader;

/* fh_cbor_reader_init starts reading the len bytes at data. */
void fh_cbor_reader_init(fh_cbor_reader *r, const void *data, size_t len);

/* fh_cbor_remaining returns the number of bytes not yet read. */
size_t fh_cbor_remaining(const fh_cbor_reader *r);

/* fh_cbor_fail records msg as the reader's error (unless one is already
 * recorded) and returns -1, so that `return fh_cbor_fail(r, "...")` reads
 * well. */
int fh_cbor_fail(fh_cbor_reader *r, const char *msg);

/* fh_cbor_head reads one item head. It fails on the end of the data, an
 * indefinite length (also for a break byte), the reserved additional
 * information 28-30 and a two-byte simple value below 32. For byte and
 * text strings it also checks that the content fits in the data, and for
 * arrays and maps that the count does (every element takes at least one
 * byte), so that callers may loop on arg. It returns 0 or -1. */
int fh_cbor_head(fh_cbor_reader *r, fh_cbor_item *it);

/* fh_cbor_string returns, after fh_cbor_head read a byte or text string
 * head, the string's content, and steps over it. It does not check UTF-8:
 * see fh_cbor_read_text. */
const uint8_t *fh_cbor_string(fh_cbor_reader *r, const fh_cbor_item *it);

/* fh_cbor_utf8_valid reports whether the n bytes at s are valid UTF-8 with
 * Go's rules (no surrogates, no overlong forms, nothing above U+10FFFF). */
bool fh_cbor_utf8_valid(const uint8_t *s, size_t n);

/* fh_cbor_utf8_decode decodes the rune at the start of the n bytes at s
 * into *rune and returns its width, or 0 when the bytes there are not
 * valid UTF-8 (or n is 0). */
size_t fh_cbor_utf8_decode(const uint8_t *s, size_t n, uint32_t *rune);

/* Typed reads of one complete item. Each returns 0, or -1 when the item is
 * of another type or malformed. Strings are returned without copying and
 * are not NUL-terminated. */
int fh_cbor_read_uint(fh_cbor_reader *r, uint64_t *v);
int fh_cbor_read_int(fh_cbor_reader *r, int64_t *v); /* within int64 */
int fh_cbor_read_bytes(fh_cbor_reader *r, const uint8_t **s, size_t *len);
int fh_cbor_read_text(fh_cbor_reader *r, const char **s, size_t *len); /* valid UTF-8 */
int fh_cbor_read_bool(fh_cbor_reader *r, bool *v);
int fh_cbor_read_float(fh_cbor_reader *r, double *v); /* half, single or double */
/* fh_cbor_read_array and fh_cbor_read_map read a container head and return
 * its count (for a map: the number of key/value pairs); the elements
 * follow. The count is backed by the bytes left. */
int fh_cbor_read_array(fh_cbor_reader *r, size_t *count);
int fh_cbor_read_map(fh_cbor_reader *r, size_t *count);

/* fh_cbor_float_value converts the raw bits of a float item (info 25, 26
 * or 27) to a double. */
double fh_cbor_float_value(const fh_cbor_item *it);

/* fh_cbor_skip steps over one complete item of any type, containers and
 * tags included, nesting at most FH_CBOR_MAX_DEPTH - depth levels deep
 * (depth is the nesting level of the item). It walks iteratively. */
int fh_cbor_skip(fh_cbor_reader *r, int depth);

/* fh_cbor_writer appends CBOR to a buffer it grows with realloc. An
 * allocation failure makes it failed: later writes do nothing, and the
 * caller checks failed once at the end. */
typedef struct fh_cbor_writer {
    uint8_t *buf;
    size_t len;
    size_t cap;
    bool failed;
} fh_cbor_writer;

/* fh_cbor_reserve makes room for n more bytes and returns where they go,
 * or NULL (and failed) when memory is exhausted. */
uint8_t *fh_cbor_reserve(fh_cbor_writer *w, size_t n);

/* fh_cbor_put_head writes a head of major type major with argument arg in
 * its shortest form. */
void fh_cbor_put_head(fh_cbor_writer *w, int major, uint64_t arg);
void fh_cbor_put_uint(fh_cbor_writer *w, uint64_t v);
void fh_cbor_put_int(fh_cbor_writer *w, int64_t v);
void fh_cbor_put_bytes(fh_cbor_writer *w, const void *s, size_t len);
void fh_cbor_put_text(fh_cbor_writer *w, const char *s, size_t len);
/* fh_cbor_put_cstr writes a NUL-terminated text string. */
void fh_cbor_put_cstr(fh_cbor_writer *w, const char *s);
/* fh_cbor_put_raw appends n bytes of already encoded CBOR. */
void fh_cbor_put_raw(fh_cbor_writer *w, const void *data, size_t n);

/* fh_cbor_head_size returns how many bytes the shortest head for arg
 * takes; fh_cbor_encode_head writes it to out (at least 9 bytes) and
 * returns that size. */
size_t fh_cbor_head_size(uint64_t arg);
size_t fh_cbor_encode_head(uint8_t *out, int major, uint64_t arg);

/* fh_cbor_writer_free releases the buffer; the writer is empty and usable
 * afterwards. */
void fh_cbor_writer_free(fh_cbor_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* FLOWHOST_CBOR_H */
