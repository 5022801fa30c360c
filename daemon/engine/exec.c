#include "engine/exec.h"

#include "common/assert.h"
#include "core/pool.h"

coll_mem_kind_t coll_op_mem_kind(const coll_op_t *op)
{
    return coll_pool_kind(op->job->pool);
}

const coll_exec_t *coll_op_exec(const coll_op_t *op)
{
    const coll_exec_t *ex = coll_exec_get(coll_op_mem_kind(op));

    COLL_ASSERT(ex != NULL);
    return ex;
}
