/*
 * perf/data: the data of coll-perf's correctness check.
 *
 * Element i of a buffer belongs to one of PERF_CLASSES classes, a hash of (i, seed). Rank r's
 * input element i is in[r][class(i)], and the reduction of element i over all ranks is
 * out[class(i)]. The tables are small (world x PERF_CLASSES values), so the expected result is
 * computed once per seed, independently of the library, by emulating each reduction's
 * documented semantics (integers wrap modulo 2^bits; AVG divides the sum). The values are small
 * integers, chosen per datatype and operation so that every float result is exact whatever the
 * order of the additions: a check compares bits, not tolerances.
 */
#ifndef COLL_PERF_DATA_H
#define COLL_PERF_DATA_H

#include <collective.h>

#include <stddef.h>
#include <stdint.h>

/** Number of value classes; a prime, so that no power-of-two block shift maps classes onto
 *  themselves. */
#define PERF_CLASSES 251

typedef struct {
    coll_dtype_t dtype;
    coll_redop_t op;
    int world;
    int reduces;      /* whether the collective reduces (the value range depends on it) */
    size_t esize;     /* bytes per element */
    uint64_t seed;    /* of the current tables */
    uint64_t *in;     /* in[r * PERF_CLASSES + h]: encoded input of rank r, class h */
    uint64_t *out;    /* out[h]: encoded reduction over all ranks of class h */
    uint8_t sentinel; /* byte pattern of a buffer that nothing has written */
} perf_data_t;

/**
 * @brief Allocate the tables for @p world ranks; perf_data_seed() fills them.
 * @param [in] reduces Non-zero for collectives that reduce (allreduce, reduce-scatter, reduce).
 * @return 0, or -1 when out of memory.
 */
int perf_data_init(perf_data_t *d, coll_dtype_t dtype, coll_redop_t op, int world, int reduces);

/** @brief Free the tables; safe on a zeroed or already freed @p d. */
void perf_data_free(perf_data_t *d);

/** @brief New values for every rank and class (fresh data for one check). */
void perf_data_seed(perf_data_t *d, uint64_t seed);

/** @brief Write rank @p rank's input elements @p first .. @p first + @p count - 1 to @p buf
 *         (element @p first goes to buf[0]). */
void perf_data_fill(const perf_data_t *d, int rank, void *buf, size_t first, size_t count);

/** @brief Fill @p count elements of @p buf with the sentinel pattern. */
void perf_data_poison(const perf_data_t *d, void *buf, size_t count);

/** @return How many of the @p count elements in @p buf differ from rank @p rank's inputs of
 *          elements @p first onwards (gathered or broadcast data). */
size_t perf_data_check_input(const perf_data_t *d, int rank, const void *buf, size_t first,
                             size_t count);

/** @return How many of the @p count elements in @p buf differ from the reduction over all
 *          ranks of elements @p first onwards. */
size_t perf_data_check_reduced(const perf_data_t *d, const void *buf, size_t first,
                               size_t count);

#endif /* COLL_PERF_DATA_H */
