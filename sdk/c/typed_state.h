/* Typed state for the flowhost C SDK: named cells (a value, a list, a map)
 * layered on a key's one state blob, written byte for byte as the Go and
 * Rust SDKs write them (sdk/JOINS.md, "Typed state"). Elements are byte
 * buffers: the computation encodes them (JSON text, or CBOR with cbor.h).
 * Build with typed_state.c next to flowhost.c and cbor.c. */
#ifndef FLOWHOST_TYPED_STATE_H
#define FLOWHOST_TYPED_STATE_H

#include "flowhost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Results of the typed state calls. A call that fails changes nothing. */
enum {
    FH_TS_OK = 0,      /* done (a read: 1 when found, 0 when not) */
    FH_TS_MISUSE = -1, /* a bug in the computation; the batch fails with status -2 */
    FH_TS_CELL = -2,   /* the cell is another kind, or a map key is not UTF-8 */
    FH_TS_STATE = -3,  /* the key's state is not typed state */
    FH_TS_QUOTA = -4,  /* fh_save_state: the blob is over the limit; the state stays as it was */
    FH_TS_NOMEM = -5   /* memory ran out */
};

/* fh_ts_error describes the last failed typed state call. msg is the same
 * text as the Go SDK's error (`state cell "l": is a list, used as a value`,
 * `typed state: byte 3: cell "a": ...`, `key "k": typed state of 107 bytes
 * exceeds the limit of 50 bytes; its state stays as it was`). offset is the
 * blob's byte for FH_TS_STATE; size and limit are set for FH_TS_QUOTA. */
typedef struct fh_ts_error {
    int code;
    const char *msg;
    size_t offset;
    size_t size, limit;
} fh_ts_error;

/* fh_ts_last_error is valid until the next typed state call. */
const fh_ts_error *fh_ts_last_error(void);

/* Cells are named by NUL-terminated text. The key's state is decoded on the
 * first use of any cell. Pointers handed out stay valid until the next write
 * to that cell, fh_save_state or fh_discard_state_changes, or the key's end. */
/* fh_value_get: 1 with the value, 0 when there is none; fh_value_set
 * copies the value in, creating the cell. */
int fh_value_get(fh_key *k, const char *cell, const uint8_t **data, size_t *len);
int fh_value_set(fh_key *k, const char *cell, const void *data, size_t len);

/* fh_list_len sets *n to the number of elements (0 when no cell). */
int fh_list_len(fh_key *k, const char *cell, size_t *n);
/* fh_list_at: 1 with the element, 0 past the end (or no cell). */
int fh_list_at(fh_key *k, const char *cell, size_t i, const uint8_t **data, size_t *len);
/* fh_list_append copies the element to the end, creating the cell. */
int fh_list_append(fh_key *k, const char *cell, const void *data, size_t len);

/* fh_map_len sets *n to the number of entries; fh_map_get: 1 with the
 * entry's value, 0 when there is none. */
int fh_map_len(fh_key *k, const char *cell, size_t *n);
int fh_map_get(fh_key *k, const char *cell, const char *key, size_t key_len, const uint8_t **data, size_t *len);
/* fh_map_entry_at: the i-th entry in sorted (bytewise) key order; 1, or 0 past the end. */
int fh_map_entry_at(fh_key *k, const char *cell, size_t i, const char **key, size_t *key_len, const uint8_t **data,
                    size_t *len);
/* fh_map_put copies the entry in, creating the cell; the key must be UTF-8. */
int fh_map_put(fh_key *k, const char *cell, const char *key, size_t key_len, const void *data, size_t len);
/* fh_map_delete removes the entry; removing the last one removes the cell. */
int fh_map_delete(fh_key *k, const char *cell, const char *key, size_t key_len);

/* fh_cell_clear removes the cell, whatever its kind. */
int fh_cell_clear(fh_key *k, const char *cell);

/* fh_save_state writes the cells into the key's state once: the canonical
 * blob, or a delete when no cell is left. Over the limit it returns
 * FH_TS_QUOTA, the state stays as it was and the changes stay pending.
 * Changes unsaved when flowhost_process_key returns 0 are saved then, and a
 * failure there fails the key ("saving typed state at the end of the batch:
 * ..."), so no write is lost silently. fh_set_state or fh_delete_state
 * over unsaved changes is misuse. */
int fh_save_state(fh_key *k);
/* fh_discard_state_changes drops unsaved changes: the next use reads the
 * state as it is. */
void fh_discard_state_changes(fh_key *k);

/* fh_state_set_limit sets the limit fh_save_state checks (0: the ABI's
 * 16 MiB, which is also the most). */
void fh_state_set_limit(size_t bytes);
/* fh_state_limit_param sets the limit from the parameter
 * max_state_bytes_per_key when present (set it equal to the tenant's
 * quotas.max_state_bytes_per_key, which the guest is not told); call it in
 * flowhost_init_params and return its result: 0, or -1 with the reason
 * given to fh_params_fail. */
int fh_state_limit_param(fh_params *p);

#ifdef __cplusplus
}
#endif

#endif
