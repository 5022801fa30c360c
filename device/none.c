/*
 * The device layer of a build without CUDA (COLL_WITH_CUDA=OFF): no driver is looked for, and
 * neither is NCCL; the fake (dev_fake.c) is still there for the tests.
 */
#include <stdio.h>

#include "device/dev.h"
#include "device/nccl.h"

coll_status_t coll__dev_cuda_open(const coll_dev_ops_t **ops_p, char *why, size_t whylen)
{
    snprintf(why, whylen, "built without CUDA (COLL_WITH_CUDA=OFF)");
    return COLL_ERR_UNSUPPORTED;
}

void coll__dev_cuda_version(char *buf, size_t len)
{
    snprintf(buf, len, "none");
}

int coll_nccl_probe(const char **text)
{
    *text = "absent: built without CUDA (COLL_WITH_CUDA=OFF)";
    return 0;
}

coll_status_t coll_nccl_open(const coll_nccl_ops_t **ops_p)
{
    (void)ops_p;
    return COLL_ERR_UNSUPPORTED;
}
