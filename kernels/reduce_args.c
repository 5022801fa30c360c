/*
 * A reduction's arguments, checked the same way for every memory kind (reduce.h).
 */
#include "kernels/reduce.h"

/* Bits at and above @p n. */
static uint64_t bits_from(unsigned n)
{
    return n >= 64 ? 0 : ~0ull << n;
}

coll_status_t coll_reduce_args_check(const coll_reduce_args_t *a)
{
    const int half = a != NULL && (a->dtype == COLL_FLOAT16 || a->dtype == COLL_BFLOAT16);

    if (a == NULL || !coll_reduce_op_fits(a->dtype, a->op) || a->world_size < 1 || a->nsrc < 1 ||
        a->nsrc > COLL_REDUCE_MAX_SRCS || a->src == NULL) {
        return COLL_ERR_INVALID;
    }
    if (((a->raw_mask | a->f32_mask) & bits_from(a->nsrc)) != 0 ||
        (a->raw_mask & a->f32_mask) != 0 || (!half && (a->f32_mask != 0 || a->dst_f32))) {
        return COLL_ERR_INVALID;
    }
    if (a->count == 0) {
        return COLL_OK;
    }
    if (a->dst == NULL) {
        return COLL_ERR_INVALID;
    }
    for (unsigned k = 0; k < a->nsrc; k++) {
        if (a->src[k] == NULL) {
            return COLL_ERR_INVALID;
        }
    }
    return COLL_OK;
}
