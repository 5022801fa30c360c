#include "desc.h"

#include "collective.h"

void coll_desc_format(const coll_desc_t *d, char *buf, size_t len)
{
    snprintf(buf, len, "count=%llu dtype=%s op=%s segment=%u world=%u",
             (unsigned long long)d->count, coll_dtype_name((coll_dtype_t)d->dtype),
             coll_redop_name((coll_redop_t)d->op), d->seg_bytes, d->world_size);
}
