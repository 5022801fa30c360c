/*
 * The device check of the CUDA executor (kernel_check.cu has the program and its usage): what
 * its parts share. Every check runs an entry of the CUDA table on device memory and the same
 * entry of the host table on host memory, and compares what comes back.
 */
#ifndef COLL_TESTS_GPU_KERNEL_CHECK_H
#define COLL_TESTS_GPU_KERNEL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The counts every kernel is checked at: 0, 1, 1023, 2^20 + 3. */
#define KC_NCOUNTS 4
extern const size_t kc_counts[KC_NCOUNTS];

/** A check run. */
typedef struct {
    const coll_exec_t *dev;  /**< the CUDA executor, from the module */
    const coll_exec_t *host; /**< the reference */
    unsigned checks;         /**< comparisons made */
    unsigned failures;       /**< of which failed */
    int quick;               /**< counts up to 1023 only */
} kc_t;

/** @return The counts of this run (@p kc->quick: the first three). */
size_t kc_ncounts(const kc_t *kc);

/** Report a failed comparison (one line on stderr) and count it. */
void kc_fail(kc_t *kc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Count a comparison; report it when @p ok is 0. @return @p ok. */
int kc_expect(kc_t *kc, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/**
 * Non-zero for the checker's own test (-H): the host's executor stands in for the device's and
 * host memory for device memory, so that every comparison runs without a device.
 */
extern int kc_on_host;

/** Device memory of @p bytes (at least 1); the program ends with status 2 when there is none. */
void *kc_dev(size_t bytes);
void kc_dev_free(void *p);
/** Copies between host and device; a failure ends the program with status 2. */
void kc_up(void *dev, const void *host, size_t bytes);
void kc_down(void *host, const void *dev, size_t bytes);
/** Host memory of @p bytes (at least 1), zeroed; none ends the program with status 2. */
void *kc_host(size_t bytes);
/** Pinned host memory of @p bytes (plain host memory under -H), and its release. */
void *kc_pinned(size_t bytes);
void kc_pinned_free(void *p);
/** A stream of this program's on the current device, in @p ctx (none under -H); and its end. */
void kc_stream(coll_exec_ctx_t *ctx);
void kc_stream_free(coll_exec_ctx_t *ctx);

/** The next value of the run's generator (xorshift64*, fixed seed: every run alike). */
uint64_t kc_rand(void);
/** @p n float32 values of magnitude about @p mag, one in 64 of them special (0, -0, a
 *  subnormal) when @p specials; @p levels > 0 quantizes them to that many magnitudes. */
void kc_floats(float *x, size_t n, double mag, unsigned levels, int specials);
/** @p n elements of @p dtype: ordinary values and one in 16 NaN, infinity, zero of either sign,
 *  subnormal or extreme (floats), any pattern (integers). */
void kc_elements(coll_dtype_t dtype, void *x, size_t n);
/** @return Bytes of one element of @p dtype. */
size_t kc_esize(coll_dtype_t dtype);

/** @return Whether @p n floats are the same bits. On a difference: reported as @p what. */
int kc_same_floats(kc_t *kc, const float *dev, const float *host, size_t n, const char *what);
/** @return Whether |dev - host| <= tol[i] (or tol[0] when @p per_elem is 0) for all n. */
int kc_close_floats(kc_t *kc, const float *dev, const float *host, const float *tol,
                    int per_elem, size_t n, const char *what);

/* The parts: each returns after reporting its failures through @p kc. */
void kc_check_copy(kc_t *kc);
void kc_check_reduce(kc_t *kc);
void kc_check_cast(kc_t *kc);
void kc_check_onebit(kc_t *kc);
void kc_check_topk(kc_t *kc);
void kc_check_lowrank(kc_t *kc);
void kc_check_optim(kc_t *kc);

#ifdef __cplusplus
}
#endif

#endif
