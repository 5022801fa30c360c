/*
 * The executors by memory kind (exec.h) and the kinds' names. A new kind adds its name and its
 * executor here (kernels/README.md).
 */
#include "kernels/exec.h"

#include "kernels/cpu/exec_host.h"

static const char *const kind_names[COLL_MEM_KINDS] = {
    [COLL_MEM_HOST] = "host",
    [COLL_MEM_CUDA] = "cuda",
};

static const coll_exec_t *const executors[COLL_MEM_KINDS] = {
    [COLL_MEM_HOST] = &coll_exec_host,
};

const char *coll_mem_kind_name(coll_mem_kind_t kind)
{
    return (unsigned)kind < COLL_MEM_KINDS ? kind_names[kind] : "unknown";
}

const coll_exec_t *coll_exec_get(coll_mem_kind_t kind)
{
    return (unsigned)kind < COLL_MEM_KINDS ? executors[kind] : NULL;
}
