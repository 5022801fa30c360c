/*
 * coll_check (coll_check.c): what the command line asks for (coll_check_opts.c parses it).
 */
#ifndef COLL_CHECK_H
#define COLL_CHECK_H

#include <stdio.h>

#include "coll_data.h"

#define MAX_LIST 32
#define TOKEN_MAX 32
#define MAX_WINDOW 16
/* A forced rd runs only when the whole buffer and a descriptor fit in one staging segment
 * (256 KiB by default). Below this the test forces rd; above it rd is skipped (not failed). */
#define RD_FORCE_MAX_BYTES (248u << 10)

typedef struct {
    int kinds[K_COUNT], nkinds;
    int dtypes[COLL_DTYPE_COUNT], ndtypes;
    int ops[COLL_REDOP_COUNT], nops;
    char counts[MAX_LIST][TOKEN_MAX];
    int ncounts;
    int algos[MAX_LIST], nalgos; /* COLL_ALGO_* or ALGO_ENV */
    int places[3], nplaces;      /* place_t */
    char roots[MAX_LIST][TOKEN_MAX];
    int nroots;
    int iters;
    int window;
    int shuffle;
    int node_whole; /* every multi-node allreduce runs in the daemon whole (no node buffers) */
    int timeout_ms;
    coll_status_t expect; /* COLL_OK, or the error every operation must fail with */
    int mismatch_rank;    /* -1, or the rank that submits mismatch_op instead of the case's */
    coll_redop_t mismatch_op;
} opts_t;

/* Counts and roots resolved for this job. */
typedef struct {
    long long counts[MAX_LIST];
    int ncounts;
    long long roots[MAX_LIST];
    int nroots;
} resolved_t;

void parse_opts(int argc, char **argv, opts_t *o);
/* Whether the library takes @p op of @p dt: the bitwise reductions only of integers. */
int op_applies(coll_dtype_t dt, coll_redop_t op);
void resolve_counts(const opts_t *o, int nodes, resolved_t *rv);
void resolve_roots(const check_ctx_t *c, const opts_t *o, resolved_t *rv);

#endif
