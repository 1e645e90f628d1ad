//go:build ignore

// (The Go package sdk/c embeds this file; the constraint above keeps the go
// tool from taking it for cgo source of that package.)

/* Typed state cells: a port of sdk/go/typed_state.go, same blob, same
 * error texts. The cells of the key being processed live here; flowhost.c
 * calls the hooks set on the first use of a cell at a key's start and end
 * and before a raw state write, so a guest that never uses a cell links
 * none of this file. */
#include "typed_state.h"

#include <stdlib.h>
#include <string.h>

#include "cbor.h"

/* From flowhost.c: the hooks it calls, set on the first use of a cell. */
extern void (*fh__ts_begin)(void);
extern const char *(*fh__ts_end)(fh_key *k);
extern bool (*fh__ts_raw)(fh_key *k);
static void hook_begin(void);
static const char *hook_end(fh_key *k);
static bool hook_raw(fh_key *k);

bool fh__ts_usable(const fh_key *k, const char *fn, bool write);
void fh__ts_quote(fh_cbor_writer *w, const void *s, size_t n);
int fh__ts_misuse(const char *text);

#define ABI_MAX_STATE ((size_t)16 << 20)

enum { KIND_VALUE = 1, KIND_LIST = 2, KIND_MAP = 3 };

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

typedef struct entry {
    buf key, val;
} entry;

typedef struct cell {
    buf name;
    int kind;
    buf value;
    buf *list;
    size_t list_n, list_cap;
    entry *map; /* sorted bytewise by key */
    size_t map_n, map_cap;
} cell;

static struct {
    const fh_key *key; /* whose cells are loaded; NULL: none */
    bool dirty, saving;
    cell *cells; /* sorted canonically: shorter name first, then bytewise */
    size_t n, cap;
    size_t limit;
    fh_cbor_writer msg;
    fh_ts_error err;
} T;

static const char *const kind_names[] = {"unknown", "a value", "a list", "a map"};
static const char *const major_names[8] = {"an unsigned integer", "a negative integer", "a byte string",
                                           "a text string", "an array", "a map", "a tag", "a simple value or float"};

/* ---- messages ---- */

static void m_str(const char *s) { fh_cbor_put_raw(&T.msg, s, strlen(s)); }
static void m_u64(uint64_t v) {
    char d[24];
    size_t i = sizeof d;
    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    fh_cbor_put_raw(&T.msg, d + i, sizeof d - i);
}
static void m_begin(void) {
    T.msg.len = 0;
    T.msg.failed = false;
}
static int m_end(int code) {
    fh_cbor_put_raw(&T.msg, "", 1);
    memset(&T.err, 0, sizeof T.err);
    T.err.code = code;
    T.err.msg = T.msg.failed ? "flowhost: out of memory" : (const char *)T.msg.buf;
    return code;
}
static int nomem(void) {
    m_begin();
    m_str("flowhost: typed state: out of memory");
    return m_end(FH_TS_NOMEM);
}

const fh_ts_error *fh_ts_last_error(void) { return &T.err; }

/* ---- cells ---- */

static void free_cell(cell *c) {
    free(c->name.p);
    free(c->value.p);
    for (size_t i = 0; i < c->list_n; i++) {
        free(c->list[i].p);
    }
    free(c->list);
    for (size_t i = 0; i < c->map_n; i++) {
        free(c->map[i].key.p);
        free(c->map[i].val.p);
    }
    free(c->map);
    memset(c, 0, sizeof *c);
}

static void drop_cells(void) {
    for (size_t i = 0; i < T.n; i++) {
        free_cell(&T.cells[i]);
    }
    T.n = 0;
    T.key = NULL;
    T.dirty = false;
}

static bool dup(buf *b, const void *p, size_t n) {
    b->p = (uint8_t *)malloc(n ? n : 1);
    if (b->p == NULL) {
        return false;
    }
    if (n) {
        memcpy(b->p, p, n);
    }
    b->n = n;
    return true;
}

