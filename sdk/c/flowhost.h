/*
 * flowhost.h - the C (and C++) guest SDK of flowhost.
 *
 * A flowhost computation is a WebAssembly reactor that the host calls with
 * batches of keyed messages and due timers, and that answers with derived
 * messages, state changes and timers (abi/ABI.md). This SDK implements
 * every export of ABI v1 (flowhost_abi_v1, flowhost_alloc, flowhost_init,
 * flowhost_process), decodes the host's envelopes strictly and encodes the
 * responses canonically. A computation defines one function:
 *
 *     #include "flowhost.h"
 *
 *     int flowhost_process_key(fh_key *k) {
 *         const fh_message *m;
 *         while ((m = fh_next_message(k)) != NULL) {
 *             fh_emit(k, "out", m->payload, m->payload_len);
 *         }
 *         return 0;
 *     }
 *
 * and optionally flowhost_init_params, and is built with
 *
 *     clang --target=wasm32-wasi -mexec-model=reactor -O2 -mbulk-memory \
 *         -o guest.wasm main.c flowhost.c cbor.c
 *
 * (Debian packages: clang lld wasi-libc libclang-rt-dev-wasm32; for C++
 * also libc++-dev-wasm32, compiling with -fno-exceptions). README.md in
 * this directory is the full reference.
 *
 * Conventions: functions that can be misused return 0 on success and -1
 * on misuse. Misuse (emitting to an undeclared stream, state or timers in
 * a map computation, a parent that is not an input of the key, calling a
 * function on a key that is not being processed) is a bug in the
 * computation, the equivalent of a panic in the Go SDK: the SDK logs it at
 * error level, runs no further key, and the batch fails with status -2
 * (guest failure), which the host retries or dead-letters by policy.
 *
 * Memory: everything the SDK hands out (fh_key, fh_message, fh_timer, key
 * and id texts, payloads, state) belongs to the SDK and stays valid until
 * the end of the batch (the return of the flowhost_process_key call of the
 * batch's last key); copy what must outlive it. What the computation
 * passes in (payloads, state, texts) is copied before the call returns.
 * fh_params and everything read from it stay valid for the life of the
 * instance. Texts handed out are NUL-terminated; their *_len fields give
 * the length, which matters only for texts that contain NUL.
 */
#ifndef FLOWHOST_H
#define FLOWHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------
 * What the computation defines.
 * ------------------------------------------------------------------ */

typedef struct fh_key fh_key;
typedef struct fh_params fh_params;

/*
 * flowhost_process_key is called once per key of every batch, in the
 * host's order. It reads the key's due timers and messages, and records
 * the key's effects: emits, state, timers. Returning 0 keeps the effects;
 * any other value fails the key like fh_fail_key (with the message given
 * to fh_fail_key if there was one, else "flowhost_process_key returned
 * N"). Every computation must define it.
 */
int flowhost_process_key(fh_key *k);

/*
 * flowhost_init_params, when the computation defines it, runs once per
 * instance before the first batch, with the computation's parameters.
 * Returning 0 starts the computation. Any other value refuses to start:
 * the host reports the text given to fh_params_fail, or else the message
 * of the last parameter getter that failed, or else
 * "flowhost_init_params returned N". When it is defined and has not
 * succeeded, every batch fails with status -2. Declared weak, so that a
 * computation without parameters need not define it.
 */
int flowhost_init_params(fh_params *p) __attribute__((weak));

/* ---------------------------------------------------------------------
 * The batch and the key.
 * ------------------------------------------------------------------ */

/* fh_batch describes the batch a key belongs to. */
typedef struct fh_batch {
    const char *computation; /* the computation's name in the pipeline spec */
    size_t computation_len;
    const char *kind;       /* "transform" or "map" */
    bool is_map;            /* kind is "map": no state, no timers */
    uint64_t partition;     /* the computation partition of the batch */
    uint64_t epoch;         /* the epoch the batch's effects commit in */
    int64_t event_watermark;  /* inputs with a smaller EventTimestamp are no longer expected */
    int64_t system_watermark; /* exact for internal streams */
    size_t key_count;       /* keys in the batch */
} fh_batch;

