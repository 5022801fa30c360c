/**
 * @file check_common.h
 * @brief Helpers shared by the engine integration tests (coll_check, p2p_check, barrier_check):
 *        joining the job started by collective-launch, guarded pool buffers, bounded waits,
 *        count tokens, and an element codec for every datatype that is written here,
 *        independently of the library's and the kernels' conversions.
 *
 * Every failed check ends the process with exit status 1 and one line on stderr naming the
 * rank and what was expected and found (check_die()); usage errors exit with status 2.
 */
#ifndef CHECK_COMMON_H
#define CHECK_COMMON_H

#include <collective.h>

#include <stddef.h>
#include <stdint.h>

/* Bytes checked on each side of every buffer; a multiple of 64 keeps buffers aligned. */
#define CHECK_GUARD_BYTES 256

/** The job as this rank sees it. */
typedef struct {
    coll_comm_t *comm;
    int rank;
    int world;
    int local_size;
    int local_rank;
    int nodes;
} check_ctx_t;

/** A buffer in the pool with guard bytes on both sides. */
typedef struct {
    uint8_t *alloc; /* start of the allocation (NULL: no buffer) */
    uint8_t *data;  /* alloc + CHECK_GUARD_BYTES */
    size_t bytes;   /* usable bytes between the guards */
    int which;      /* distinguishes the guard pattern of the buffers of one rank */
} check_buf_t;

/** The name printed in front of every message (the program's name). */
void check_set_prog(const char *prog);

/** Print "<prog>: rank R: FAIL: <message>" to stderr and exit(1). */
void check_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/** Print a usage error and exit(2). */
void check_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/** Print a line on stdout (rank 0 only when @p only_rank0) and flush it. */
void check_say(const check_ctx_t *c, int only_rank0, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Seconds of CLOCK_MONOTONIC. */
double check_now_s(void);

/** Nanoseconds of CLOCK_REALTIME (shared by all processes of the machine). */
int64_t check_realtime_ns(void);

/** World and local size from the environment, before joining (to size the pool). */
void check_env_sizes(int *world, int *local_size);

/** Join the job of the environment with a pool of @p pool_bytes per node; dies on failure. */
void check_join(check_ctx_t *c, uint64_t pool_bytes);

/**
 * Wait for @p req at most @p timeout_ms, free it and return its status; the algorithm it
 * reported is copied to @p algo (may be NULL). Dies when the wait times out (the test would
 * otherwise hang) naming @p what.
 */
coll_status_t check_wait(const check_ctx_t *c, coll_request_t *req, int timeout_ms,
                         const char *what, char *algo, size_t algo_len);

/** Allocate @p bytes (0 allowed) with guards; dies on failure. */
void check_buf_alloc(const check_ctx_t *c, size_t bytes, int which, check_buf_t *b);

/** Verify both guards of @p b; dies naming @p what when one was written. */
void check_buf_guards(const check_ctx_t *c, const check_buf_t *b, const char *what);

void check_buf_free(const check_ctx_t *c, check_buf_t *b);

/**
 * A count token: an integer with an optional Ki or Mi suffix, or N, N-k, N+k where N is the
 * number of nodes. @return The count, or -1 when @p t is not a valid token.
 */
long long check_parse_count(const char *t, int nodes);

/** Parse a decimal integer in [lo, hi]; -1 when it is not one. */
int check_parse_int(const char *s, long lo, long hi, long *out);

/** A bijective 64-bit mix (splitmix64), the source of all test data. */
uint64_t check_mix(uint64_t x);

/* ---- datatypes ------------------------------------------------------------------------------ */

/** Whether @p dt is one of the four floating-point types. */
int check_dtype_is_float(coll_dtype_t dt);

/** Whether @p dt is a signed integer type. */
int check_dtype_is_signed(coll_dtype_t dt);

/** Bits of an element of @p dt. */
int check_dtype_bits(coll_dtype_t dt);

/** Parse a datatype name as coll_dtype_name() spells it; -1 when unknown. */
int check_dtype_parse(const char *s);

/** Parse a reduction name as coll_redop_name() spells it; -1 when unknown. */
int check_redop_parse(const char *s);

/**
 * Element values. Floating-point types use @c f (NaN allowed), integer types use @c i: the
 * value sign-extended (signed types) or zero-extended (unsigned types) to 64 bits.
 */
typedef struct {
    double f;
    int64_t i;
} check_val_t;

/** @p i wrapped modulo 2^bits of @p dt and extended back to 64 bits. */
int64_t check_int_wrap(coll_dtype_t dt, uint64_t i);

/** Element @p k of @p p, decoded. */
check_val_t check_load(coll_dtype_t dt, const void *p, size_t k);

/**
 * Store @p v as element @p k of @p p. A float value must be exactly representable in @p dt
 * (the test data are chosen so): otherwise the test itself is wrong and this dies.
 */
void check_store(coll_dtype_t dt, void *p, size_t k, check_val_t v);

/** Whether @p a and @p b are the same value of @p dt (any NaN equals any NaN). */
int check_val_equal(coll_dtype_t dt, check_val_t a, check_val_t b);

/** Format @p v of @p dt for a message. */
const char *check_val_str(coll_dtype_t dt, check_val_t v, char *buf, size_t len);

/** The largest finite value of a float type. */
double check_float_max(coll_dtype_t dt);

#endif