static int bytes_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0; /* an empty key may be NULL */
    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn;
}

/* canon_cmp orders as RFC 8949 deterministic map keys: shorter first. */
static int canon_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    if (an != bn) {
        return an < bn ? -1 : 1;
    }
    return an ? memcmp(a, b, an) : 0;
}

/* find_cell returns the index of name, or where it would go (found false). */
static size_t find_cell(const uint8_t *name, size_t n, bool *found) {
    size_t lo = 0, hi = T.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = canon_cmp(T.cells[mid].name.p, T.cells[mid].name.n, name, n);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

static size_t find_entry(const cell *c, const uint8_t *key, size_t n, bool *found) {
    size_t lo = 0, hi = c->map_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = bytes_cmp(c->map[mid].key.p, c->map[mid].key.n, key, n);
        if (r == 0) {
            *found = true;
            return mid;
        }
        if (r < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

static bool grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) {
        return true;
    }
    size_t c = *cap ? 2 * *cap : 4;
    if (c > SIZE_MAX / elem) {
        return false;
    }
    void *q = realloc(*p, c * elem);
    if (q == NULL) {
        return false;
    }
    *p = q;
    *cap = c;
    return true;
}

/* insert_cell makes a cell of kind at index i, named name. */
static cell *insert_cell(size_t i, const uint8_t *name, size_t n, int kind) {
    if (!grow((void **)&T.cells, &T.cap, T.n, sizeof(cell))) {
        return NULL;
    }
    cell c;
    memset(&c, 0, sizeof c);
    if (!dup(&c.name, name, n)) {
        return NULL;
    }
    c.kind = kind;
    memmove(&T.cells[i + 1], &T.cells[i], (T.n - i) * sizeof(cell));
    T.cells[i] = c;
    T.n++;
    return &T.cells[i];
}

static void remove_cell(size_t i) {
    free_cell(&T.cells[i]);
    memmove(&T.cells[i], &T.cells[i + 1], (T.n - i - 1) * sizeof(cell));
    T.n--;
}

/* ---- decoding (sdk/go decodeTypedState) ---- */

typedef struct sdec {
    const uint8_t *b;
    size_t len, off;
    const uint8_t *cell;
    size_t cell_len;
    bool in_cell;
} sdec;

static int sfail(sdec *d, size_t off, void (*msg)(const void *), const void *arg) {
    m_begin();
    m_str("typed state: byte ");
    m_u64(off);
    m_str(": ");
    /* As Go's StateError: a cell named "" is not named. */
    if (d->in_cell && d->cell_len > 0) {
        m_str("cell ");
        fh__ts_quote(&T.msg, d->cell, d->cell_len);
        m_str(": ");
    }
    msg(arg);
    int rc = m_end(FH_TS_STATE);
    T.err.offset = off;
    return rc;
}
static void msg_text(const void *s) { m_str((const char *)s); }
#define SFAIL(d, off, text) sfail(d, off, msg_text, text)

typedef struct want_got {
    const char *want1, *want2, *want3; /* concatenated */
    const uint8_t *q;                  /* quoted in the middle, when set */
    size_t qn;
    int got;
} want_got;
static void msg_want(const void *a) {
    const want_got *w = (const want_got *)a;
    m_str("expected ");
    m_str(w->want1);
    if (w->q) {
        fh__ts_quote(&T.msg, w->q, w->qn);
    }
    if (w->want2) {
        m_str(w->want2);
    }
    m_str(", got ");
    m_str(major_names[w->got]);
}

static int peek_major(sdec *d, int *major) {
    if (d->off >= d->len) {
        return SFAIL(d, d->off, "unexpected end of the state");
    }
    *major = d->b[d->off] >> 5;
    return 0;
}

typedef struct len_left {
    uint64_t arg;
    size_t left;
} len_left;
static void msg_len(const void *a) {
    const len_left *l = (const len_left *)a;
    m_str("a length of ");
    m_u64(l->arg);
    m_str(" exceeds the ");
    m_u64(l->left);
    m_str(" bytes left");
}
static void msg_reserved(const void *a) {
    m_str("reserved additional information ");
    m_u64(*(const unsigned *)a);
}

/* head reads an item's head of major type major; want describes it for the
 * error (want.got is filled in). */
static int head(sdec *d, int major, want_got *want, size_t *out) {
    size_t start = d->off;
    int m;
    int rc = peek_major(d, &m);
    if (rc) {
        return rc;
    }
    if (m != major) {
        want->got = m;
        return sfail(d, start, msg_want, want);
    }
    unsigned info = d->b[d->off] & 0x1f;
    d->off++;
    uint64_t arg = 0;
    if (info < 24) {
        arg = info;
    } else if (info <= 27) {
        size_t n = (size_t)1 << (info - 24);
        if (d->len - d->off < n) {
            return SFAIL(d, start, "unexpected end of the state in an item's head");
        }
        for (size_t i = 0; i < n; i++) {
            arg = arg << 8 | d->b[d->off + i];
        }
        d->off += n;
    } else if (info == 31) {
        return SFAIL(d, start, "indefinite lengths are not canonical");
    } else {
        return sfail(d, start, msg_reserved, &info);
    }
    /* Every element takes at least a byte: a count larger than the rest of
     * the blob is wrong, and checking it bounds allocations. */
    if (arg > (uint64_t)(d->len - d->off)) {
        len_left l = {arg, d->len - d->off};
        return sfail(d, start, msg_len, &l);
    }
    *out = (size_t)arg;
    return 0;
}

static int read_bytes(sdec *d, want_got *want, buf *out) {
    size_t n;
    int rc = head(d, 2, want, &n);
    if (rc) {
        return rc;
    }
    if (!dup(out, d->b + d->off, n)) {
        return nomem();
    }
    d->off += n;
    return 0;
}

static int read_text(sdec *d, const char *want, buf *out) {
    size_t start = d->off, n;
    want_got w = {want, NULL, NULL, NULL, 0, 0};
    int rc = head(d, 3, &w, &n);
    if (rc) {
        return rc;
    }
    if (!fh_cbor_utf8_valid(d->b + d->off, n)) {
        return SFAIL(d, start, "text is not valid UTF-8");
    }
    if (!dup(out, d->b + d->off, n)) {
        return nomem();
    }
    d->off += n;
    return 0;
}

static void msg_dup_key(const void *a) {
    const buf *k = (const buf *)a;
    m_str("map key ");
    fh__ts_quote(&T.msg, k->p, k->n);
    m_str(" appears twice");
}

static void msg_not_cell(const void *a) {
    m_str("expected a cell (a byte string, an array or a map), got ");
    m_str(major_names[*(const int *)a]);
}

/* read_cell reads the cell named (d->cell) into c, which is zeroed. */
static int read_cell(sdec *d, cell *c) {
    int m;
    int rc = peek_major(d, &m);
    if (rc) {
        return rc;
    }
    want_got none = {"", NULL, NULL, NULL, 0, 0};
    if (m == 2) {
        c->kind = KIND_VALUE;
        return read_bytes(d, &none, &c->value);
    }
    if (m == 4) {
        size_t start = d->off, n;
        if ((rc = head(d, 4, &none, &n)) != 0) {
            return rc;
        }
        if (n == 0) {
            return SFAIL(d, start, "an empty list is not stored (a cell exists only while it holds something)");
        }
        c->kind = KIND_LIST;
        c->list = (buf *)calloc(n, sizeof(buf));
        if (c->list == NULL) {
            return nomem();
        }
        c->list_cap = n;
        for (size_t i = 0; i < n; i++) {
            char want[64];
            /* "list element N to be a byte string" */
            char num[24];
            size_t j = sizeof num;
            size_t v = i;
            num[--j] = 0;
            do {
                num[--j] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            strcpy(want, "list element ");
            strcat(want, num + j);
            strcat(want, " to be a byte string");
            want_got w = {want, NULL, NULL, NULL, 0, 0};
            if ((rc = read_bytes(d, &w, &c->list[i])) != 0) {
                return rc;
            }
            c->list_n++;
        }
        return 0;
    }
    if (m == 5) {
        size_t start = d->off, n;
        if ((rc = head(d, 5, &none, &n)) != 0) {
            return rc;
        }
        if (n == 0) {
            return SFAIL(d, start, "an empty map is not stored (a cell exists only while it holds something)");
        }
        c->kind = KIND_MAP;
        for (size_t i = 0; i < n; i++) {
            size_t kstart = d->off;
            buf key;
            if ((rc = read_text(d, "a map entry's key (text)", &key)) != 0) {
                return rc;
            }
            bool found;
            size_t at = find_entry(c, key.p, key.n, &found);
            if (found) {
                rc = sfail(d, kstart, msg_dup_key, &key);
                free(key.p);
                return rc;
            }
            want_got w = {"map entry ", " to be a byte string", NULL, key.p, key.n, 0};
            buf val;
            if ((rc = read_bytes(d, &w, &val)) != 0) {
                free(key.p);
                return rc;
            }
            if (!grow((void **)&c->map, &c->map_cap, c->map_n, sizeof(entry))) {
                free(key.p);
                free(val.p);
                return nomem();
            }
            memmove(&c->map[at + 1], &c->map[at], (c->map_n - at) * sizeof(entry));
            c->map[at].key = key;
            c->map[at].val = val;
            c->map_n++;
        }
        return 0;
    }
    return sfail(d, d->off, msg_not_cell, &m);
}

static void msg_after(const void *a) {
    m_u64(*(const size_t *)a);
    m_str(" bytes after the map of cells");
}

/* decode fills T.cells from blob (T.cells empty). */
static int decode(const uint8_t *blob, size_t len) {
    if (len == 0) {
        return 0;
    }
    sdec d = {blob, len, 0, NULL, 0, false};
    want_got w = {"the state to be a map of cells", NULL, NULL, NULL, 0, 0};
    size_t n;
    int rc = head(&d, 5, &w, &n);
    if (rc) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        d.in_cell = false;
        size_t start = d.off;
        buf name;
        if ((rc = read_text(&d, "a cell name (text)", &name)) != 0) {
            return rc;
        }
        bool found;
        size_t at = find_cell(name.p, name.n, &found);
        d.cell = name.p;
        d.cell_len = name.n;
        d.in_cell = true;
        if (found) {
            rc = SFAIL(&d, start, "the cell appears twice");
            free(name.p);
            return rc;
        }
        cell c;
        memset(&c, 0, sizeof c);
        rc = read_cell(&d, &c);
        if (rc == 0 && !grow((void **)&T.cells, &T.cap, T.n, sizeof(cell))) {
            rc = nomem();
        }
        if (rc) {
            free_cell(&c);
            free(name.p);
            return rc;
        }
        c.name = name;
        memmove(&T.cells[at + 1], &T.cells[at], (T.n - at) * sizeof(cell));
        T.cells[at] = c;
        T.n++;
    }
    if (d.off != len) {
        d.in_cell = false;
        size_t left = len - d.off;
        return sfail(&d, d.off, msg_after, &left);
    }
    return 0;
}

/* ---- the key's cells ---- */

/* load makes k's cells current, decoding its state on first use. */
static int load(fh_key *k) {
    if (T.key == k) {
        return 0;
    }
    fh__ts_begin = hook_begin;
    fh__ts_end = hook_end;
    fh__ts_raw = hook_raw;
    drop_cells();
    const uint8_t *blob;
    size_t len;
    if (!fh_state(k, &blob, &len)) {
        len = 0;
    }
    int rc = decode(blob, len);
    if (rc) {
        drop_cells();
        return rc;
    }
    T.key = k;
    return 0;
}

static int kind_error(const char *name, int is, int want) {
    m_begin();
    m_str("state cell ");
    fh__ts_quote(&T.msg, name, strlen(name));
    m_str(": is ");
    m_str(kind_names[is]);
    m_str(", used as ");
    m_str(kind_names[want]);
    return m_end(FH_TS_CELL);
}

/* cell_of finds name, which must be of kind want when it exists: *c is
 * NULL when there is none. */
static int cell_of(fh_key *k, const char *fn, bool write, const char *name, int want, cell **c, size_t *at) {
    if (!fh__ts_usable(k, fn, write) || name == NULL) {
        if (name == NULL) {
            fh_log(FH_LOG_ERROR, "flowhost: a typed state call with a NULL cell name");
        }
        m_begin();
        m_str("flowhost: misuse of typed state");
        return m_end(FH_TS_MISUSE);
    }
    int rc = load(k);
    if (rc) {
        return rc;
    }
    bool found;
    size_t i = find_cell((const uint8_t *)name, strlen(name), &found);
    *c = found ? &T.cells[i] : NULL;
    if (at) {
        *at = i;
    }
    if (found && T.cells[i].kind != want) {
        return kind_error(name, T.cells[i].kind, want);
    }
    return 0;
}

static void out(const uint8_t **data, size_t *len, const buf *b) {
    if (data) {
        *data = b ? b->p : NULL;
    }
    if (len) {
        *len = b ? b->n : 0;
    }
}

int fh_value_get(fh_key *k, const char *name, const uint8_t **data, size_t *len) {
    cell *c;
    out(data, len, NULL);
    int rc = cell_of(k, "fh_value_get", false, name, KIND_VALUE, &c, NULL);
    if (rc || c == NULL) {
        return rc;
    }
    out(data, len, &c->value);
    return 1;
}

int fh_value_set(fh_key *k, const char *name, const void *data, size_t len) {
    cell *c;
    size_t at;
    if (data == NULL && len > 0) {
        fh__ts_misuse("flowhost: fh_value_set with NULL data and a length");
        return FH_TS_MISUSE;
    }
    int rc = cell_of(k, "fh_value_set", true, name, KIND_VALUE, &c, &at);
    if (rc) {
        return rc;
    }
    buf b;
    if (!dup(&b, data, len)) {
        return nomem();
    }
    if (c == NULL && (c = insert_cell(at, (const uint8_t *)name, strlen(name), KIND_VALUE)) == NULL) {
        free(b.p);
        return nomem();
    }
    free(c->value.p);
    c->value = b;
    T.dirty = true;
    return 0;
}

int fh_list_len(fh_key *k, const char *name, size_t *n) {
    cell *c;
    if (n) {
        *n = 0;
    }
    int rc = cell_of(k, "fh_list_len", false, name, KIND_LIST, &c, NULL);
    if (rc == 0 && c && n) {
        *n = c->list_n;
    }
    return rc;
}

int fh_list_at(fh_key *k, const char *name, size_t i, const uint8_t **data, size_t *len) {
    cell *c;
    out(data, len, NULL);
    int rc = cell_of(k, "fh_list_at", false, name, KIND_LIST, &c, NULL);
    if (rc || c == NULL || i >= c->list_n) {
        return rc;
    }
    out(data, len, &c->list[i]);
    return 1;
}

int fh_list_append(fh_key *k, const char *name, const void *data, size_t len) {
    cell *c;
    size_t at;
    if (data == NULL && len > 0) {
        fh__ts_misuse("flowhost: fh_list_append with NULL data and a length");
        return FH_TS_MISUSE;
    }
    int rc = cell_of(k, "fh_list_append", true, name, KIND_LIST, &c, &at);
    if (rc) {
        return rc;
    }
    buf b;
    if (!dup(&b, data, len)) {
        return nomem();
    }
    if (c == NULL && (c = insert_cell(at, (const uint8_t *)name, strlen(name), KIND_LIST)) == NULL) {
        free(b.p);
        return nomem();
    }
    if (!grow((void **)&c->list, &c->list_cap, c->list_n, sizeof(buf))) {
        free(b.p);
        if (c->list_n == 0) {
            remove_cell((size_t)(c - T.cells));
        }
        return nomem();
    }
    c->list[c->list_n++] = b;
    T.dirty = true;
    return 0;
}

int fh_map_len(fh_key *k, const char *name, size_t *n) {
    cell *c;
    if (n) {
        *n = 0;
    }
    int rc = cell_of(k, "fh_map_len", false, name, KIND_MAP, &c, NULL);
    if (rc == 0 && c && n) {
        *n = c->map_n;
    }
    return rc;
}

int fh_map_get(fh_key *k, const char *name, const char *key, size_t key_len, const uint8_t **data, size_t *len) {
    cell *c;
    out(data, len, NULL);
    if (key == NULL && key_len > 0) {
        return fh__ts_misuse("flowhost: fh_map_get with a NULL key and a length");
    }
    int rc = cell_of(k, "fh_map_get", false, name, KIND_MAP, &c, NULL);
    if (rc || c == NULL) {
        return rc;
    }
    bool found;
    size_t i = find_entry(c, (const uint8_t *)key, key_len, &found);
    if (!found) {
        return 0;
    }
    out(data, len, &c->map[i].val);
    return 1;
}

int fh_map_entry_at(fh_key *k, const char *name, size_t i, const char **key, size_t *key_len, const uint8_t **data,
                    size_t *len) {
    cell *c;
    out(data, len, NULL);
    if (key) {
        *key = NULL;
    }
    if (key_len) {
        *key_len = 0;
    }
    int rc = cell_of(k, "fh_map_entry_at", false, name, KIND_MAP, &c, NULL);
    if (rc || c == NULL || i >= c->map_n) {
        return rc;
    }
    if (key) {
        *key = (const char *)c->map[i].key.p;
    }
    if (key_len) {
        *key_len = c->map[i].key.n;
    }
    out(data, len, &c->map[i].val);
    return 1;
}

int fh_map_put(fh_key *k, const char *name, const char *key, size_t key_len, const void *data, size_t len) {
    cell *c;
    size_t at;
    if ((data == NULL && len > 0) || (key == NULL && key_len > 0)) {
        fh__ts_misuse("flowhost: fh_map_put with NULL data or key and a length");
        return FH_TS_MISUSE;
    }
    int rc = cell_of(k, "fh_map_put", true, name, KIND_MAP, &c, &at);
    if (rc) {
        return rc;
    }
    if (!fh_cbor_utf8_valid((const uint8_t *)key, key_len)) {
        m_begin();
        m_str("state cell ");
        fh__ts_quote(&T.msg, name, strlen(name));
        m_str(": entry ");
        fh__ts_quote(&T.msg, key, key_len);
        m_str(": the key is not valid UTF-8");
        return m_end(FH_TS_CELL);
    }
    buf v;
    if (!dup(&v, data, len)) {
        return nomem();
    }
    bool created = false;
    if (c == NULL) {
        if ((c = insert_cell(at, (const uint8_t *)name, strlen(name), KIND_MAP)) == NULL) {
            free(v.p);
            return nomem();
        }
        created = true;
    }
    bool found;
    size_t i = find_entry(c, (const uint8_t *)key, key_len, &found);
    if (found) {
        free(c->map[i].val.p);
        c->map[i].val = v;
        T.dirty = true;
        return 0;
    }
    buf kb;
    if (!dup(&kb, key, key_len) || !grow((void **)&c->map, &c->map_cap, c->map_n, sizeof(entry))) {
        free(v.p);
        if (created) {
            remove_cell(at);
        }
        return nomem();
    }
    memmove(&c->map[i + 1], &c->map[i], (c->map_n - i) * sizeof(entry));
    c->map[i].key = kb;
    c->map[i].val = v;
    c->map_n++;
    T.dirty = true;
    return 0;
}

int fh_map_delete(fh_key *k, const char *name, const char *key, size_t key_len) {
    cell *c;
    size_t at;
    if (key == NULL && key_len > 0) {
        return fh__ts_misuse("flowhost: fh_map_delete with a NULL key and a length");
    }
    int rc = cell_of(k, "fh_map_delete", true, name, KIND_MAP, &c, &at);
    if (rc || c == NULL) {
        return rc;
    }
    bool found;
    size_t i = find_entry(c, (const uint8_t *)key, key_len, &found);
    if (!found) {
        return 0;
    }
    free(c->map[i].key.p);
    free(c->map[i].val.p);
    memmove(&c->map[i], &c->map[i + 1], (c->map_n - i - 1) * sizeof(entry));
    c->map_n--;
    if (c->map_n == 0) {
        remove_cell(at);
    }
    T.dirty = true;
    return 0;
}

int fh_cell_clear(fh_key *k, const char *name) {
    if (!fh__ts_usable(k, "fh_cell_clear", true) || name == NULL) {
        return FH_TS_MISUSE;
    }
    int rc = load(k);
    if (rc) {
        return rc;
    }
    bool found;
    size_t i = find_cell((const uint8_t *)name, strlen(name), &found);
    if (found) {
        remove_cell(i);
        T.dirty = true;
    }
    return 0;
}

/* ---- saving ---- */

static void put_buf(fh_cbor_writer *w, int major, const buf *b) {
    fh_cbor_put_head(w, major, b->n);
    fh_cbor_put_raw(w, b->p, b->n);
}

static int canon_entry_cmp(const void *a, const void *b) {
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    return canon_cmp(x->key.p, x->key.n, y->key.p, y->key.n);
}

static bool encode(fh_cbor_writer *w) {
    fh_cbor_put_head(w, FH_CBOR_MAP, T.n);
    for (size_t i = 0; i < T.n; i++) {
        cell *c = &T.cells[i];
        put_buf(w, FH_CBOR_TEXT, &c->name);
        switch (c->kind) {
        case KIND_VALUE:
            put_buf(w, FH_CBOR_BYTES, &c->value);
            break;
        case KIND_LIST:
            fh_cbor_put_head(w, FH_CBOR_ARRAY, c->list_n);
            for (size_t j = 0; j < c->list_n; j++) {
                put_buf(w, FH_CBOR_BYTES, &c->list[j]);
            }
            break;
        case KIND_MAP: {
            /* Kept bytewise for fh_map_entry_at; the blob orders canonically. */
            const entry **order = (const entry **)malloc(c->map_n * sizeof(entry *));
            if (order == NULL) {
                return false;
            }
            for (size_t j = 0; j < c->map_n; j++) {
                order[j] = &c->map[j];
            }
            qsort(order, c->map_n, sizeof(entry *), canon_entry_cmp);
            fh_cbor_put_head(w, FH_CBOR_MAP, c->map_n);
            for (size_t j = 0; j < c->map_n; j++) {
                put_buf(w, FH_CBOR_TEXT, &order[j]->key);
                put_buf(w, FH_CBOR_BYTES, &order[j]->val);
            }
            free(order);
            break;
        }
        }
    }
    return !w->failed;
}

static size_t limit(void) { return T.limit > 0 && T.limit < ABI_MAX_STATE ? T.limit : ABI_MAX_STATE; }

int fh_save_state(fh_key *k) {
    if (T.key != k || !T.dirty) {
        return 0;
    }
    if (!fh__ts_usable(k, "fh_save_state", true)) {
        return FH_TS_MISUSE;
    }
    int rc = 0;
    T.saving = true;
    if (T.n == 0) {
        if (fh_state(k, NULL, NULL)) {
            rc = fh_delete_state(k);
        }
    } else {
        fh_cbor_writer w = {NULL, 0, 0, false};
        if (!encode(&w)) {
            fh_cbor_writer_free(&w);
            T.saving = false;
            return nomem();
        }
        if (w.len > limit()) {
            size_t key_len;
            const char *key = fh_key_text(k, &key_len);
            m_begin();
            m_str("key ");
            fh__ts_quote(&T.msg, key, key_len);
            m_str(": typed state of ");
            m_u64(w.len);
            m_str(" bytes exceeds the limit of ");
            m_u64(limit());
            m_str(" bytes; its state stays as it was");
            rc = m_end(FH_TS_QUOTA);
            T.err.size = w.len;
            T.err.limit = limit();
            fh_cbor_writer_free(&w);
            T.saving = false;
            return rc;
        }
        rc = fh_set_state(k, w.buf, w.len);
        fh_cbor_writer_free(&w);
    }
    T.saving = false;
    if (rc != 0) {
        return nomem();
    }
    T.dirty = false;
    return 0;
}

void fh_discard_state_changes(fh_key *k) {
    if (T.key == k) {
        drop_cells();
    }
}

void fh_state_set_limit(size_t bytes) { T.limit = bytes; }

int fh_state_limit_param(fh_params *p) {
    static const char name[] = "max_state_bytes_per_key";
    if (!fh_param_has(p, name)) {
        return 0;
    }
    int64_t n;
    if (fh_param_int(p, name, &n) != 0) {
        return -1;
    }
    if (n <= 0) {
        m_begin();
        m_str("parameter \"max_state_bytes_per_key\": expected a positive number of bytes, got ");
        if (n < 0) {
            m_str("-");
        }
        m_u64(n < 0 ? (uint64_t)0 - (uint64_t)n : 0);
        fh_cbor_put_raw(&T.msg, "", 1);
        return fh_params_fail(p, T.msg.failed ? "parameter \"max_state_bytes_per_key\": expected a positive number" : (const char *)T.msg.buf);
    }
    T.limit = (uint64_t)n < ABI_MAX_STATE ? (size_t)n : ABI_MAX_STATE;
    return 0;
}

/* ---- hooks called by flowhost.c ---- */

/* hook_begin forgets the previous key's cells. */
static void hook_begin(void) { drop_cells(); }

/* hook_end saves what flowhost_process_key left unsaved; the text of a
 * failure, which fails the key, or NULL. */
static const char *hook_end(fh_key *k) {
    const char *fail = NULL;
    if (T.key == k && T.dirty) {
        int rc = fh_save_state(k);
        if (rc != 0 && rc != FH_TS_MISUSE) {
            static const char prefix[] = "saving typed state at the end of the batch: ";
            fh_cbor_writer w = {NULL, 0, 0, false};
            fh_cbor_put_raw(&w, prefix, sizeof prefix - 1);
            fh_cbor_put_raw(&w, T.err.msg, strlen(T.err.msg) + 1);
            if (w.failed) {
                fh_cbor_writer_free(&w);
                fail = "saving typed state at the end of the batch: out of memory";
            } else {
                /* The message becomes the SDK's buffer until the next call. */
                fh_cbor_writer_free(&T.msg);
                T.msg = w;
                fail = (const char *)T.msg.buf;
            }
        }
    }
    drop_cells();
    return fail;
}

/* hook_raw is called before a raw state write: false (misuse) over
 * unsaved cells; else the next typed use reads the new state. */
static bool hook_raw(fh_key *k) {
    if (T.saving) {
        return true;
    }
    if (T.key == k && T.dirty) {
        return false;
    }
    drop_cells();
    return true;
}