/* fh_batch_of returns the batch of key k. */
const fh_batch *fh_batch_of(const fh_key *k);

/* fh_key_text returns the key's canonical text ("" for an unkeyed
 * computation); len, when not NULL, receives its length. */
const char *fh_key_text(const fh_key *k, size_t *len);

/* fh_key_index returns the key's position in the batch, from 0. */
size_t fh_key_index(const fh_key *k);

/* fh_message is one input message of a key. */
typedef struct fh_message {
    const char *id; /* message_id: unique, stable across replays */
    size_t id_len;
    const char *stream; /* the stream it was read from */
    size_t stream_len;
    int64_t event_ts;     /* EventTimestamp: when the event happened */
    int64_t system_ts;    /* SystemTimestamp: when the message was created */
    int64_t alignment_ts; /* AlignmentTimestamp: the ordering timestamp */
    const uint8_t *payload; /* the body; never NULL, even when empty */
    size_t payload_len;
    uint32_t input; /* index among the key's inputs (timers first) */
} fh_message;

/* fh_timer is a due timer of a key, firing in this batch. */
typedef struct fh_timer {
    const char *id; /* the timer's message_id */
    size_t id_len;
    int64_t trigger_ts; /* the time the timer was set for */
    int64_t event_ts;   /* the timer's EventTimestamp */
    const uint8_t *payload; /* attached when it was set; empty when none */
    size_t payload_len;
    uint32_t input; /* index among the key's inputs */
} fh_timer;

/* Inputs are numbered from 0: the due timers in fire order, then the
 * messages in delivery order. */
size_t fh_input_count(const fh_key *k);
size_t fh_timer_count(const fh_key *k);
size_t fh_message_count(const fh_key *k);

/* fh_timer_at and fh_message_at return the i-th due timer or message, or
 * NULL when there is none. They do not change the current input. */
const fh_timer *fh_timer_at(const fh_key *k, size_t i);
const fh_message *fh_message_at(const fh_key *k, size_t i);

/*
 * fh_next_timer and fh_next_message iterate: each call returns the next
 * due timer (message) and makes it the key's current input, the default
 * parent of fh_emit. After the last one they return NULL, clear the
 * current input and rewind, so that a loop run to its end leaves no
 * current input and a second loop starts again from the first.
 *
 *     const fh_timer *t;
 *     while ((t = fh_next_timer(k)) != NULL) { ... }
 *
 * A loop left early keeps its input current until fh_clear_current.
 */
const fh_timer *fh_next_timer(fh_key *k);
const fh_message *fh_next_message(fh_key *k);

/* fh_clear_current ends an iteration early: no input is current and the
 * next fh_next_timer / fh_next_message starts from the first. */
void fh_clear_current(fh_key *k);

/* fh_current_input returns the current input's index, or -1. */
int64_t fh_current_input(const fh_key *k);

/* ---------------------------------------------------------------------
 * State (transform computations only).
 * ------------------------------------------------------------------ */

/* fh_state returns whether the key has state as this batch has left it so
 * far (the stored state, or what fh_set_state last set; none after
 * fh_delete_state), and, when it has, the bytes in *data / *len (either
 * may be NULL). An empty state is a state. */
bool fh_state(const fh_key *k, const uint8_t **data, size_t *len);

/* fh_set_state replaces the key's state with a copy of len bytes at data
 * (data may be NULL when len is 0), creating it when there was none. */
int fh_set_state(fh_key *k, const void *data, size_t len);

/* fh_delete_state deletes the key's state. */
int fh_delete_state(fh_key *k);

/* ---------------------------------------------------------------------
 * Emits.
 * ------------------------------------------------------------------ */

/*
 * fh_emit_opts adjusts one emit; a zeroed struct is the default:
 *
 *     fh_emit_with(k, "out", p, n, &(fh_emit_opts){ .key = "customer-1" });
 */
