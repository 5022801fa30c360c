/**
 * @file coll_data.h
 * @brief Test data of coll_check: every rank's inputs of an operation and the documented result,
 *        computed in the test from the inputs of all ranks (never by the library's code).
 *
 * Inputs are chosen so that the documented result is exact in every datatype whatever the order
 * and grouping of the reduction (see coll_data.c): small multiples of 1/8 for SUM; {+-1, +-2,
 * 1/2} for PROD; for AVG, float32 and float64 inputs whose sum is a multiple of the world size
 * (divided once at the end) and float16 and bfloat16 inputs that are multiples of it (each is
 * pre-scaled by 1/world), with one position in BIG_PERIOD whose sum over the ranks overflows
 * the type while the mean does not; random finite values for MIN and MAX with a NaN at one rank
 * in one position in NAN_PERIOD; full-range random integers (which wrap) for every integer
 * reduction, with bits set three times in four for BAND and one in four for BOR. All-gather and
 * broadcast move random bytes (any bit pattern, NaNs included).
 */
#ifndef COLL_DATA_H
#define COLL_DATA_H

#include "check_common.h"

/* Floats: one position in NAN_PERIOD has a NaN at one rank in MIN and MAX. */
#define NAN_PERIOD 37
#define NAN_PHASE 5
/* 16-bit AVG: one position in BIG_PERIOD holds a value whose sum over the ranks overflows. */
#define BIG_PERIOD 101
#define BIG_PHASE 7

typedef enum { K_ALLREDUCE, K_REDUCE_SCATTER, K_ALLGATHER, K_BROADCAST, K_REDUCE, K_COUNT } kind_t;

extern const char *const coll_kind_names[K_COUNT];

/* Algorithm choices of the command line: auto, a forced one, or whatever COLL_ALGO says. */
#define ALGO_ENV (-1)

/* Placement of a case (see coll_check --help); MIXED: even ranks in place, odd ones not. */
typedef enum { PLACE_OUT, PLACE_IN, PLACE_MIXED } place_t;

/** One operation to run and check. */
typedef struct {
    kind_t kind;
    coll_dtype_t dt;
    coll_redop_t op; /* COLL_SUM for all-gather and broadcast */
    size_t count;    /* per rank: allreduce, broadcast, reduce count; RS recvcount; AG sendcount */
    int algo;        /* COLL_ALGO_* or ALGO_ENV */
    place_t place;
    int root;
    int iter;
    uint32_t seq; /* position in the run: gives every case its own data */
} case_t;

static inline int coll_kind_reduces(kind_t k)
{
    return k == K_ALLREDUCE || k == K_REDUCE_SCATTER || k == K_REDUCE;
}

static inline int coll_kind_rooted(kind_t k)
{
    return k == K_BROADCAST || k == K_REDUCE;
}

/** Rank @p rank's input element @p i (an index into its whole send buffer) of a reduction. */
check_val_t coll_data_input(const case_t *k, int world, int rank, size_t i);

/** The documented reduction over all ranks of input element @p i. */
check_val_t coll_data_expected(const case_t *k, int world, size_t i);

/** Rank @p rank's input of @p n elements into @p p: values for reductions, bytes otherwise. */
void coll_data_fill(const case_t *k, int world, int rank, void *p, size_t n);

#endif
