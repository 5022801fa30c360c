#include "collective.h"

size_t coll_dtype_size(coll_dtype_t dtype)
{
    switch (dtype) {
    case COLL_FLOAT32:
        return 4;
    case COLL_DTYPE_COUNT:
        break;
    }
    return 0;
}

const char *coll_dtype_name(coll_dtype_t dtype)
{
    switch (dtype) {
    case COLL_FLOAT32:
        return "float32";
    case COLL_DTYPE_COUNT:
        break;
    }
    return "unknown";
}

const char *coll_redop_name(coll_redop_t op)
{
    switch (op) {
    case COLL_SUM:
        return "sum";
    case COLL_AVG:
        return "avg";
    case COLL_REDOP_COUNT:
        break;
    }
    return "unknown";
}