typedef struct fh_emit_opts {
    /* key: an output key (for example a Kafka record key), NUL-terminated;
     * NULL or "" for none. It does not change which key's state the emit
     * belongs to. */
    const char *key;
    /* has_event_ts: the output's EventTimestamp is event_ts instead of the
     * one the host derives (the minimum over the parents). */
    bool has_event_ts;
    int64_t event_ts;
    /* parents, parent_count: the inputs the output derives from, listed
     * explicitly (repeats count once). parents must not be NULL with a
     * count, nor non-NULL with count 0. */
    const uint32_t *parents;
    size_t parent_count;
    /* all_parents: every input of the key is a parent (the response leaves
     * the parents field out), even while an input is current. */
    bool all_parents;
} fh_emit_opts;

/*
 * fh_emit produces an output message on stream with a copy of the len
 * bytes at payload. Its parents are the current input (see fh_next_timer)
 * or, when no input is current, every input of the key. stream must be one
 * of the computation's declared output streams.
 */
int fh_emit(fh_key *k, const char *stream, const void *payload, size_t len);

/* fh_emit_with is fh_emit with options; opts may be NULL. */
int fh_emit_with(fh_key *k, const char *stream, const void *payload, size_t len, const fh_emit_opts *opts);

/* ---------------------------------------------------------------------
 * Timers (transform computations only).
 * ------------------------------------------------------------------ */

/* fh_timer_opts adjusts one timer; a zeroed struct is the default. */
typedef struct fh_timer_opts {
    /* has_event_ts: the EventTimestamp the timer carries when it fires;
     * by default its trigger timestamp. */
    bool has_event_ts;
    int64_t event_ts;
    /* payload, payload_len: bytes handed back in fh_timer when it fires
     * (copied). An empty payload is no payload. */
    const void *payload;
    size_t payload_len;
} fh_timer_opts;

/* fh_set_timer asks the host to fire a timer for this key when the
 * watermark of the computation's timer stream reaches trigger. Timers of
 * one key with the same trigger are one timer. */
int fh_set_timer(fh_key *k, int64_t trigger);

/* fh_set_timer_with is fh_set_timer with options; opts may be NULL. */
int fh_set_timer_with(fh_key *k, int64_t trigger, const fh_timer_opts *opts);

/* fh_cancel_timer deletes the key's pending timers at trigger, including
 * those set earlier in this batch; a later fh_set_timer at trigger sets a
 * new one. (The response lists the sets in call order, a cancel removing
 * the earlier sets of its trigger, and each cancelled trigger once.) */
int fh_cancel_timer(fh_key *k, int64_t trigger);

/* ---------------------------------------------------------------------
 * Failures.
 * ------------------------------------------------------------------ */

/* fh_fail_key fails the key with the text msg (NULL or "" get a generic
 * text): everything the batch did for the key is dropped and the host
 * sends its inputs to the dead-letter stream. Other keys are not affected.
 * The first failure of a key is the one reported. It returns -1, so that
 * `return fh_fail_key(k, "...");` fails and returns at once. */
int fh_fail_key(fh_key *k, const char *msg);

/* fh_key_error returns the text the key being processed failed with, or
 * NULL (also for any other key). */
const char *fh_key_error(const fh_key *k);

/* fh_fail_batch fails the whole batch with the text msg: the response
 * carries only the error, the host applies its failure policy to every
 * input, and no further key is processed. It returns -1. */
int fh_fail_batch(fh_key *k, const char *msg);

/* ---------------------------------------------------------------------
 * Parameters.
 * ------------------------------------------------------------------ */

/* The type of a parameter's value. */
typedef enum fh_param_type {
    FH_PARAM_MISSING = 0,
    FH_PARAM_NULL,
    FH_PARAM_BOOL,
    FH_PARAM_INT,
    FH_PARAM_FLOAT,
    FH_PARAM_TEXT,
    FH_PARAM_BYTES,
    FH_PARAM_LIST,
    FH_PARAM_MAP
} fh_param_type;

/* Results of the typed getters besides 0. */
#define FH_PARAM_ERR_MISSING (-1) /* no such parameter */
#define FH_PARAM_ERR_TYPE (-2)    /* another type, or an unusable value */

/* What the host says about the instance. */
const char *fh_params_computation(const fh_params *p);
const char *fh_params_kind(const fh_params *p);
uint64_t fh_params_partition(const fh_params *p);
size_t fh_params_output_count(const fh_params *p);
/* fh_params_output returns the i-th declared output stream, or NULL. */
const char *fh_params_output(const fh_params *p, size_t i);

