/*
 * allreduce_check (allreduce_check.c): what the command line asks for
 * (allreduce_check_opts.c parses it).
 */
#ifndef ALLREDUCE_CHECK_H
#define ALLREDUCE_CHECK_H

#include <stdio.h>

#include <collective.h>

#define MAX_COUNTS 32
#define MAX_WINDOW 16
#define TOKEN_MAX 32
/* Bytes checked on each side of a buffer; a multiple of 64 keeps buffers aligned. */
#define GUARD_BYTES 256
/* Out-of-place outputs are filled with this before each operation (a NaN pattern). */
#define SENTINEL_BYTE 0xff
#define MISMATCH_DEADLINE_MS 10000
/* Texts the mismatch's message must contain (--mismatch-text). */
#define MAX_TEXTS 4

typedef enum { PLACE_OUT, PLACE_IN, PLACE_MIXED } place_t;

typedef struct {
    char tokens[MAX_COUNTS][TOKEN_MAX];
    int ncounts;
    coll_redop_t op;
    int iters;
    int window; /* operations in flight at once */
    int keyed;  /* explicit keys, submitted in a rank-dependent order */
    int reuse_keys; /* keyed: operation w of every round and count has key w */
    place_t place;
    int mismatch_rank; /* -1: correctness mode */
    int mismatch_layout; /* mismatch mode: the layout differs, not the count */
    int mismatch_node; /* -1, or mismatch mode: every rank of this node submits the other count */
    int late_rank;     /* -1: none */
    int late_ms;       /* how long late_rank waits before submitting in mismatch mode */
    int mismatch_ms;   /* mismatch mode: the error must come within this long */
    const char *texts[MAX_TEXTS]; /* mismatch mode: what its message must contain */
    int ntexts;
    int timeout_ms;
} opts_t;

/** @brief Print the usage text to @p f. */
void allreduce_check_usage(FILE *f);

/** @brief Parse the command line into @p o; prints usage and exits 2 on an error. */
void allreduce_check_parse_opts(int argc, char **argv, opts_t *o);

#endif
