/*
 * half_exact_check: one rank of a collective-launch job. float16 and bfloat16 reductions over
 * the nodes must round to 16 bits once, at the end, as the single-node path does: partial
 * results stay in float32 through every hop of the ring, the chain and recursive doubling.
 *
 *   AVG: rank r contributes r + 1 everywhere, so the exact mean (N + 1) / 2 is representable;
 *        every element must be exactly that (a per-hop rounding gives 1.99902 for 2 in fp16
 *        with 3 nodes, in one ring chunk).
 *   SUM: random 16-bit inputs with exponents within 2^3 of each other, whose exact sum over 5
 *        ranks fits in float32; every element must be that sum rounded once to 16 bits
 *        (nearest even), computed here in double from every rank's inputs.
 *
 * Both for allreduce (--algo ring or rd) and reduce (chain) of --count elements.
 * Exit status: 0 all exact, 1 a wrong element (named with got and expected), 2 usage.
 */
#include <collective.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/half.h"

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float to_f32(coll_dtype_t dt, uint16_t h)
{
    return dt == COLL_FLOAT16 ? coll__f16_to_f32(h) : coll__bf16_to_f32(h);
}

static uint16_t from_f32(coll_dtype_t dt, float f)
{
    return dt == COLL_FLOAT16 ? coll__f32_to_f16(f) : coll__f32_to_bf16(f);
}

/* Rank @p rank's SUM input at @p i: a value in [1, 8) with a random sign and mantissa. */
static uint16_t sum_input(coll_dtype_t dt, int rank, size_t i)
{
    uint64_t r = mix(((uint64_t)rank << 40) ^ i);
    float v = 1.0f + (float)(r % 7000) / 1000.0f;
    return from_f32(dt, (r >> 20) & 1 ? -v : v);
}

static uint16_t expected(coll_dtype_t dt, coll_redop_t op, int world, size_t i)
{
    double sum = 0;

    if (op == COLL_AVG) {
        return from_f32(dt, (float)(world + 1) / 2.0f);
    }
    for (int r = 0; r < world; r++) {
        sum += to_f32(dt, sum_input(dt, r, i));
    }
    return from_f32(dt, (float)sum); /* exact in float32 here: one rounding to 16 bits */
}

static int check(coll_comm_t *c, coll_dtype_t dt, coll_redop_t op, const char *what,
                 const uint16_t *out, size_t count, int root)
{
    int world = coll_comm_world_size(c);

    if (root >= 0 && coll_comm_rank(c) != root) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        uint16_t want = expected(dt, op, world, i);
        if (out[i] != want) {
            fprintf(stderr, "half_exact_check: rank %d: FAIL: %s %s %s of %zu over %d ranks: "
                    "element %zu is %.9g, expected %.9g\n", coll_comm_rank(c), what,
                    coll_dtype_name(dt), coll_redop_name(op), count, world, i,
                    to_f32(dt, out[i]), to_f32(dt, want));
            return 1;
        }
    }
    return 0;
}

static void fill(coll_comm_t *c, coll_dtype_t dt, coll_redop_t op, uint16_t *buf, size_t count)
{
    int rank = coll_comm_rank(c);

    for (size_t i = 0; i < count; i++) {
        buf[i] = op == COLL_AVG ? from_f32(dt, (float)(rank + 1)) : sum_input(dt, rank, i);
    }
}

static int run(coll_comm_t *c, coll_dtype_t dt, coll_redop_t op, coll_algo_t algo, size_t count,
               uint16_t *buf)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_ALGO, .algo = algo};
    coll_request_t *req;
    coll_status_t st;
    int bad;

    fill(c, dt, op, buf, count);
    st = coll_allreduce_async(c, buf, buf, count, dt, op, &p, &req);
    st = st == COLL_INPROGRESS ? coll_req_wait(req, -1) : st;
    if (st != COLL_OK) {
        fprintf(stderr, "half_exact_check: allreduce: %s: %s\n", coll_strerror(st),
                coll_comm_last_error(c));
        return 1;
    }
    bad = check(c, dt, op, coll_algo_name(algo), buf, count, -1);
    fill(c, dt, op, buf, count);
    p.algo = COLL_ALGO_CHAIN;
    st = coll_reduce_async(c, buf, buf, count, dt, op, 0, &p, &req);
    st = st == COLL_INPROGRESS ? coll_req_wait(req, -1) : st;
    if (st != COLL_OK) {
        fprintf(stderr, "half_exact_check: reduce: %s\n", coll_strerror(st));
        return 1;
    }
    return bad | check(c, dt, op, "chain reduce", buf, count, 0);
}

int main(int argc, char **argv)
{
    size_t count = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    coll_algo_t algo = argc > 1 && strcmp(argv[1], "rd") == 0 ? COLL_ALGO_RD : COLL_ALGO_RING;
    static const coll_dtype_t dts[] = {COLL_FLOAT16, COLL_BFLOAT16};
    static const coll_redop_t ops[] = {COLL_AVG, COLL_SUM};
    coll_comm_t *c;
    uint16_t *buf;
    int bad = 0, rank;

    if (argc != 3 || count == 0 || (strcmp(argv[1], "ring") != 0 && strcmp(argv[1], "rd") != 0)) {
        fprintf(stderr, "usage: half_exact_check ring|rd COUNT\n");
        return 2;
    }
    if (coll_comm_create(NULL, &c) != COLL_OK ||
        coll_mem_alloc(c, count * sizeof(uint16_t), (void **)&buf) != COLL_OK) {
        return 1;
    }
    for (size_t d = 0; d < 2; d++) {
        for (size_t o = 0; o < 2; o++) {
            bad |= run(c, dts[d], ops[o], algo, count, buf);
        }
    }
    rank = coll_comm_rank(c);
    coll_comm_destroy(c);
    if (!bad) {
        printf("half_exact_check: rank %d: float16 and bfloat16 avg and sum exact (%s)\n", rank,
               argv[1]);
    }
    return bad;
}