/* fh_param_count and fh_param_name enumerate the parameters in envelope
 * order; fh_param_name returns NULL past the end. */
size_t fh_param_count(const fh_params *p);
const char *fh_param_name(const fh_params *p, size_t i);

/* fh_param_type_of returns the type of a parameter, FH_PARAM_MISSING when
 * it is not set; fh_param_has reports whether it is set (even to null). */
fh_param_type fh_param_type_of(const fh_params *p, const char *name);
bool fh_param_has(const fh_params *p, const char *name);

/*
 * Typed getters. Each returns 0 and stores the value, or
 * FH_PARAM_ERR_MISSING / FH_PARAM_ERR_TYPE and records a message that
 * fh_params_error returns, worded like the Go SDK's:
 * `parameter "window" is missing`,
 * `parameter "n": expected integer, got string`.
 *
 * fh_param_string: text (NUL-terminated; len may be NULL).
 * fh_param_int: an integer, or a float with an integral value in range.
 * fh_param_float: a float or an integer.
 * fh_param_bool: a boolean.
 * fh_param_duration: a Go duration text ("250ms", "1h30m") or an integer
 *   number of nanoseconds, in nanoseconds.
 * fh_param_raw: any value as its CBOR encoding, to walk with cbor.h (for
 *   lists and maps).
 */
int fh_param_string(fh_params *p, const char *name, const char **value, size_t *len);
int fh_param_int(fh_params *p, const char *name, int64_t *value);
int fh_param_float(fh_params *p, const char *name, double *value);
int fh_param_bool(fh_params *p, const char *name, bool *value);
int fh_param_duration(fh_params *p, const char *name, int64_t *nanoseconds);
int fh_param_raw(fh_params *p, const char *name, const uint8_t **cbor, size_t *len);

/* fh_params_error returns the message of the last getter that failed, or
 * NULL. */
const char *fh_params_error(const fh_params *p);

/* fh_params_fail sets the text the host reports when flowhost_init_params
 * refuses to start, and returns -1: `return fh_params_fail(p, "...");`. */
int fh_params_fail(fh_params *p, const char *msg);

/* ---------------------------------------------------------------------
 * Logging, through the host's flowhost.log.
 * ------------------------------------------------------------------ */

/* Log levels, log/slog's values. */
enum { FH_LOG_DEBUG = -4, FH_LOG_INFO = 0, FH_LOG_WARN = 4, FH_LOG_ERROR = 8 };

/* fh_log writes one line; the host adds the plugin's name. */
void fh_log(int level, const char *msg);
/* fh_log_n writes len bytes of text; invalid UTF-8 is replaced by the
 * host. */
