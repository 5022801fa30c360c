#include "common/dtype.h"

#include <string.h>

#include <collective.h>

static const struct {
    size_t size;
    const char *name;
} dtypes[COLL_DTYPE_COUNT] = {
    [COLL_FLOAT32] = {4, "float32"}, [COLL_FLOAT64] = {8, "float64"},
    [COLL_FLOAT16] = {2, "float16"}, [COLL_BFLOAT16] = {2, "bfloat16"},
    [COLL_INT8] = {1, "int8"},       [COLL_UINT8] = {1, "uint8"},
    [COLL_INT32] = {4, "int32"},     [COLL_INT64] = {8, "int64"},
};

static const char *const redops[COLL_REDOP_COUNT] = {
    [COLL_SUM] = "sum", [COLL_AVG] = "avg", [COLL_PROD] = "prod",
    [COLL_MIN] = "min", [COLL_MAX] = "max", [COLL_BAND] = "band",
    [COLL_BOR] = "bor", [COLL_BXOR] = "bxor",
};

static const char *const algos[COLL_ALGO_COUNT] = {
    [COLL_ALGO_AUTO] = "auto",   [COLL_ALGO_RING] = "ring",
    [COLL_ALGO_RD] = "rd",       [COLL_ALGO_CHAIN] = "chain",
    [COLL_ALGO_DISSEMINATION] = "dissemination", [COLL_ALGO_DIRECT] = "direct",
    [COLL_ALGO_NCCL] = "nccl",   [COLL_ALGO_DEVICE] = "device",
};

size_t coll_dtype_size(coll_dtype_t dtype)
{
    return (unsigned)dtype < COLL_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *coll_dtype_name(coll_dtype_t dtype)
{
    return (unsigned)dtype < COLL_DTYPE_COUNT ? dtypes[dtype].name : "unknown";
}

const char *coll_redop_name(coll_redop_t op)
{
    return (unsigned)op < COLL_REDOP_COUNT ? redops[op] : "unknown";
}

const char *coll_algo_name(coll_algo_t algo)
{
    return (unsigned)algo < COLL_ALGO_COUNT ? algos[algo] : "unknown";
}

int coll__algo_parse(const char *name)
{
    for (int a = 0; a < COLL_ALGO_COUNT; a++) {
        if (strcmp(name, algos[a]) == 0) {
            return a;
        }
    }
    return -1;
}