void fh_log_n(int level, const char *msg, size_t len);
/* fh_logf formats with vsnprintf (which links stdio into the module). */
void fh_logf(int level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------
 * Event-time windows (sdk/WINDOWS.md; a port of the Go SDK's Windows,
 * with the same state encoding, byte for byte).
 * ------------------------------------------------------------------ */

/* fh_window_spec says which windows a record belongs to; build one with
 * fh_tumbling, fh_hopping or fh_session. Times are int64 nanoseconds. */
typedef struct fh_window_spec {
    int kind; /* 0: invalid (a constructor got bad arguments) */
    int64_t size, advance, gap;
} fh_window_spec;

/* fh_tumbling: windows [n*size, (n+1)*size). fh_hopping: windows
 * [n*advance, n*advance+size), 0 < advance <= size. fh_session: records of
 * a key less than gap apart share a window [first, last+gap). Bad
 * arguments give a spec that fh_windows_init refuses. */
fh_window_spec fh_tumbling(int64_t size);
fh_window_spec fh_hopping(int64_t size, int64_t advance);
fh_window_spec fh_session(int64_t gap);

/* fh_window is one window of one key, [start, end). */
typedef struct fh_window {
    const char *key; /* the key's text, as fh_key_text */
    size_t key_len;
    int64_t start, end;
} fh_window;

/*
 * fh_aggregator folds a window's records into an accumulator of bytes,
 * kept in the key's state between batches. The accumulator is an
 * fh_cbor_writer used as a plain byte buffer (buf, len; append with
 * fh_cbor_put_raw, reset with len = 0); a callback that lets it fail
 * (out of memory) or returns non-zero fails the key. ctx is passed to
 * every callback.
 *   init   (optional): fill acc, which is empty, for an empty window.
 *   add    (required): fold message m into acc.
 *   merge  (sessions): fold b (of a window starting later) into a.
 *   result (optional): append the payload of a closed window to out;
 *                      without it the payload is the accumulator.
 */
typedef struct fh_aggregator {
    int (*init)(fh_cbor_writer *acc, void *ctx);
    int (*add)(fh_cbor_writer *acc, const fh_message *m, void *ctx);
    int (*merge)(fh_cbor_writer *a, const uint8_t *b, size_t b_len, void *ctx);
    int (*result)(const fh_window *w, const uint8_t *acc, size_t acc_len, fh_cbor_writer *out, void *ctx);
    void *ctx;
} fh_aggregator;

/* fh_windows aggregates a transform's messages per (key, window); set it
 * up with fh_windows_init. Its fields are the SDK's. */
typedef struct fh_windows {
    fh_window_spec spec;
    fh_aggregator agg;
    char *output, *late;
    int64_t lateness;
    /* Triggers set in the current fh_windows_process call, which that
     * call never cancels (sdk/WINDOWS.md, the determinism rule). */
    int64_t *set_here;
    size_t set_here_len, set_here_cap;
} fh_windows;

/*
 * fh_windows_init sets up w: windows of spec aggregated by *agg (copied),
 * results on stream output, late records on stream late (both copied,
 * both required: a late record always has somewhere to go). It returns -1
 * (and logs why) for an invalid spec, an aggregator without add, a
 * session without merge, a missing stream name or no memory. w is
 * overwritten: release one already set up with fh_windows_free first. One
 * fh_windows serves every key and batch of an instance (calls never
 * overlap: the host runs one call at a time).
 */
int fh_windows_init(fh_windows *w, fh_window_spec spec, const fh_aggregator *agg, const char *output, const char *late);

/* fh_windows_set_lateness keeps each window open until the watermark
 * passes its end plus lateness (default 0); -1 when lateness < 0. */
int fh_windows_set_lateness(fh_windows *w, int64_t lateness);

/*
 * fh_windows_process handles key k of a batch, and must be the only thing
 * that touches k's state and timers: it fires the windows whose timers
 * are due (each result on the output stream with EventTimestamp end-1
 * and the firing timer as its only parent), adds the key's messages to
 * their open windows or, when every window of a message has fired, emits
 * it unchanged on the late stream (parent: itself), and saves the key's
 * state and timers. A state that is not a window state fails the key
 * with a text starting "flowhost: the key's state is not a window state"
 * (the Go SDK's text) and returns -1; so does a failing aggregator.
 */
int fh_windows_process(fh_windows *w, fh_key *k);

/* fh_windows_free releases what fh_windows_init allocated. */
void fh_windows_free(fh_windows *w);

/* ---------------------------------------------------------------------
 * Joins (sdk/JOINS.md; ports of the Go SDK's IntervalJoin and EnrichJoin,
 * with the same state encodings, emits, event times, parents, order and
 * error texts).
 * ------------------------------------------------------------------ */

/* fh_join_record is one side of a join: a message of this call, or a
 * record kept in the key's state by an earlier call. Its bytes are valid
 * only during the callback it is passed to. */
typedef struct fh_join_record {
    const char *id; /* message_id, kept so a payload can name a side from state */
    size_t id_len;
    const char *stream; /* for a record from state, the join's stream of its side */
    size_t stream_len;
    int64_t event_ts;
    const uint8_t *payload; /* never NULL, even when empty */
    size_t payload_len;
    int64_t input; /* index among the key's inputs, -1 for a record from state */
} fh_join_record;

/* fh_join_pair is a match of an interval join. */
typedef struct fh_join_pair {
    const char *key; /* the key's text, as fh_key_text */
    size_t key_len;
    fh_join_record left, right;
} fh_join_pair;

/*
 * fh_interval_funcs are an interval join's callbacks; each appends a
 * payload to out (an fh_cbor_writer used as a byte buffer, empty on
 * entry). A callback returning non-zero, or leaving out failed, fails the
 * key. ctx is passed to both.
 *   join    (required): the payload of a match.
 *   expired (optional): the payload of a record that never matched;
 *                       without it, the record's own payload.
 */
typedef struct fh_interval_funcs {
    int (*join)(const fh_join_pair *p, fh_cbor_writer *out, void *ctx);
    int (*expired)(const fh_join_record *r, fh_cbor_writer *out, void *ctx);
    void *ctx;
} fh_interval_funcs;

/* fh_interval_join joins two streams per key; set it up with
 * fh_interval_join_init. Its fields are the SDK's. */
typedef struct fh_interval_join {
    char *left, *right, *output, *expired;
    int64_t lower, upper;
    fh_interval_funcs f;
} fh_interval_join;

/*
 * fh_interval_join_init sets up j: records of streams left and right with
 * the same key match when lower <= ts_right - ts_left <= upper (nanoseconds;
 * both may be negative), matches on stream output, never-matched records
 * on stream expired (names copied, *f copied). It returns -1 (and logs
 * why) when lower > upper, f or f->join is NULL, a stream name is missing,
 * left equals right or memory runs out. j is overwritten: release one set
 * up before with fh_interval_join_free. One join serves every key and
 * batch of an instance.
 */
int fh_interval_join_init(fh_interval_join *j, const char *left, const char *right, int64_t lower, int64_t upper,
                          const fh_interval_funcs *f, const char *output, const char *expired);

/*
 * fh_interval_join_process handles key k of a batch, and must be the only
 * thing that touches k's state and timers: it removes the held records
 * whose expiry timers fired (a never-matched one is emitted on the expired
 * stream, event time its own, parent the timer), then matches each message
 * against every held record of the other side in held order (each match
 * emitted with event time the later of the two and parents the sides that
 * are inputs of this call), holds it and sets its expiry timer. A state
 * that is not an interval join state fails the key with a text starting
 * "flowhost: the key's state is not a join state" and a message of another
 * stream fails it naming the message; both are the Go SDK's texts, and
 * return -1, as does a failing callback.
 */
int fh_interval_join_process(fh_interval_join *j, fh_key *k);

/* fh_interval_join_free releases what fh_interval_join_init allocated. */
void fh_interval_join_free(fh_interval_join *j);

/*
 * fh_enrich_funcs are an enrichment join's callbacks (like
 * fh_interval_funcs).
 *   enrich (required): the payload of event enriched with the table's
 *                      current value.
 */
typedef struct fh_enrich_funcs {
    int (*enrich)(const fh_message *event, const fh_join_record *value, fh_cbor_writer *out, void *ctx);
    void *ctx;
} fh_enrich_funcs;

/* fh_enrich_join enriches events with the latest value of a table stream
 * of the same key; set it up with fh_enrich_join_init. */
typedef struct fh_enrich_join {
    char *table, *events, *output, *unmatched;
    fh_enrich_funcs f;
} fh_enrich_join;

/*
 * fh_enrich_join_init sets up e: messages of stream table set the key's
 * value (an empty payload deletes it), messages of stream events are
 * enriched on stream output, or, with no value, go unchanged to stream
 * unmatched. It returns -1 (and logs why) when f or f->enrich is NULL, a
 * stream name is missing, table equals events or memory runs out.
 */
int fh_enrich_join_init(fh_enrich_join *e, const char *table, const char *events, const fh_enrich_funcs *f,
                        const char *output, const char *unmatched);

/*
 * fh_enrich_join_process handles key k in delivery order and owns its
 * state (it sets no timers): an enriched event has the event's event time
 * and parents the event and, when it is an input of this call, the table
 * message that set the value; an unmatched event's parent is itself. Bad
 * state and other streams fail the key with the Go SDK's texts (-1).
 */
int fh_enrich_join_process(fh_enrich_join *e, fh_key *k);

/* fh_enrich_join_free releases what fh_enrich_join_init allocated. */
void fh_enrich_join_free(fh_enrich_join *e);

/* ---------------------------------------------------------------------
 * The group_by key as typed fields (sdk/JOINS.md): the port of the Go
 * SDK's ParseKey, with the same rules and error texts.
 * ------------------------------------------------------------------ */

/* fh_key_fields holds a parsed key; it borrows the key text and the names
 * (keep them alive) and owns the rest: free it with fh_key_fields_free. */
typedef struct fh_key_fields {
    const char *key;
    size_t key_len;
    const char *const *names;
    size_t count;
    size_t *spans; /* begin, end of each value's JSON text in key */
    char *buf;     /* the last fh_key_string value */
    char *error;   /* the last failure's text, or NULL */
    size_t error_len; /* its length: a key may hold NUL bytes */
} fh_key_fields;

/*
 * fh_parse_key decodes the key text (fh_key_text) as the values of the
 * group_by fields names[0..count), in group_by order. It returns 0, or -1
 * when the key is not a JSON array of exactly count values (the unkeyed
 * key "" is accepted only with count 0) or memory runs out; the failure's
 * text, Go's *KeyError text (`key [1]: has 1 values, expected 2 (group_by
 * ["a" "b"])`), is fh_key_fields_error(kf). Free kf in either case.
 */
int fh_parse_key(fh_key_fields *kf, const char *key, size_t len, const char *const *names, size_t count);
/* The accessors return 0 with the value, or -1 with fh_key_fields_error
 * saying why (`key ["x"]: field "id": expected an integer, got "x"`), as
 * Go's KeyFields methods. fh_key_raw gives the value's JSON text inside
 * the key; fh_key_string's value (NUL-terminated, may hold NULs: use len)
 * lives in kf until the next fh_key_string or fh_key_fields_free. */
int fh_key_raw(fh_key_fields *kf, const char *name, const char **raw, size_t *len);
int fh_key_string(fh_key_fields *kf, const char *name, const char **value, size_t *len);
int fh_key_int(fh_key_fields *kf, const char *name, int64_t *value);
int fh_key_float(fh_key_fields *kf, const char *name, double *value);
int fh_key_bool(fh_key_fields *kf, const char *name, bool *value);
/* fh_key_fields_error is the last failure's text (NUL-terminated; error_len
 * bytes, as the key text in it may hold NULs), or NULL. */
const char *fh_key_fields_error(const fh_key_fields *kf);
/* fh_key_fields_free releases what kf owns (not the key or names). */
void fh_key_fields_free(fh_key_fields *kf);

/* ---------------------------------------------------------------------
 * Helpers.
 * ------------------------------------------------------------------ */

/* fh_quote writes the n bytes at s as a double-quoted string with Go's
 * strconv.Quote escapes (\" \\ \n \t \xff \u00ad ...) into dst (of size
 * cap, NUL-terminated when cap > 0, truncated when too small) and returns
 * the length the whole quoted text needs, like snprintf. Runes that Go
 * treats as printable are kept; it treats every valid rune above U+00A0
 * except U+00AD as printable, which matches Go for the scripts in common
 * use. */
size_t fh_quote(char *dst, size_t cap, const void *s, size_t n);

/* ---------------------------------------------------------------------
 * Entry points behind the exports, for native test harnesses: the wasm
 * exports are thin shims over these.
 * ------------------------------------------------------------------ */

/* fh_entry_alloc is flowhost_alloc: a region of at least size bytes for
 * the next envelope (never NULL for size 0), or NULL. */
void *fh_entry_alloc(int32_t size);
/* fh_entry_init and fh_entry_process are flowhost_init and
 * flowhost_process on the region at ptr: they return 0 with the encoded
 * result in *out / *out_len (*out NULL for an init that started), or a
 * negative status (-1 bad envelope, -2 guest failure, -3 unsupported
 * version). The result stays valid until the next entry call. */
int fh_entry_init(const void *ptr, int32_t len, const uint8_t **out, size_t *out_len);
int fh_entry_process(const void *ptr, int32_t len, const uint8_t **out, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif /* FLOWHOST_H */
